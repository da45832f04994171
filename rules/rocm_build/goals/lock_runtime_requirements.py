"""`pants lock-runtime-requirements <rocm_wheel>...`: write the run-time requirement locks
(3rdparty/run/) of the given targets, resolved by install/runtime_lock.py; an alias, by
target, of `pants generate-lockfiles --resolve=run:...` (goals/lockfiles.py), which writes the
same bytes."""

from __future__ import annotations

from typing import Dict, List, Tuple

from pants.engine.addresses import Addresses
from pants.engine.console import Console
from pants.engine.fs import CreateDigest, Digest, FileContent, Workspace
from pants.engine.goal import Goal, GoalSubsystem
from pants.engine.rules import Get, collect_rules, goal_rule
from pants.engine.target import Targets
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.errors import RocmBuildError
from rocm_build.goals.lockfiles import RUN, RocmLock, RocmLockRequest, check_shared_runtime_lock
from rocm_build.locks.lockfile import resolve_name
from rocm_build.install.runtime_lock import ChainRuntimeRequirements, ChainRuntimeRequirementsRequest
from rocm_build.wheel.target_types import WheelRuntimeRequirementsField
from rocm_build.wheel.target_types import RocmWheelTarget
from rocm_build.goals import lockfiles
from rocm_build.install import runtime_lock


class LockRuntimeRequirementsSubsystem(GoalSubsystem):
    name = "lock-runtime-requirements"
    help = (
        "Resolve the `runtime_requirements` of rocm_wheel targets and write their locks (3rdparty/run/). "
        "An alias by target of `pants generate-lockfiles --resolve=run:<py3.X/pin>`, which writes the same bytes."
    )


class LockRuntimeRequirements(Goal):
    subsystem_cls = LockRuntimeRequirementsSubsystem
    environment_behavior = Goal.EnvironmentBehavior.LOCAL_ONLY


@goal_rule
async def lock_runtime_requirements(console: Console, addresses: Addresses, workspace: Workspace) -> LockRuntimeRequirements:
    targets = await Get(Targets, Addresses, addresses)
    wheels = [t for t in targets if isinstance(t, RocmWheelTarget) and t[WheelRuntimeRequirementsField].value]
    if not wheels:
        raise RocmBuildError("lock-runtime-requirements: none of the given targets is a rocm_wheel with `runtime_requirements`")
    written: Dict[str, List[Tuple[str, RocmLock]]] = {}
    for target in wheels:
        owner = target.address.spec
        requirements = await Get(ChainRuntimeRequirements, ChainRuntimeRequirementsRequest(target.address))
        if not requirements.own:
            console.print_stdout(f"{owner}: nothing to lock (its run-time requirements come from the SDK)")
            continue
        resolved = await Get(RocmLock, RocmLockRequest(RUN, target.address))
        sharing = written.setdefault(resolved.path, [])
        sharing.append((owner, resolved))
        check_shared_runtime_lock(resolved.path, [(o, lock.lock.requirements) for o, lock in sharing])
        if len(sharing) == 1:
            console.print_stdout(
                f"Wrote {resolved.path}: {len(resolved.lock.dists)} distribution(s) for {owner} "
                f"(resolve {resolve_name(RUN, resolved.path)})"
            )
    # Written together, once every lock resolved: a failure leaves all of them as they were.
    files = [FileContent(path, sharing[0][1].content) for path, sharing in written.items()]
    workspace.write_digest(await Get(Digest, CreateDigest(files)))
    return LockRuntimeRequirements(exit_code=0)


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *lockfiles.rules(), *runtime_lock.rules()])
