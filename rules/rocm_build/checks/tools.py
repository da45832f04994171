"""Quick check: what builds with is there: the build image, then in it (or on this machine) the
toolchain, the Python and, for a Rust build, cargo and rustc."""

from __future__ import annotations

from typing import List

from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.checks.findings import QuickCheckRequest, EXPECTED_FAILURES, Findings, problem_text
from rocm_build.toolchain.container import BuildEnvironment, BuildEnvironmentRequest
from rocm_build.toolchain.interpreters import BuildPython, BuildPythonRequest
from rocm_build.toolchain.rocm_sdk import ResolvedToolchain, ToolchainRequest
from rocm_build.toolchain.rust import RustToolchain, RustToolchainRequest
from rocm_build.toolchain import container, interpreters, rocm_sdk
from rocm_build.toolchain import rust as rust_toolchain


class ToolsCheck(QuickCheckRequest):
    pass


@rule(desc="Checking what a rocm_wheel builds with", level=LogLevel.DEBUG)
async def check_tools(request: ToolsCheck) -> Findings:
    spec = request.spec
    owner = spec.owner
    try:
        # First: the toolchain and Python are looked for in the image.
        image = (await Get(BuildEnvironment, BuildEnvironmentRequest(spec.environment, owner))).image
    except EXPECTED_FAILURES as e:
        return Findings.failed(e)
    problems: List[str] = []
    try:
        await Get(ResolvedToolchain, ToolchainRequest(spec.toolchain, f"the `toolchain` field of {owner}", image, spec.gpu_targets))
    except EXPECTED_FAILURES as e:
        problems.append(problem_text(e))
    try:
        await Get(BuildPython, BuildPythonRequest(spec.python, owner, image))
    except EXPECTED_FAILURES as e:
        problems.append(problem_text(e))
    if spec.rust:
        try:
            await Get(RustToolchain, RustToolchainRequest(owner, image))
        except EXPECTED_FAILURES as e:
            problems.append(problem_text(e))
    return Findings(tuple(problems))


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        *container.rules(),
        *rocm_sdk.rules(),
        *interpreters.rules(),
        *rust_toolchain.rules(),
    ])
