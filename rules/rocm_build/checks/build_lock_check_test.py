"""checks/build_lock_check.py: a rocm_wheel with a lock has it checked against its tree and Python; a
lock that pins cmake is a problem, one that left pip's cmake out is a note naming the system cmake
builds use, or a problem when the toolchain's box has none. tests/e2e/preflight_test.py's
test_the_mini_chain_passes_in_seconds_and_names_the_cmake_builds_use (its note line), at the rule."""

from __future__ import annotations

from typing import Any, Dict

from pants.engine.addresses import Address
from pants.engine.fs import EMPTY_DIGEST

from rocm_build.checks.build_lock_check import BuildLockCheck, check_build_lock
from rocm_build.checks.findings import Findings, TreeUnderCheck
from rocm_build.errors import RocmBuildError
from rocm_build.locks.build_requirements import LockedRequirements, LockedRequirementsRequest
from rocm_build.locks.lockfile import BuildLock, LockedDist
from rocm_build.testutil.engine import drive
from rocm_build.testutil.specs import COMMIT, upstream_spec, wheel_spec
from rocm_build.toolchain.container import BuildEnvironment
from rocm_build.toolchain.interpreters import BuildPython
from rocm_build.toolchain.rocm_sdk import ResolvedToolchain
from rocm_build.upstream.source_tree import SourceTree
from rocm_build.upstream.upstream_repo import ResolvedUpstream

OWNER = "tests/mini/torch:wheel"
LOCK = "3rdparty/build/py3.11/mini-torch.lock"
CMAKE = "cmake version 3.31.6"
PYTHON = BuildPython("/usr/bin/python3.11", "CPython", "3.11.2")
SOURCE = SourceTree(EMPTY_DIGEST, EMPTY_DIGEST)
NINJA = LockedDist("ninja", "1.11.1", "a" * 64, "ninja-1.11.1-py3-none-any.whl")
PIP_CMAKE = LockedDist("cmake", "3.31.6", "b" * 64, "cmake-3.31.6-py3-none-any.whl")


def tree() -> TreeUnderCheck:
    up = upstream_spec()
    return TreeUnderCheck(ResolvedUpstream(up.address, up.pin_name, up.pin, (), SOURCE, "", 0), f"mini-torch at {COMMIT}")


def locked(*dists: LockedDist, left_out=()) -> LockedRequirements:
    return LockedRequirements(LOCK, "c" * 64, BuildLock("mini-torch", COMMIT, "3.11", (), (), dists, tuple(left_out)), EMPTY_DIGEST)


def toolchain(identity: str) -> ResolvedToolchain:
    return ResolvedToolchain(Address("tests/mini", target_name="llvm"), "llvm", identity, "llvm19", "")


def check(answers: Dict[type, Any], lock_path=LOCK):
    spec = wheel_spec(lock_path=lock_path, requirements=("ninja", "cmake"))
    defaults = {BuildPython: PYTHON, BuildEnvironment: BuildEnvironment("__local__", None)}
    return drive(check_build_lock(BuildLockCheck(spec, tree())), lambda t, _: {**defaults, **answers}[t])


def test_a_lock_is_checked_against_the_tree_and_python_and_counted() -> None:
    found, asked = check({LockedRequirements: locked(NINJA)})
    assert (found.problems, found.notes, found.summary, found.stop) == ((), (), ", 1 locked distribution(s)", False)
    assert asked[1] == (
        LockedRequirements, LockedRequirementsRequest(OWNER, LOCK, "mini-torch", COMMIT, ("ninja", "cmake"), SOURCE, PYTHON)
    )


def test_no_lock_asks_for_nothing() -> None:
    found, asked = check({}, lock_path=None)
    assert (found, asked) == (Findings(), [])


def test_a_lock_that_pins_cmake_names_the_regeneration() -> None:
    found, _ = check({LockedRequirements: locked(NINJA, PIP_CMAKE)})
    assert found.problems == (
        f"{OWNER}: the lock {LOCK} pins cmake==3.31.6, which would put pip's cmake on PATH (the build refuses it: "
        f"builds use the system's cmake). Regenerate the lock (it leaves cmake out): pants lock-build-requirements {OWNER}",
    )


def test_cmake_left_out_names_the_system_cmake_or_its_absence() -> None:
    left = locked(NINJA, left_out=("cmake==3.31.6 (the system's)",))
    found, _ = check({LockedRequirements: left, ResolvedToolchain: toolchain(f"clang 19\n{CMAKE}")})
    assert (found.problems, found.notes) == ((), (f"{LOCK} left out pip's cmake==3.31.6: builds use the system cmake ({CMAKE})",))
    missing, _ = check({LockedRequirements: left, ResolvedToolchain: toolchain("clang 19")})
    assert missing.problems == (
        f"{OWNER}: its requirements ask for cmake, which the lock leaves to the system (builds use the system's cmake), "
        "but there is no cmake in /usr/bin. Install it: apt-get install cmake (dnf install cmake).",
    )
    assert missing.notes == (f"{LOCK} left out pip's cmake==3.31.6: builds use the system cmake (missing)",)


def test_a_stale_lock_stops_the_checks_after_it() -> None:
    stale = RocmBuildError(f"{OWNER}: {LOCK} was made from other requirement files")
    found, _ = check({LockedRequirements: stale})
    assert (found.problems, found.stop) == ((str(stale),), True)
