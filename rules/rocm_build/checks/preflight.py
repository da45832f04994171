"""Checks of one rocm_wheel that need no compile, run before the first build of a chain.

A torch build takes hours; everything that can be known in minutes is checked first, in two
stages: `QuickCheck` reads only BUILD files, pins, the toolchain and the interpreter (gpu
targets against upstream's list, toolchain and Python present, archives resolved, cargo and
rustc present for a Rust build); `TreeCheck` fetches and patches the
pinned tree, then looks for every file the recipe names, checks the lock against the tree
(downloading its wheelhouse) and that pip's cmake cannot end up on PATH. `package` runs
both stages for the whole chain (chain.py); `pants check` and `rocm-plan --check` report what
they found (goals/preflight_report.py).

Each problem is a sentence naming the target, what is wrong and how to fix it. Problems are
collected, not raised, so one run reports every component's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import List, Optional, Tuple

from pants.build_graph.address import ResolveError
from pants.engine.engine_aware import EngineAwareReturnType
from pants.engine.process import ProcessExecutionFailure
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import InvalidFieldException
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.errors import RocmBuildError
from rocm_build.install.requires_check import requires_findings
from rocm_build.install.runtime_lock import ChainRuntimeRequirements, ChainRuntimeRequirementsRequest
from rocm_build.upstream.archives import ArchiveRequest, ArchiveSpec, pin_problem
from rocm_build.wheel.build_spec import WheelBuildSpec, WheelRequest, lock_request
from rocm_build.locks.build_requirements import LockedRequirements, LockedRequirementsRequest, LockWheels, LockWheelsRequest
from rocm_build.toolchain.container import BuildEnvironment, BuildEnvironmentRequest, BuildImage
from rocm_build.toolchain.interpreters import BuildPython, BuildPythonRequest, parse_constraint
from rocm_build.upstream.prebuilt import FetchedPrebuilt, PrebuiltRequest, PrebuiltSpec, missing_device_wheels
from rocm_build.upstream.wheel_tags import fits
from rocm_build.wheel.recipe_paths import PROJECT_FILES, missing_paths, named_paths
from rocm_build.upstream.source_tree import source_files
from rocm_build.toolchain.target_types import RocmToolchainTarget, ToolchainVersionField
from rocm_build.target_types_rules import expect_target
from rocm_build.toolchain.rocm_sdk import ResolvedToolchain, ToolchainRequest
from rocm_build.toolchain.rust import RustToolchain, RustToolchainRequest
from rocm_build.checks import recipe_pairing, upstream_steps
from rocm_build.wheel import chain_versions
from rocm_build.wheel.chain_versions import ChainVersions, ChainVersionsRequest, version_findings
from rocm_build.checks.recipe_pairing import ComponentPairingRequest, RecipePairing
from rocm_build.upstream.upstream_repo import ResolvedUpstream, UpstreamRequest
from rocm_build.checks.upstream_steps import MetadataHook, MetadataHookRequest, download_findings, hook_findings
from rocm_build.upstream.tree_scan import TreeScan, TreeScanRequest
from rocm_build.install import runtime_lock
from rocm_build.locks import build_requirements
from rocm_build.toolchain import container, interpreters, rocm_sdk
from rocm_build.toolchain import rust as rust_toolchain
from rocm_build.upstream import archives as upstream_archives
from rocm_build.upstream import prebuilt as upstream_prebuilt
from rocm_build.upstream import source_tree, tree_scan, upstream_repo
from rocm_build.wheel import build_spec

PIP_INSTALLS_CMAKE = re.compile(r"\bpip3?\b.*\binstall\b.*(?<![\w.-])cmake(?![\w.-])")


class QuickCheck(WheelRequest):
    """A rocm_wheel's checks that need no tree: its fields, toolchain, lock and dependencies."""


class TreeCheck(WheelRequest):
    """A rocm_wheel's checks of its patched tree: recipe paths and the upstream's own steps."""


@dataclass(frozen=True)
class ComponentStatus(EngineAwareReturnType):
    owner: str
    problems: Tuple[str, ...] = ()
    notes: Tuple[str, ...] = ()  # worth knowing, not wrong (e.g. which cmake builds use)
    skipped: Optional[str] = None  # an optional component that will not be built, and why
    summary: str = ""  # what was checked, for the `ok` line

    def cacheable(self) -> bool:
        # The checks catch the failures of the rules they ask (to report every problem, not
        # the first). Pants keeps no dependencies of a failed rule, so a status made from a
        # caught failure would not be invalidated when the file that caused it is fixed: it is
        # made again in each run instead (what the checks ask for is memoized as usual).
        return False


# What a check turns into a problem: the failures our rules and Pants raise for a person (a
# sentence naming the target and the fix). Anything else is a bug of ours, and surfaces as one.
EXPECTED_FAILURES = (RocmBuildError, ResolveError, InvalidFieldException, ProcessExecutionFailure)


def problem_text(e: Exception) -> str:
    """A failed Get's message: our rules raise RocmBuildError with a complete sentence."""
    return str(e).strip()


async def _missing_files(spec: WheelBuildSpec, upstream: ResolvedUpstream, where: str) -> List[str]:
    named = named_paths(spec.requirements, spec.steps, spec.wheel_command)
    candidates = tuple(dict.fromkeys(c for p in named for c in p.candidates()))
    present = [path for path, content in (await source_files(upstream.source, candidates, spec.owner)).items() if content is not None]
    problems = []
    for p in missing_paths(named, present):
        what = f"{p.path or 'the tree root'} has no {' or '.join(PROJECT_FILES)}" if p.is_project else f"{p.path} is not in the tree"
        problems.append(
            f"{spec.owner}: {what} of {where} (patched), but its {p.named_by} needs it. Fix the recipe "
            f"in {spec.address.spec_path}/BUILD (upstream may have moved the file), or move the pin to a "
            "commit that has it."
        )
    return problems


def _pip_cmake_steps(spec: WheelBuildSpec) -> List[str]:
    return [
        f"{spec.owner}: build_command `{step}` pip-installs cmake, which would come before the system "
        "cmake on PATH (the build refuses it, seed 000). Remove it: builds use the toolchain's cmake."
        for step in spec.steps
        if PIP_INSTALLS_CMAKE.search(step)
    ]


def _pip_cmake_in_lock(spec: WheelBuildSpec, locked: LockedRequirements) -> List[str]:
    return [
        f"{spec.owner}: the lock {locked.lock_path} pins {d.name}=={d.version}, which would put pip's cmake "
        f"on PATH (the build refuses it, seed 000). Regenerate the lock (it leaves cmake out): "
        f"pants lock-build-requirements {spec.owner}"
        for d in locked.lock.dists
        if d.name.lower() == "cmake"
    ]


def _cmake_left_out(locked: LockedRequirements, system_cmake: Optional[str]) -> str:
    (left,) = [d for d in locked.lock.left_out if d.lower().startswith("cmake==")]
    return f"{locked.lock_path} left out pip's {left.split(' ')[0]}: builds use the system cmake ({system_cmake or 'missing'})"


async def _prebuilt_problems(spec: WheelBuildSpec) -> List[str]:
    """Prebuilt dependencies: resolved, for this Python, for this toolchain's ROCm (no download)."""
    problems: List[str] = []
    if not spec.prebuilt:
        return problems
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
    return missing_device_wheels(spec.owner, spec.gpu_targets, found) + problems  # TheRock's split wheels


async def _image(spec: WheelBuildSpec) -> Optional[BuildImage]:
    return (await Get(BuildEnvironment, BuildEnvironmentRequest(spec.environment, spec.owner))).image


@rule(desc="Checking a rocm_wheel's toolchain, gpu targets and archives")
async def quick_check(request: QuickCheck) -> ComponentStatus:
    spec = await Get(WheelBuildSpec, WheelRequest(request.address))
    owner = spec.owner
    unsupported = spec.unsupported_gpu_targets()
    if unsupported and spec.optional:
        return ComponentStatus(owner, skipped=f"{unsupported}. It is optional: skipped, its dependents are built without it.")
    problems: List[str] = []
    if unsupported:
        problems.append(
            f"{unsupported}. Drop the target from `gpu_targets`, make the component `optional=True`, or "
            "move its pin to a commit whose upstream builds it (and update `supported_gpu_targets`)."
        )
    try:
        image = await _image(spec)  # first: the toolchain and Python are looked for in it
    except EXPECTED_FAILURES as e:
        problems.append(problem_text(e))
    else:
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
    problems += await _prebuilt_problems(spec)
    archives = [(address, f"the `archives` field of {owner}") for _, address in spec.archives]
    for address, origin in archives:
        try:
            archive = await Get(ArchiveSpec, ArchiveRequest(address, origin))
        except EXPECTED_FAILURES as e:
            problems.append(problem_text(e))
            continue
        problem = pin_problem(archive)
        if problem:
            problems.append(problem)
    return ComponentStatus(owner, tuple(problems))


async def _upstream_steps(spec: WheelBuildSpec, upstream: ResolvedUpstream, where: str) -> Tuple[List[str], List[str]]:
    """The upstream's own cheap steps (upstream_steps.py): its tree scanned for downloads and
    the torch/triton it names, then its metadata hook run in the build's sandbox."""
    try:
        scan = json.loads((await Get(TreeScan, TreeScanRequest(upstream.source, spec.owner))).result)
        chain = await Get(ChainVersions, ChainVersionsRequest(spec.address))
    except EXPECTED_FAILURES as e:
        return [problem_text(e)], []
    projects = [p.path for p in named_paths(spec.requirements, spec.steps, spec.wheel_command) if p.is_project]
    problems, notes = download_findings(spec, where, scan, projects[0] if projects else "")
    problems += version_findings(spec, where, scan, chain.versions)
    if not projects:
        return problems, [*notes, f"metadata hook not run: the wheel command `{spec.wheel_command}` names no project directory"]
    try:
        hook = await Get(MetadataHook, MetadataHookRequest(spec.address, projects[0]))
    except EXPECTED_FAILURES as e:
        return [*problems, problem_text(e)], notes
    result = json.loads(hook.result)
    found, more_notes = hook_findings(spec, projects[0], where, result, dict(chain.provided))
    # What the wheel will require at run time, against what its install set will hold.
    runtime = await Get(ChainRuntimeRequirements, ChainRuntimeRequirementsRequest(spec.address))
    found += requires_findings(
        spec.owner, f"{spec.address.spec_path}/BUILD", f"{projects[0]}/{result['file']}".lstrip("/"), result["requires_dist"],
        [*(name for name, _, _ in chain.dists), *runtime.sdk], [*runtime.chain],
    )  # fmt: skip
    return [*problems, *found], [*notes, *more_notes]


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
async def tree_check(request: TreeCheck) -> ComponentStatus:
    spec = await Get(WheelBuildSpec, WheelRequest(request.address))
    owner = spec.owner
    if spec.optional and spec.unsupported_gpu_targets():
        return ComponentStatus(owner)  # skipped: QuickCheck says why
    try:
        # The tree and the prebuilt wheels (now: a bad sha256 stops the chain before any
        # build), and the lock's wheels for its check below, downloaded at once.
        upstream, *_ = await MultiGet(
            [
                Get(ResolvedUpstream, UpstreamRequest(spec.upstream.address, f"the `source` field of {owner}")),
                Get(EarlyLockWheels, EarlyLockWheelsRequest(spec)),
                *(Get(FetchedPrebuilt, PrebuiltRequest(a, f"the `dependencies` field of {owner}")) for a in spec.prebuilt),
            ]
        )
    except EXPECTED_FAILURES as e:
        return ComponentStatus(owner, (problem_text(e),))
    where = f"{upstream.pin_name} at {upstream.pin.commit}"
    pairing = await Get(RecipePairing, ComponentPairingRequest(spec))
    problems = [*pairing.problems, *await _missing_files(spec, upstream, where), *_pip_cmake_steps(spec)]
    notes: List[str] = list(pairing.notes)
    summary = f"{upstream.pin_name} {upstream.pin.commit[:12]}, {len(upstream.patches)} patch(es)"
    if spec.lock_path and not problems:
        try:
            python = await Get(BuildPython, BuildPythonRequest(spec.python, owner))
            locked = await Get(LockedRequirements, LockedRequirementsRequest, lock_request(spec, upstream, python))
        except EXPECTED_FAILURES as e:
            return ComponentStatus(owner, (problem_text(e),))
        summary += f", {len(locked.lock.dists)} locked distribution(s)"
        problems += _pip_cmake_in_lock(spec, locked)
        if any(d.lower().startswith("cmake==") for d in locked.lock.left_out):
            try:
                toolchain = await Get(
                    ResolvedToolchain, ToolchainRequest(spec.toolchain, f"the `toolchain` field of {owner}", await _image(spec), spec.gpu_targets)
                )
            except EXPECTED_FAILURES:
                return ComponentStatus(owner, tuple(problems), summary=summary)  # QuickCheck says why
            notes.append(_cmake_left_out(locked, toolchain.system_cmake))
            if not toolchain.system_cmake:
                problems.append(
                    f"{owner}: its requirements ask for cmake, which the lock leaves to the system (seed 000), "
                    "but there is no cmake in /usr/bin. Install it: apt-get install cmake (dnf install cmake)."
                )
    if not problems:
        found, more_notes = await _upstream_steps(spec, upstream, where)
        problems += found
        notes += more_notes
    return ComponentStatus(owner, tuple(problems), tuple(notes), summary=summary)


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        *upstream_steps.rules(),
        *chain_versions.rules(),
        *recipe_pairing.rules(),
        *runtime_lock.rules(),
        *build_requirements.rules(),
        *container.rules(),
        *interpreters.rules(),
        *rocm_sdk.rules(),
        *rust_toolchain.rules(),
        *upstream_archives.rules(),
        *upstream_prebuilt.rules(),
        *source_tree.rules(),
        *tree_scan.rules(),
        *upstream_repo.rules(),
        *build_spec.rules(),
    ])
