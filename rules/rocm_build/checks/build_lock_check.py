"""Tree check: the build-requirements lock matches the patched tree (the requirement files it was
made from; its wheelhouse downloaded), and keeps pip's cmake off PATH: a lock that pins cmake
is a problem, one that left cmake out needs the system's (seed 000)."""

from __future__ import annotations

from typing import List, Optional

from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.checks.findings import TreeCheckRequest, EXPECTED_FAILURES, Findings
from rocm_build.locks import build_requirements
from rocm_build.locks.build_requirements import LockedRequirements, LockedRequirementsRequest
from rocm_build.toolchain import container, interpreters, rocm_sdk
from rocm_build.toolchain.container import BuildEnvironment, BuildEnvironmentRequest
from rocm_build.toolchain.interpreters import BuildPython, BuildPythonRequest
from rocm_build.toolchain.rocm_sdk import ResolvedToolchain, ToolchainRequest
from rocm_build.wheel.build_spec import WheelBuildSpec, lock_request


class BuildLockCheck(TreeCheckRequest):
    pass


@rule(desc="Checking a rocm_wheel's build lock against its tree", level=LogLevel.DEBUG)
async def check_build_lock(request: BuildLockCheck) -> Findings:
    spec, tree = request.spec, request.tree
    owner = spec.owner
    if not spec.lock_path:
        return Findings()
    try:
        python = await Get(BuildPython, BuildPythonRequest(spec.python, owner))
        locked = await Get(LockedRequirements, LockedRequirementsRequest, lock_request(spec, tree.upstream, python))
    except EXPECTED_FAILURES as e:
        return Findings.failed(e, stop=True)
    summary = f", {len(locked.lock.dists)} locked distribution(s)"
    problems: List[str] = _pip_cmake_in_lock(spec, locked)
    if not any(d.lower().startswith("cmake==") for d in locked.lock.left_out):
        return Findings(tuple(problems), summary=summary)
    try:
        environment = await Get(BuildEnvironment, BuildEnvironmentRequest(spec.environment, owner))
        toolchain = await Get(
            ResolvedToolchain, ToolchainRequest(spec.toolchain, f"the `toolchain` field of {owner}", environment.image, spec.gpu_targets)
        )
    except EXPECTED_FAILURES:
        return Findings(tuple(problems), summary=summary, stop=True)  # the quick checks say why
    if not toolchain.system_cmake:
        problems.append(
            f"{owner}: its requirements ask for cmake, which the lock leaves to the system (builds use the system's cmake), "
            "but there is no cmake in /usr/bin. Install it: apt-get install cmake (dnf install cmake)."
        )
    return Findings(tuple(problems), (_cmake_left_out(locked, toolchain.system_cmake),), summary)


def _pip_cmake_in_lock(spec: WheelBuildSpec, locked: LockedRequirements) -> List[str]:
    return [
        f"{spec.owner}: the lock {locked.lock_path} pins {d.name}=={d.version}, which would put pip's cmake "
        f"on PATH (the build refuses it: builds use the system's cmake). Regenerate the lock (it leaves cmake out): "
        f"pants lock-build-requirements {spec.owner}"
        for d in locked.lock.dists
        if d.name.lower() == "cmake"
    ]


def _cmake_left_out(locked: LockedRequirements, system_cmake: Optional[str]) -> str:
    (left,) = [d for d in locked.lock.left_out if d.lower().startswith("cmake==")]
    return f"{locked.lock_path} left out pip's {left.split(' ')[0]}: builds use the system cmake ({system_cmake or 'missing'})"


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        *build_requirements.rules(),
        *container.rules(),
        *rocm_sdk.rules(),
        *interpreters.rules(),
    ])
