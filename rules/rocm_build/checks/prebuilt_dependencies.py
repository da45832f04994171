"""Quick check: the prebuilt wheels a rocm_wheel depends on are resolved, install on its Python
and were built for its toolchain's ROCm (no download), with the device wheels TheRock splits off
for each gpu target."""

from __future__ import annotations

from typing import List

from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.checks.findings import QuickCheckRequest, EXPECTED_FAILURES, Findings, problem_text
from rocm_build.prebuilt import wheel_rules as prebuilt_rules
from rocm_build.prebuilt.wheel_rules import PrebuiltRequest, PrebuiltSpec, missing_device_wheels
from rocm_build.prebuilt.wheel_tags import fits
from rocm_build.target_types_rules import expect_target
from rocm_build.toolchain.interpreters import parse_constraint
from rocm_build.toolchain.target_types import RocmToolchainTarget, ToolchainVersionField


class PrebuiltDependenciesCheck(QuickCheckRequest):
    pass


@rule(desc="Checking a rocm_wheel's prebuilt dependencies", level=LogLevel.DEBUG)
async def check_prebuilt_dependencies(request: PrebuiltDependenciesCheck) -> Findings:
    spec = request.spec
    """Prebuilt dependencies: resolved, for this Python, for this toolchain's ROCm (no download)."""
    problems: List[str] = []
    if not spec.prebuilt:
        return Findings()
    toolchain = await expect_target(spec.toolchain, RocmToolchainTarget, f"the `toolchain` field of {spec.owner}")
    version = toolchain[ToolchainVersionField].value
    minor = parse_constraint(spec.python, spec.owner).minor
    found: List[PrebuiltSpec] = []
    for address in spec.prebuilt:
        try:
            prebuilt = await Get(PrebuiltSpec, PrebuiltRequest(address, f"the `dependencies` field of {spec.owner}"))
        except EXPECTED_FAILURES as e:
            problems.append(problem_text(e))
            continue
        found.append(prebuilt)
        # A resolved pin's file says which Pythons it installs on (a py3-none wheel: all).
        installs = fits(prebuilt.pin.file, minor) is not None if prebuilt.pin.file else prebuilt.pin.python == minor
        if minor and not installs:
            problems.append(
                f"{spec.owner} builds with Python {minor}, but prebuilt_wheel {prebuilt.owner} is pinned for Python "
                f"{prebuilt.pin.python} ({prebuilt.where}): it could not be installed beside it."
            )
        problems += [p for p in (prebuilt.unresolved(), prebuilt.rocm_mismatch(spec.owner, spec.toolchain.spec, version)) if p]
    return Findings(tuple(missing_device_wheels(spec.owner, spec.gpu_targets, found) + problems))  # TheRock's split wheels


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        *prebuilt_rules.rules(),
    ])
