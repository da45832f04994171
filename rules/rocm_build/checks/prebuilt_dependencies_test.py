"""checks/prebuilt_dependencies.py: each prebuilt wheel a rocm_wheel depends on must be resolved,
install on its Python and be built for its toolchain's ROCm; a split host (TheRock's) needs its
device wheel for each gpu target. Each problem names the wheel, its pin and the fix; a prebuilt
that cannot be read is reported and the others are still checked.
tests/e2e/prebuilt_test.py's test_1_an_unresolved_pin_stops_before_any_build and
tests/e2e/errors_test.py's "sdk without its device wheel" case (the whole run: prebuilt_test.py test_6), at the rule."""

from __future__ import annotations

from typing import Any, Dict

from pants.engine.addresses import Address
from pants.engine.target import WrappedTarget

from rocm_build.checks.prebuilt_dependencies import PrebuiltDependenciesCheck, check_prebuilt_dependencies
from rocm_build.errors import RocmBuildError
from rocm_build.pins.tables import PrebuiltPin
from rocm_build.prebuilt.wheel_rules import PrebuiltRequest, PrebuiltSpec
from rocm_build.testutil.engine import drive
from rocm_build.testutil.specs import wheel_spec
from rocm_build.toolchain.target_types import RocmToolchainTarget

OWNER = "tests/mini/torch:wheel"
PINS = "tests/mini/pins"
LLVM = Address("tests/mini", target_name="llvm")
CORE = Address("tests/mini/sdk", target_name="core")
GFX1151 = Address("tests/mini/sdk", target_name="gfx1151")
DEVICE_PROJECT = "mini-rocm-sdk-core-device-gfx1151"


def pin(project: str, **fields: Any) -> PrebuiltPin:
    resolved = dict(python="3.11", version="1.0.0", file=f"{project.replace('-', '_')}-1.0.0-py3-none-linux_x86_64.whl", sha256="a" * 64)
    return PrebuiltPin(index_url="https://example.invalid/simple/", project=project, **{**resolved, **fields})


CORE_SPEC = PrebuiltSpec(CORE, "mini-sdk", pin("mini-rocm-sdk-core"), PINS, device_pins=(("mini-sdk-gfx1151", DEVICE_PROJECT),))
DEVICE_SPEC = PrebuiltSpec(GFX1151, "mini-sdk-gfx1151", pin(DEVICE_PROJECT, device_of="mini-sdk"), PINS)


def check(prebuilt: Dict[Address, Any], version: str = "7.0.0", **spec: Any):
    toolchain = RocmToolchainTarget({"provider": "llvm", "version": version}, LLVM)

    def answer(output_type: type, request: Any) -> Any:
        if output_type is WrappedTarget:
            return WrappedTarget(toolchain)
        assert request == PrebuiltRequest(request.address, f"the `dependencies` field of {OWNER}")
        return prebuilt[request.address]

    return drive(check_prebuilt_dependencies(PrebuiltDependenciesCheck(wheel_spec(prebuilt=tuple(prebuilt), **spec))), answer)


def test_a_split_host_with_its_device_wheel_passes() -> None:
    found, _ = check({CORE: CORE_SPEC, GFX1151: DEVICE_SPEC})
    assert found.problems == ()


def test_a_split_host_without_the_device_wheel_of_a_target_names_its_pin() -> None:
    found, _ = check({CORE: CORE_SPEC})
    assert found.problems == (
        f"{OWNER} builds for gfx1151 (gpu_targets) on prebuilt_wheel tests/mini/sdk:core (mini-rocm-sdk-core, "
        "pin `mini-sdk`), whose GPU code is in device wheels, but depends on none for gfx1151: add the prebuilt_wheel of "
        "pin `mini-sdk-gfx1151` to its `dependencies`",
    )


def test_an_unresolved_pin_names_update_pins() -> None:
    unresolved = PrebuiltSpec(CORE, "mini-sdk", pin("mini-rocm-sdk-core", version="", file="", sha256=""), PINS)
    found, _ = check({CORE: unresolved})
    assert found.problems == (
        f"prebuilt_wheel tests/mini/sdk:core: pin `mini-sdk` ([prebuilt.mini-sdk] in {PINS}) is not resolved: it has "
        "no version, file and sha256 yet. Run `pants run rules:update-pins -- --only mini-sdk` where the index "
        "(https://example.invalid/simple/) is reachable; never write a sha256 you have not checked.",
    )


def test_a_wheel_for_another_python_and_another_rocm() -> None:
    other = PrebuiltSpec(CORE, "mini-sdk", pin("mini-rocm-sdk-core", python="3.12", file="mini-1.0.0-cp312-cp312-linux_x86_64.whl", requires_rocm="7.1.0"), PINS)
    found, _ = check({CORE: other})
    assert found.problems == (
        f"{OWNER} builds with Python 3.11, but prebuilt_wheel tests/mini/sdk:core is pinned for Python 3.12 "
        f"([prebuilt.mini-sdk] in {PINS}): it could not be installed beside it.",
        f"{OWNER} builds against prebuilt_wheel tests/mini/sdk:core (mini-rocm-sdk-core 1.0.0), which requires "
        "rocm==7.1.0, but its rocm_toolchain tests/mini:llvm is version 7.0.0. Set tests/mini:llvm's `version` to 7.1.0, "
        f"or move the pin `mini-sdk` ([prebuilt.mini-sdk] in {PINS}) to a wheel built for that ROCm.",
    )


def test_a_prebuilt_that_cannot_be_read_is_reported_and_the_others_checked() -> None:
    gone = RocmBuildError("the `dependencies` field of tests/mini/torch:wheel names tests/mini/sdk:gone, a `file`")
    found, asked = check({Address("tests/mini/sdk", target_name="gone"): gone, CORE: CORE_SPEC, GFX1151: DEVICE_SPEC})
    assert found.problems == (str(gone),)
    assert [t for t, _ in asked].count(PrebuiltSpec) == 3


def test_no_prebuilt_dependencies_asks_for_nothing() -> None:
    found, asked = check({})
    assert (found.problems, asked) == ((), [])
