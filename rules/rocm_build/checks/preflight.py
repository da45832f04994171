"""The preflight: the checks of one rocm_wheel that need no compile, run before the first build
of a chain. Each check is a module of this folder; the two lists below are all of them.

A torch build takes hours; everything that can be known in minutes is checked first, in two
stages: `QuickCheck` reads only BUILD files, pins, the toolchain and the interpreter;
`TreeCheck` fetches and patches the pinned tree, then runs the checks that read it. `package`
runs both stages for the whole chain (chain.py); `pants check` and `rocm-plan --check` report
what they found (goals/preflight_report.py).

Each problem is a sentence naming the target, what is wrong and how to fix it. Problems are
collected, not raised, so one run reports every component's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List

from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.unions import UnionMembership, UnionRule
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.checks import (
    archive_pin_check, build_lock_check, gpu_targets, prebuilt_dependencies, recipe_files, recipe_pairing, shared_patch_sets, tools, upstream_steps,
)  # fmt: skip
from rocm_build.checks.findings import EXPECTED_FAILURES, ComponentStatus, Findings, QuickCheckRequest, TreeCheckRequest, TreeUnderCheck, problem_text
from rocm_build.locks import build_requirements
from rocm_build.locks.build_requirements import LockWheels, LockWheelsRequest
from rocm_build.prebuilt import wheel_rules as prebuilt_rules
from rocm_build.prebuilt.wheel_rules import FetchedPrebuilt, PrebuiltRequest
from rocm_build.toolchain import interpreters
from rocm_build.toolchain.interpreters import BuildPython, BuildPythonRequest
from rocm_build.upstream import upstream_repo
from rocm_build.upstream.upstream_repo import ResolvedUpstream, UpstreamRequest
from rocm_build.wheel import chain_versions
from rocm_build.wheel import build_spec
from rocm_build.wheel.build_spec import WheelBuildSpec, WheelRequest

# Every check, in the order they run and report: a module of this folder each. Add one as a
# module and an entry here (docs/layout.md, "Add a check").
QUICK_CHECKS = (
    gpu_targets.GpuTargetsCheck,
    tools.ToolsCheck,
    prebuilt_dependencies.PrebuiltDependenciesCheck,
    archive_pin_check.ArchivePinsCheck,
)
TREE_CHECKS = (
    recipe_pairing.PairingCheck,
    recipe_files.RecipeFilesCheck,
    # Gated (GATED): they run only while the component has no problem. The lock's check
    # downloads a wheelhouse, the upstream's steps run its build's sandbox, and either would
    # only say again what is already wrong.
    build_lock_check.BuildLockCheck,
    upstream_steps.UpstreamStepsCheck,
)
GATED = (build_lock_check.BuildLockCheck, upstream_steps.UpstreamStepsCheck)
# Not a build's check, so in neither list: the report's (`pants check`, `rocm-plan --check`;
# goals/preflight_report.py) tries each source's patch sets on the other sources that apply
# them (shared_patch_sets.py). `package` does not wait for another source's fetch.
CHECK_MODULES = (archive_pin_check, build_lock_check, gpu_targets, prebuilt_dependencies, recipe_files, recipe_pairing, shared_patch_sets, tools, upstream_steps)


class QuickCheck(WheelRequest):
    """A rocm_wheel's checks that need no tree: its fields, toolchain, lock and dependencies."""


class TreeCheck(WheelRequest):
    """A rocm_wheel's checks of its patched tree: recipe paths and the upstream's own steps."""


@rule(desc="Checking a rocm_wheel's toolchain, gpu targets and archives")
async def quick_check(request: QuickCheck, union_membership: UnionMembership) -> ComponentStatus:
    spec = await Get(WheelBuildSpec, WheelRequest(request.address))
    unsupported = spec.unsupported_gpu_targets()
    if unsupported and spec.optional:
        return ComponentStatus(spec.owner, skipped=f"{unsupported}. It is optional: skipped, its dependents are built without it.")
    # The union's members, in QUICK_CHECKS' order, at once.
    checks = union_membership.get(QuickCheckRequest)
    found = await MultiGet(Get(Findings, QuickCheckRequest, check(spec)) for check in checks)
    return ComponentStatus(spec.owner, tuple(p for f in found for p in f.problems))


@dataclass(frozen=True)
class EarlyLockWheelsRequest:
    spec: WheelBuildSpec


@dataclass(frozen=True)
class EarlyLockWheels:
    """The lock's wheels were asked for (or there is no lock); never an error."""


@rule(desc="Downloading a rocm_wheel's locked build requirements", level=LogLevel.DEBUG)
async def early_lock_wheels(request: EarlyLockWheelsRequest) -> EarlyLockWheels:
    """The lock's wheels beside the tree, not after it. What goes wrong is the lock check's to
    name (it asks again): its problem is the one to show, with the tree's, not a download's."""
    spec = request.spec
    if spec.lock_path:
        try:
            python = await Get(BuildPython, BuildPythonRequest(spec.python, spec.owner))
            await Get(LockWheels, LockWheelsRequest(spec.owner, spec.lock_path, python))
        except EXPECTED_FAILURES:
            pass
    return EarlyLockWheels()


@rule(desc="Fetching, patching and checking a rocm_wheel's tree")
async def tree_check(request: TreeCheck, union_membership: UnionMembership) -> ComponentStatus:
    spec = await Get(WheelBuildSpec, WheelRequest(request.address))
    owner = spec.owner
    if spec.optional and spec.unsupported_gpu_targets():
        return ComponentStatus(owner)  # skipped: QuickCheck says why
    try:
        # The tree and the prebuilt wheels (now: a bad sha256 stops the chain before any
        # build), and the lock's wheels for its check, downloaded at once.
        upstream, *_ = await MultiGet(
            [
                Get(ResolvedUpstream, UpstreamRequest(spec.upstream.address, f"the `source` field of {owner}")),
                Get(EarlyLockWheels, EarlyLockWheelsRequest(spec)),
                *(Get(FetchedPrebuilt, PrebuiltRequest(a, f"the `dependencies` field of {owner}")) for a in spec.prebuilt),
            ]
        )
    except EXPECTED_FAILURES as e:
        return ComponentStatus(owner, (problem_text(e),))
    tree = TreeUnderCheck(upstream, f"{upstream.pin_name} at {upstream.pin.commit}")
    problems: List[str] = []
    notes: List[str] = []
    summary = f"{upstream.pin_name} {upstream.pin.commit[:12]}, {len(upstream.patches)} patch(es)"
    for check in union_membership.get(TreeCheckRequest):
        if check in GATED and problems:
            continue
        found = await Get(Findings, TreeCheckRequest, check(spec, tree))
        problems += found.problems
        notes += found.notes
        summary += found.summary
        if found.stop:
            break
    return ComponentStatus(owner, tuple(problems), tuple(notes), summary=summary)


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        *(r for module in CHECK_MODULES for r in module.rules()),
        *chain_versions.rules(),
        *build_requirements.rules(),
        *interpreters.rules(),
        *prebuilt_rules.rules(),
        *upstream_repo.rules(),
        *build_spec.rules(),
        *(UnionRule(QuickCheckRequest, check) for check in QUICK_CHECKS),
        *(UnionRule(TreeCheckRequest, check) for check in TREE_CHECKS),
    ])
