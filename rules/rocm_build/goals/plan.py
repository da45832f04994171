"""`pants rocm-plan <rocm_wheel>`: what a build would do, without doing it.

For each wheel of the chain in build order: the pinned commit, the patches (with their
sha256), the toolchain, the interpreter, the lock, the archives, and the exact environment
and argv of the build process. The process is the one the build runs (`WheelBuildRequest`
-> `Process`), made from a request whose fetched and built inputs are left empty: nothing is
fetched or built and no toolchain is needed, so it works on any machine.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from pants.engine.addresses import Address, Addresses
from pants.engine.console import Console
from pants.engine.fs import EMPTY_DIGEST
from pants.engine.goal import Goal, GoalSubsystem
from pants.engine.process import Process
from pants.engine.rules import Get, MultiGet, collect_rules, goal_rule, rule
from pants.option.global_options import GlobalOptions
from pants.option.option_types import BoolOption
from pants.util.logging import LogLevel
from pants.util.strutil import softwrap
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.checks import preflight
from rocm_build.errors import RocmBuildError
from rocm_build.goals.preflight_report import chain_specs, component_report, dist_path, installed_set_report
from rocm_build.install import load_check, runtime_set
from rocm_build.locks import build_requirements
from rocm_build.locks.build_requirements import LockPath, ReadLock
from rocm_build.prebuilt import wheel_rules as prebuilt_rules
from rocm_build.prebuilt.wheel_rules import PrebuiltRequest, PrebuiltSpec
from rocm_build.target_types_rules import expect_target
from rocm_build.toolchain import container, interpreters
from rocm_build.toolchain import isolation as toolchain_isolation
from rocm_build.toolchain.container import BuildEnvironment, BuildEnvironmentRequest
from rocm_build.toolchain.interpreters import BuildPython, BuildPythonRequest
from rocm_build.toolchain.isolation import NetworkIsolation
from rocm_build.toolchain.rocm_sdk import ResolvedToolchain
from rocm_build.toolchain.target_types import RocmToolchainTarget, ToolchainLabelField, ToolchainProviderField
from rocm_build.upstream import archives as upstream_archives
from rocm_build.upstream.archives import ArchiveRequest, ArchiveSpec
from rocm_build.wheel import build_process, chain_order
from rocm_build.wheel.build_process import WheelBuildRequest, describe_commands, local_version_label, quote_env
from rocm_build.wheel.build_spec import WheelBuildSpec, dist_dir
from rocm_build.wheel.rebuild import Inputs, changes, last_build_info, verdict

UNRESOLVED = "<known when built>"


class RocmPlanSubsystem(GoalSubsystem):
    name = "rocm-plan"
    help = "Print what building rocm_wheel targets would do: pins, patches, lock, environment, commands."

    check = BoolOption(
        default=False,
        help=softwrap(
            """
            Run the preflight instead of printing the plan: for every component of the chain,
            before any compile, the checks `package` runs first (gpu targets against upstream's
            list, toolchain, archives, the pinned tree fetched and patched, every file the
            recipe names, the lock against the tree, no pip cmake on PATH). Where the target's
            install set is in dist/ already, also the check `package` runs before writing it:
            every library and symbol its ELF files need found in the set, GPU code for each gpu
            target. Prints one line per component and exits non-zero on any problem.
            """
        ),
    )


class RocmPlan(Goal):
    subsystem_cls = RocmPlanSubsystem
    environment_behavior = Goal.EnvironmentBehavior.LOCAL_ONLY


def _lock_summary(spec: WheelBuildSpec, read: Optional[ReadLock]) -> Tuple[str, int]:
    """What the plan says of the lock (`read`: None when there is none), and how many
    distributions it holds."""
    if read is None:
        return "none", 0
    if read.content is None:
        return f"{spec.lock_path} MISSING (run `pants lock-build-requirements {spec.owner}`)", 0
    if read.lock is None:
        return f"{spec.lock_path} UNREADABLE: {read.error}", 0
    lock = read.lock
    return f"{spec.lock_path}: {len(lock.dists)} distribution(s), made at {lock.pin} {lock.commit[:12]}", len(lock.dists)


def _gpu_line(spec: WheelBuildSpec) -> str:
    line = f"  gpu       {', '.join(spec.gpu_targets)}"
    if spec.supported_gpu_targets:
        line += f" (upstream builds {', '.join(spec.supported_gpu_targets)}: {spec.supported_gpu_targets_source})"
    if spec.unsupported_gpu_targets():
        line += "\n  WARNING   " + ("skipped: upstream does not build these targets" if spec.optional else
                                  "the build stops: upstream does not build these targets")
    return line


def _prebuilt_lines(spec: WheelBuildSpec, prebuilt: Sequence[PrebuiltSpec]) -> List[str]:
    lines = []
    for address, found in zip(spec.prebuilt, prebuilt):
        pin = found.pin
        what = f"{pin.file} sha256:{pin.sha256[:16]}" if pin.resolved else f"NOT RESOLVED (track {pin.track!r})"
        lines.append(f"{address.spec} <- {pin.index_url} {what}")
    return lines


@dataclass(frozen=True)
class PlannedBuildRequest:
    spec: WheelBuildSpec


@dataclass(frozen=True)
class PlannedBuild:
    """What the plan says of one build, but whether it would run: that compares with the wheel
    in dist/, which only the goal rule reads."""

    before: Tuple[str, ...]  # the lines before `rebuild`
    after: Tuple[str, ...]  # and after it
    inputs: str  # rebuild.Inputs as JSON (a rule's result must be hashable)

    def lines(self, rebuild: str) -> Tuple[str, ...]:
        return (*self.before, f"  rebuild   {rebuild}", *self.after)


# A rule, not a helper: memoized per build (a chain's shared components are described once)
# and the builds of a chain described concurrently.
@rule(desc="Describing a rocm_wheel build", level=LogLevel.DEBUG)
async def describe_build(request: PlannedBuildRequest, isolation: NetworkIsolation) -> PlannedBuild:
    spec = request.spec
    image = None
    try:
        environment = await Get(BuildEnvironment, BuildEnvironmentRequest(spec.environment, spec.owner))
        image = environment.image
        environment_line = environment.describe()
    except RocmBuildError as e:
        environment_line = f"NOT READY: {e}"
    try:
        python = await Get(BuildPython, BuildPythonRequest(spec.python, spec.owner, image))
        where = f"in the image: {python.path}" if python.in_image else python.path
        python_line = f"{python.identity} ({where}; `python` = {spec.python!r})"
    except RocmBuildError as e:  # the plan works on any machine: say what is missing
        python = BuildPython("<not found>", "CPython", f"{spec.python}.x")
        python_line = f"NOT FOUND: {e}"
    toolchain_target = await expect_target(spec.toolchain, RocmToolchainTarget, f"the `toolchain` field of {spec.owner}")
    toolchain = ResolvedToolchain(
        address=spec.toolchain,
        provider=toolchain_target[ToolchainProviderField].value,
        identity=UNRESOLVED,
        label=toolchain_target[ToolchainLabelField].value or "<toolchain>",
        cache_name="" if image else "rocm_toolchain_by_identity",
        root_in_image="<in the image>" if image else "",
    )
    build = WheelBuildRequest(
        spec, toolchain, python, isolation.isolated(bool(image)), image,
        local_version_label(toolchain, spec), 0, EMPTY_DIGEST, rust=UNRESOLVED if spec.rust else "",
    )  # fmt: skip
    process = await Get(Process, WheelBuildRequest, build)
    read = await Get(ReadLock, LockPath(spec.lock_path)) if spec.lock_path else None
    archives = await MultiGet(
        Get(ArchiveSpec, ArchiveRequest(a, f"the `archives` field of {spec.owner}")) for _, a in spec.archives
    )
    prebuilt = await MultiGet(
        Get(PrebuiltSpec, PrebuiltRequest(a, f"the `dependencies` field of {spec.owner}")) for a in spec.prebuilt
    )
    lock, locked = _lock_summary(spec, read)
    inputs = Inputs(
        pin=spec.upstream.pin_name,
        commit=spec.upstream.pin.commit,
        patches={p.path: p.sha256 for p in spec.upstream.patches},
        lock_sha256=read.sha256 if read else None,
        python=python.identity,
        toolchain=spec.toolchain.spec,
        env=dict(spec.env),
        gpu_targets=list(spec.gpu_targets),
        archives={var: a.sha256 for (var, _), a in zip(spec.archives, archives)},
        image=image.image_id if image else "",
        prebuilt={a.spec: p.pin.sha256 for a, p in zip(spec.prebuilt, prebuilt)},
        recipe=spec.recipe(),
    )
    pin = spec.upstream.pin
    before = [
        f"{spec.owner}{'  (optional)' if spec.optional else ''}",
        f"  source    {pin.url} @ {pin.commit}{' (with submodules)' if pin.submodules else ''}",
        "  patches" if spec.upstream.patches else "  patches   none",
        *(f"    {p.path}  sha256:{p.sha256[:16]}" for p in spec.upstream.patches),
        _gpu_line(spec),
        # The digest covers what is known only when built: the toolchain's identity, the
        # dependency wheels' bytes, the wheel's own.
        f"  label     +{build.label}.k{UNRESOLVED} (the build writes +{build.label}; the wheel that ships adds the "
        "digest of its inputs and bytes: `version_key` in its rocm_build_info.json)",
        f"  toolchain {spec.toolchain.spec} ({toolchain.provider})",
        f"  python    {python_line}",
        f"  environment {environment_line}",
        f"  network   {isolation.describe(in_image=bool(image))}",
        f"  lock      {lock}",
        *[f"  prebuilt  {line}" for line in _prebuilt_lines(spec, prebuilt)],
    ]
    after = [
        *(f"  archive   {var} <- {address.spec}" for var, address in spec.archives),
        *([f"  cargo     crates <- {spec.cargo_lock} of the tree, each fetched by its checksum or commit (offline build)"]
          if spec.cargo_lock else []),  # fmt: skip
        f"  argv      {' '.join(process.argv)}",
        "  env (`$ROCM_BUILD_SANDBOX` is the build's sandbox)",
        *(f"    {line}" for line in quote_env({**process.env, "SOURCE_DATE_EPOCH": "<time of the pinned commit>"})),
        "  commands (in the patched tree)",
        *(f"    {c}" for c in describe_commands(spec, locked)),
        "",
    ]
    return PlannedBuild(tuple(before), tuple(after), json.dumps(dataclasses.asdict(inputs), sort_keys=True))


def _rebuild(spec: WheelBuildSpec, inputs: Inputs, dist: Path, rebuilding: Dict[Address, bool]) -> str:
    """Whether the build would run, and why (rebuild.py), against the wheel in dist/; records in
    `rebuilding` whether it would (its dependents' verdicts read it)."""
    previous = last_build_info(dist / dist_dir(spec.address))
    own = changes(previous, inputs) if previous else []
    deps = [d.spec for d in spec.dependencies if rebuilding.get(d)]
    rebuilding[spec.address] = bool(own or deps or previous is None)
    last = f"{dist.name}/{dist_dir(spec.address)}/" if previous else None
    return verdict(own, deps, last)


@goal_rule
async def rocm_plan(
    console: Console, addresses: Addresses, options: RocmPlanSubsystem, global_options: GlobalOptions
) -> RocmPlan:
    specs = await chain_specs(addresses, RocmPlanSubsystem.name)
    dist = dist_path(global_options)
    if options.check:  # the install sets in dist/, then the components as `pants check` shows them
        sets = await installed_set_report(addresses, specs, dist)
        components = await component_report(specs)
        console.print_stdout("\n".join((*sets.lines, *components.lines)))
        return RocmPlan(exit_code=1 if sets.problems or components.problems else 0)
    planned = await MultiGet(Get(PlannedBuild, PlannedBuildRequest(s)) for s in specs)
    lines: List[str] = []
    rebuilding: Dict[Address, bool] = {}  # the goal alone reads dist/: the verdicts are made here
    for step, (spec, build) in enumerate(zip(specs, planned), 1):
        rebuild = _rebuild(spec, Inputs(**json.loads(build.inputs)), dist, rebuilding)
        lines += [f"[{step}] {line}" if i == 0 else line for i, line in enumerate(build.lines(rebuild))]
    console.print_stdout("\n".join(lines))
    return RocmPlan(exit_code=0)


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        *preflight.rules(),
        *load_check.rules(),
        *runtime_set.rules(),
        *build_requirements.rules(),
        *container.rules(),
        *interpreters.rules(),
        *toolchain_isolation.rules(),
        *upstream_archives.rules(),
        *prebuilt_rules.rules(),
        *build_process.rules(),
        *chain_order.rules(),
    ])
