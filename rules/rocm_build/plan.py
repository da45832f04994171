"""`pants rocm-plan <rocm_wheel>`: what a build would do, without doing it.

For each wheel of the chain in build order: the pinned commit, the patches (with their
sha256), the toolchain, the interpreter, the lock, the archives, and the exact environment
and argv of the build process. The process is the one the build runs (`WheelBuildRequest`
-> `Process`), made from a request whose fetched and built inputs are left empty: nothing is
fetched or built and no toolchain is needed, so it works on any machine.
"""

from __future__ import annotations

from typing import List, Tuple

from pants.engine.addresses import Addresses
from pants.engine.console import Console
from pants.engine.fs import (
    EMPTY_DIGEST,
)
from pants.engine.goal import Goal, GoalSubsystem
from pants.engine.process import Process
from pants.engine.rules import Get, collect_rules, goal_rule
from pants.engine.target import WrappedTarget, WrappedTargetRequest

from rocm_build.build_request import (
    WheelBuildRequest,
    WheelBuildSpec,
    describe_commands,
    quote_env,
)
from rocm_build.build_requirements import LockPath, ReadLock
from rocm_build.chain import wheel_chain
from rocm_build.errors import RocmBuildError
from rocm_build.isolation import NetworkIsolation
from rocm_build.target_types import (
    RocmToolchainTarget,
    RocmWheelTarget,
    ToolchainLabelField,
    ToolchainProviderField,
)
from rocm_build.targets import expect_target
from rocm_build.toolchain import ResolvedToolchain
from rocm_build.tools import BuildPython

UNRESOLVED = "<known when built>"


class RocmPlanSubsystem(GoalSubsystem):
    name = "rocm-plan"
    help = "Print what building rocm_wheel targets would do: pins, patches, lock, environment, commands."


class RocmPlan(Goal):
    subsystem_cls = RocmPlanSubsystem
    environment_behavior = Goal.EnvironmentBehavior.LOCAL_ONLY


async def _lock_summary(spec: WheelBuildSpec) -> Tuple[str, int]:
    """What the plan says of the lock, and how many distributions it holds."""
    if not spec.lock_path:
        return "none", 0
    read = await Get(ReadLock, LockPath(spec.lock_path))
    if read.content is None:
        return f"{spec.lock_path} MISSING (run `pants lock-build-requirements {spec.owner}`)", 0
    if read.lock is None:
        return f"{spec.lock_path} UNREADABLE: {read.error}", 0
    lock = read.lock
    return f"{spec.lock_path}: {len(lock.dists)} distribution(s), made at {lock.pin} {lock.commit[:12]}", len(lock.dists)


async def _describe(step: int, spec: WheelBuildSpec, python: BuildPython, isolation: NetworkIsolation) -> List[str]:
    toolchain_target = await expect_target(spec.toolchain, RocmToolchainTarget, f"the `toolchain` field of {spec.owner}")
    toolchain = ResolvedToolchain(
        address=spec.toolchain,
        provider=toolchain_target[ToolchainProviderField].value,
        identity=UNRESOLVED,
        label=toolchain_target[ToolchainLabelField].value or "<toolchain>",
        cache_name="rocm_toolchain_by_identity",
    )
    request = WheelBuildRequest(
        spec, toolchain, python, isolation.enabled, f"{toolchain.label}{'.'.join(spec.gpu_targets)}", 0, EMPTY_DIGEST
    )
    process = await Get(Process, WheelBuildRequest, request)
    lock, locked = await _lock_summary(spec)
    pin = spec.upstream.pin
    return [
        f"[{step}] {spec.owner}{'  (optional)' if spec.optional else ''}",
        f"  source    {pin.url} @ {pin.commit}{' (with submodules)' if pin.submodules else ''}",
        "  patches" if spec.upstream.patches else "  patches   none",
        *(f"    {p.path}  sha256:{p.sha256[:16]}" for p in spec.upstream.patches),
        f"  toolchain {spec.toolchain.spec} ({toolchain.provider})",
        f"  python    {python.identity} ({python.path})",
        f"  network   {isolation.describe()}",
        f"  lock      {lock}",
        *(f"  archive   {var} <- {address.spec}" for var, address in spec.archives),
        f"  argv      {' '.join(process.argv)}",
        "  env (`$ROCM_BUILD_SANDBOX` is the build's sandbox)",
        *(f"    {line}" for line in quote_env({**process.env, "SOURCE_DATE_EPOCH": "<time of the pinned commit>"})),
        "  commands (in the patched tree)",
        *(f"    {c}" for c in describe_commands(spec, locked)),
        "",
    ]


@goal_rule
async def rocm_plan(console: Console, addresses: Addresses, python: BuildPython, isolation: NetworkIsolation) -> RocmPlan:
    seen = set()
    lines: List[str] = []
    for root in addresses:
        wrapped = await Get(WrappedTarget, WrappedTargetRequest(root, "rocm-plan"))
        if not isinstance(wrapped.target, RocmWheelTarget):
            continue
        for step, spec in enumerate(await wheel_chain(root), 1):
            if spec.address in seen:
                continue
            seen.add(spec.address)
            lines += await _describe(step, spec, python, isolation)
    if not lines:
        raise RocmBuildError("rocm-plan: give it rocm_wheel targets, e.g. `pants rocm-plan components/vllm:wheel`")
    console.print_stdout("\n".join(lines))
    return RocmPlan(exit_code=0)


def rules():
    return collect_rules()
