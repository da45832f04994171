"""install/runtime_lock.py's rules: a chain's run-time requirements (dependencies first, each line
once, the SDK's modules apart); a lock resolved with the chain's own wheels left out, at the path
named by pin, Python and target; a lock checked before its wheels are downloaded: missing,
unreadable or stale, each an error naming the lock and the command that makes it again.
(render, parse and stale_reasons are runtime_set_test.py's.)"""

from __future__ import annotations

from typing import Any, Dict

import pytest
from pants.engine.addresses import Address
from pants.engine.fs import CreateDigest, Digest, DigestContents, FileContent, PathGlobs, RemovePrefix
from pants.engine.target import WrappedTarget

from rocm_build.errors import RocmBuildError
from rocm_build.install.runtime_lock import (
    ANY_COMMIT, REQUIREMENTS_IN, ChainRuntimeRequirements, ChainRuntimeRequirementsRequest, RuntimeLockCheck, RuntimeLockRequest,
    chain_runtime_requirements, check_runtime_lock, render, resolve_runtime_lock,
)  # fmt: skip
from rocm_build.locks.build_requirements import WHEELHOUSE_DIR, PipResolved, Wheelhouse, WheelhouseRequest
from rocm_build.locks.lockfile import BuildLock, LockedDist
from rocm_build.testutil.engine import drive
from rocm_build.testutil.specs import upstream_spec, wheel_spec
from rocm_build.toolchain.interpreters import BuildPython
from rocm_build.wheel.build_spec import WheelBuildSpec
from rocm_build.wheel.chain_order import WheelChain
from rocm_build.wheel.chain_versions import ChainVersions
from rocm_build.wheel.target_types import RocmWheelTarget

FA = Address("tests/mini/flash_attention", target_name="wheel")
TORCH = Address("tests/mini/torch", target_name="wheel")
PYTHON = BuildPython("/usr/bin/python3.11", "CPython", "3.11.2")
SPEC = wheel_spec(address=FA, upstream=upstream_spec("mini-flash_attention"))
LOCK = "3rdparty/run/py3.11/mini-flash_attention.lock"
REGENERATE = "pants lock-runtime-requirements tests/mini/flash_attention:wheel"
EINOPS = LockedDist("einops", "0.8.1", "a" * 64, "einops-0.8.1-py3-none-any.whl")
HOUSE, WHEELS = Digest("5" * 64, 5), Digest("6" * 64, 6)  # stand-ins the rule passes on


def wheel_target(address: Address, *requirements: str) -> RocmWheelTarget:
    return RocmWheelTarget({"source": ":src", "toolchain": "tests/mini:llvm", "runtime_requirements": list(requirements)}, address)


def test_a_chain_s_requirements_dependencies_first_each_once_the_sdk_s_apart() -> None:
    targets = {TORCH: wheel_target(TORCH, "typing-extensions", "amdsmi"), FA: wheel_target(FA, "einops", "typing-extensions")}

    def answer(output_type: type, request: Any) -> Any:
        return WheelChain((wheel_spec(address=TORCH), SPEC)) if output_type is WheelChain else WrappedTarget(targets[request.address])

    found, _ = drive(chain_runtime_requirements(ChainRuntimeRequirementsRequest(FA)), answer)
    assert found == ChainRuntimeRequirements(("einops", "typing-extensions"), ("typing-extensions", "einops"), (TORCH, FA), ("amdsmi",))


def test_a_lock_is_resolved_with_the_chain_s_wheels_left_out_under_its_pin_and_target() -> None:
    created = []

    def answer(output_type: type, request: Any) -> Any:
        if isinstance(request, CreateDigest):
            created.append({fc.path: fc.content for fc in request})
            return HOUSE
        chain = ChainVersions((), (), (("torch", "2.13.0", TORCH.spec),))
        return {WheelBuildSpec: SPEC, BuildPython: PYTHON, ChainVersions: chain, PipResolved: PipResolved((EINOPS,), ())}[output_type]

    request = RuntimeLockRequest(Address("tests/mini/flash_attention", target_name="wheel-on-therock"), ("einops", "torch"))
    resolved, asked = drive(resolve_runtime_lock(request), answer)
    assert resolved.path == "3rdparty/run/py3.11/mini-flash_attention.wheel-on-therock.lock"
    lock = resolved.lock
    assert (lock.pin, lock.commit, lock.python, lock.requirements, lock.files, lock.dists) == (
        "mini-flash_attention", ANY_COMMIT, "3.11", ("einops", "torch"), (), (EINOPS,)
    )
    assert created[0][REQUIREMENTS_IN] == b"einops\ntorch\n" and len(created[0]) > 1  # with torch's stub
    pip = next(r for t, r in asked if t is PipResolved)
    assert dict(pip.also_left_out)["torch"].count(TORCH.spec) == 1  # left out, naming the target that builds it


def check(lock_text: Any, requirements=("einops",)):
    """The check of FA's lock whose file says `lock_text` (None: no file)."""

    def answer(output_type: type, request: Any) -> Any:
        if isinstance(request, PathGlobs):
            assert request.globs == (LOCK,)
            return DigestContents([] if lock_text is None else [FileContent(LOCK, lock_text.encode())])
        if isinstance(request, CreateDigest):
            return HOUSE
        if isinstance(request, RemovePrefix):
            assert request == RemovePrefix(HOUSE, WHEELHOUSE_DIR)
            return WHEELS
        return {WheelBuildSpec: SPEC, BuildPython: PYTHON, Wheelhouse: Wheelhouse(HOUSE)}[output_type]

    return drive(check_runtime_lock(RuntimeLockCheck(FA, tuple(requirements))), answer)


LOCKED = BuildLock("mini-flash_attention", ANY_COMMIT, "3.11", ("einops",), (), (EINOPS,), regenerate=REGENERATE)


def test_a_lock_that_matches_is_downloaded() -> None:
    checked, asked = check(render(LOCKED))
    assert (checked.path, checked.lock, checked.wheels) == (LOCK, LOCKED, WHEELS)
    assert (Wheelhouse, WheelhouseRequest(FA.spec, LOCK, HOUSE, 1, PYTHON)) in asked


def test_a_missing_lock_names_the_command_that_makes_it() -> None:
    with pytest.raises(RocmBuildError) as e:
        check(None)
    assert str(e.value) == (
        f"rocm_wheel {FA.spec} has `runtime_requirements` ['einops'] (with those of its chain) but no lock at {LOCK}. "
        f"Make it (it resolves them against the index once and pins every file by sha256): {REGENERATE}"
    )


def test_a_stale_or_unreadable_lock_says_why_and_how_to_regenerate() -> None:
    with pytest.raises(RocmBuildError) as e:
        check(render(LOCKED), requirements=("einops", "six"))
    assert str(e.value) == (
        f"rocm_wheel {FA.spec}: the lock {LOCK} no longer matches its `runtime_requirements`: it was made from "
        "['einops'], the `runtime_requirements` of the target and its chain now say ['einops', 'six']. "
        f"Regenerate it: {REGENERATE}"
    )
    with pytest.raises(RocmBuildError) as e:
        check("einops==0.8.1\n")
    assert str(e.value).startswith(f"rocm_wheel {FA.spec}: {LOCK} is not a rocm-pants run-time requirements lock")
    assert str(e.value).endswith(f". Regenerate it: {REGENERATE}")
