"""checks/tools.py: the build environment first (without it nothing else can be looked for, so
its failure is the only problem), then the toolchain, the Python and, for a Rust build, cargo,
each looked for in the environment's image and each failure reported, not only the first."""

from __future__ import annotations

from typing import Any, Dict

import pytest
from pants.build_graph.address import ResolveError
from pants.engine.addresses import Address

from rocm_build.checks.tools import ToolsCheck, check_tools
from rocm_build.errors import RocmBuildError
from rocm_build.testutil.engine import drive
from rocm_build.testutil.specs import wheel_spec
from rocm_build.toolchain.container import BuildEnvironment, BuildEnvironmentRequest
from rocm_build.toolchain.interpreters import BuildPython, BuildPythonRequest
from rocm_build.toolchain.rocm_sdk import ResolvedToolchain, ToolchainRequest
from rocm_build.toolchain.rust import RustToolchain, RustToolchainRequest

OWNER = "tests/mini/torch:wheel"
IMAGE: Any = object()  # what the environment's image is does not matter here, only that it is passed on


def run(answers: Dict[type, Any], **spec):
    """The check with each Get answered by its output type; what is not given is found."""
    return drive(check_tools(ToolsCheck(wheel_spec(environment="mini-box", **spec))), lambda t, _: answers.get(t, object()))


def test_each_tool_is_looked_for_in_the_environment_image() -> None:
    found, asked = run({BuildEnvironment: BuildEnvironment("mini-box", IMAGE)}, cargo_lock="rust/Cargo.lock")
    assert found.problems == ()
    assert asked == [
        (BuildEnvironment, BuildEnvironmentRequest("mini-box", OWNER)),
        (ResolvedToolchain, ToolchainRequest(Address("tests/mini", target_name="llvm"), f"the `toolchain` field of {OWNER}", IMAGE, ("gfx1151",))),
        (BuildPython, BuildPythonRequest("CPython==3.11.*", OWNER, IMAGE)),
        (RustToolchain, RustToolchainRequest(OWNER, IMAGE)),
    ]


def test_without_a_cargo_lock_no_rust_toolchain_is_asked_for() -> None:
    _, asked = run({BuildEnvironment: BuildEnvironment("mini-box", IMAGE)})
    assert [t for t, _ in asked] == [BuildEnvironment, ResolvedToolchain, BuildPython]


def test_every_missing_tool_is_a_problem() -> None:
    answers = {
        BuildEnvironment: BuildEnvironment("mini-box", IMAGE),
        ResolvedToolchain: RocmBuildError("no clang in the image"),
        BuildPython: RocmBuildError("no CPython==3.11.* in the image"),
        RustToolchain: RocmBuildError("no cargo in the image"),
    }
    found, _ = run(answers, cargo_lock="rust/Cargo.lock")
    assert found.problems == ("no clang in the image", "no CPython==3.11.* in the image", "no cargo in the image")


def test_a_missing_environment_is_the_only_problem() -> None:
    found, asked = run({BuildEnvironment: ResolveError("environment `mini-box` is not defined")})
    assert found.problems == ("environment `mini-box` is not defined",)
    assert [t for t, _ in asked] == [BuildEnvironment]


def test_a_bug_is_not_reported_as_a_problem() -> None:
    # Only the failures meant for a person are findings (findings.EXPECTED_FAILURES).
    with pytest.raises(KeyError):
        run({BuildEnvironment: BuildEnvironment("mini-box", IMAGE), BuildPython: KeyError("bug")})
