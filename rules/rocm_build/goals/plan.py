"""`pants rocm-plan <rocm_wheel>`: what a build would do, without doing it.

For each wheel of the chain in build order: the pinned commit, the patches (with their
sha256), the toolchain, the interpreter, the lock, the archives, and the exact environment
and argv of the build process. The process is the one the build runs (`WheelBuildRequest`
-> `Process`), made from a request whose fetched and built inputs are left empty: nothing is
fetched or built and no toolchain is needed, so it works on any machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from pants.engine.addresses import Address, Addresses
from pants.engine.console import Console
from pants.engine.fs import EMPTY_DIGEST
from pants.engine.goal import Goal, GoalSubsystem
from pants.engine.process import Process
from pants.engine.rules import Get, MultiGet, _uncacheable_rule, collect_rules, goal_rule
from pants.engine.target import WrappedTarget, WrappedTargetRequest
from pants.option.global_options import GlobalOptions
from pants.option.option_types import BoolOption
from pants.util.logging import LogLevel
from pants.util.strutil import softwrap

from rocm_build.upstream.archives import ArchiveRequest, ArchiveSpec
from rocm_build.wheel.build_process import WheelBuildRequest, describe_commands, local_version_label, quote_env
from rocm_build.wheel.build_spec import WheelBuildSpec, dist_dir
from rocm_build.goals.preflight_report import ChainSpecs, ChainSpecsRequest, PreflightReport, PreflightReportRequest, dist_path
from rocm_build.wheel.build_requirements import LockPath, ReadLock
from rocm_build.toolchain.container import BuildEnvironment, BuildEnvironmentRequest, BuildImage
from rocm_build.errors import RocmBuildError
from rocm_build.toolchain.interpreters import BuildPython, BuildPythonRequest
from rocm_build.toolchain.isolation import NetworkIsolation
from rocm_build.upstream.prebuilt import PrebuiltRequest, PrebuiltSpec
from rocm_build.wheel.rebuild import Inputs, changes, last_build_info, verdict
from rocm_build.toolchain.target_types import RocmToolchainTarget, ToolchainLabelField, ToolchainProviderField
from rocm_build.target_types_rules import expect_target
from rocm_build.toolchain.rocm_sdk import ResolvedToolchain

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
    if not spec.lock_path or read is None:
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


def _rebuild(
    spec: WheelBuildSpec,
    python: BuildPython,
    image: Optional[BuildImage],
    dist: Path,
    rebuilding: Tuple[Address, ...],
    lock: Optional[ReadLock],
    archives: Sequence[ArchiveSpec],
    prebuilt: Sequence[PrebuiltSpec],
) -> Tuple[str, bool]:
    """Whether the build would run, and why (rebuild.py), against the wheel in dist/; and
    whether it would (`rebuilding`: the wheels before it in the chain that would)."""
    now = Inputs(
        pin=spec.upstream.pin_name,
        commit=spec.upstream.pin.commit,
        patches={p.path: p.sha256 for p in spec.upstream.patches},
        lock_sha256=lock.sha256 if lock else None,
        python=python.identity,
        toolchain=spec.toolchain.spec,
        env=dict(spec.env),
        gpu_targets=spec.gpu_targets,
        archives={var: a.sha256 for (var, _), a in zip(spec.archives, archives)},
        image=image.image_id if image else "",
        prebuilt={a.spec: p.pin.sha256 for a, p in zip(spec.prebuilt, prebuilt)},
    )
    previous = last_build_info(dist / dist_dir(spec.address))
    own = changes(previous, now) if previous else []
    deps = [d.spec for d in spec.dependencies if d in rebuilding]
    last = f"{dist.name}/{dist_dir(spec.address)}/" if previous else None
    return verdict(own, deps, last), bool(own or deps or previous is None)


def _prebuilt_lines(spec: WheelBuildSpec, prebuilt: Sequence[PrebuiltSpec]) -> List[str]:
    lines = []
    for address, found in zip(spec.prebuilt, prebuilt):
        pin = found.pin
        what = f"{pin.file} sha256:{pin.sha256[:16]}" if pin.resolved else f"NOT RESOLVED (track {pin.track!r})"
        lines.append(f"{address.spec} <- {pin.index_url} {what}")
    return lines


@dataclass(frozen=True)
class PlanStepRequest:
    step: int
    spec: WheelBuildSpec
    dist: str  # dist/ on this machine, where the last build of the wheel is
    rebuilding: Tuple[Address, ...]  # the wheels before it in the chain that would be rebuilt


@dataclass(frozen=True)
class PlanStep:
    lines: Tuple[str, ...]
    rebuilds: bool


# Uncacheable: it reads the last build's info in dist/ directly (re-run on every rocm-plan;
# what it asks for is memoized as usual).
@_uncacheable_rule(desc="Describing a rocm_wheel build", level=LogLevel.DEBUG)
async def describe_plan_step(request: PlanStepRequest, isolation: NetworkIsolation) -> PlanStep:
    step, spec = request.step, request.spec
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
    wrapped = await Get(WrappedTarget, WrappedTargetRequest(spec.toolchain, f"the `toolchain` field of {spec.owner}"))
    toolchain_target = expect_target(wrapped, RocmToolchainTarget, f"the `toolchain` field of {spec.owner}")
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
    lock, locked = _lock_summary(spec, read)
    prebuilt = [await Get(PrebuiltSpec, PrebuiltRequest(a, f"the `dependencies` field of {spec.owner}")) for a in spec.prebuilt]
    archives = await MultiGet(
        Get(ArchiveSpec, ArchiveRequest(a, f"the `archives` field of {spec.owner}")) for _, a in spec.archives
    )
    rebuild, rebuilds = _rebuild(spec, python, image, Path(request.dist), request.rebuilding, read, archives, prebuilt)
    pin = spec.upstream.pin
    lines = [
        f"[{step}] {spec.owner}{'  (optional)' if spec.optional else ''}",
        f"  source    {pin.url} @ {pin.commit}{' (with submodules)' if pin.submodules else ''}",
        "  patches" if spec.upstream.patches else "  patches   none",
        *(f"    {p.path}  sha256:{p.sha256[:16]}" for p in spec.upstream.patches),
        _gpu_line(spec),
        f"  toolchain {spec.toolchain.spec} ({toolchain.provider})",
        f"  python    {python_line}",
        f"  environment {environment_line}",
        f"  network   {isolation.describe(in_image=bool(image))}",
        f"  lock      {lock}",
        *[f"  prebuilt  {line}" for line in _prebuilt_lines(spec, prebuilt)],
        f"  rebuild   {rebuild}",
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
    return PlanStep(tuple(lines), rebuilds)


@goal_rule
async def rocm_plan(
    console: Console, addresses: Addresses, options: RocmPlanSubsystem, global_options: GlobalOptions
) -> RocmPlan:
    specs = (await Get(ChainSpecs, ChainSpecsRequest(tuple(addresses), RocmPlanSubsystem.name))).specs
    if options.check:  # the same report `pants check` shows (goals/check.py)
        report = await Get(PreflightReport, PreflightReportRequest(tuple(addresses), specs, str(dist_path(global_options))))
        console.print_stdout(report.text)
        return RocmPlan(exit_code=1 if report.problems else 0)
    lines: List[str] = []
    rebuilding: Tuple[Address, ...] = ()
    for step, spec in enumerate(specs, 1):
        planned = await Get(PlanStep, PlanStepRequest(step, spec, str(dist_path(global_options)), rebuilding))
        lines += planned.lines
        rebuilding += (spec.address,) if planned.rebuilds else ()
    console.print_stdout("\n".join(lines))
    return RocmPlan(exit_code=0)


def rules():
    return collect_rules()
