"""`pants lock-runtime-requirements <rocm_wheel>...`: write the run-time requirement locks
(3rdparty/run/), resolved by install/runtime_lock.py."""

from __future__ import annotations

from typing import Dict, Tuple

from pants.engine.addresses import Addresses
from pants.engine.console import Console
from pants.engine.fs import CreateDigest, Digest, FileContent, Workspace
from pants.engine.goal import Goal, GoalSubsystem
from pants.engine.rules import Get, collect_rules, goal_rule
from pants.engine.target import Targets

from rocm_build.errors import RocmBuildError
from rocm_build.install.runtime_lock import (
    ChainRuntimeRequirements,
    ChainRuntimeRequirementsRequest,
    RuntimeLockRequest,
    render,
)
from rocm_build.install.target_types import WheelRuntimeRequirementsField
from rocm_build.wheel.target_types import RocmWheelTarget
from rocm_build.wheel import lockfile


class LockRuntimeRequirementsSubsystem(GoalSubsystem):
    name = "lock-runtime-requirements"
    help = "Resolve the `runtime_requirements` of rocm_wheel targets and write their locks (3rdparty/run/)."


class LockRuntimeRequirements(Goal):
    subsystem_cls = LockRuntimeRequirementsSubsystem
    environment_behavior = Goal.EnvironmentBehavior.LOCAL_ONLY


@goal_rule
async def lock_runtime_requirements(console: Console, addresses: Addresses, workspace: Workspace) -> LockRuntimeRequirements:
    targets = await Get(Targets, Addresses, addresses)
    wheels = [t for t in targets if isinstance(t, RocmWheelTarget) and t[WheelRuntimeRequirementsField].value]
    if not wheels:
        raise RocmBuildError("lock-runtime-requirements: none of the given targets is a rocm_wheel with `runtime_requirements`")
    written: Dict[str, Tuple[str, lockfile.BuildLock]] = {}
    for target in wheels:
        owner = target.address.spec
        requirements = await Get(ChainRuntimeRequirements, ChainRuntimeRequirementsRequest(target.address))
        if not requirements.own:
            console.print_stdout(f"{owner}: nothing to lock (its run-time requirements come from the SDK)")
            continue
        # Resolved with its chain's: one venv holds them all (runtime_lock.py).
        resolved = await Get(lockfile.ResolvedLock, RuntimeLockRequest(target.address, requirements.chain))
        if resolved.path in written:
            # Two targets of one pin share a lock: they must ask for the same requirements.
            first, first_lock = written[resolved.path]
            if first_lock.requirements != resolved.lock.requirements:
                raise RocmBuildError(
                    f"{owner} and {first} share the lock {resolved.path} (same pin, same Python) but their "
                    f"`runtime_requirements` differ ({list(resolved.lock.requirements)}, {list(first_lock.requirements)}): "
                    "make them the same."
                )
            continue
        written[resolved.path] = (owner, resolved.lock)
        console.print_stdout(f"Wrote {resolved.path}: {len(resolved.lock.dists)} distribution(s) for {owner}")
    # Written together, once every lock resolved: a failure leaves all of them as they were.
    files = [FileContent(path, render(lock).encode()) for path, (_, lock) in written.items()]
    workspace.write_digest(await Get(Digest, CreateDigest(files)))
    return LockRuntimeRequirements(exit_code=0)


def rules():
    return collect_rules()
