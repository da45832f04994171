"""`pants lock-build-requirements <rocm_wheel>...`: write the build-requirements locks of the
given targets; an alias, by target, of `pants generate-lockfiles --resolve=build:...`
(goals/lockfiles.py), which writes the same bytes (wheel/build_lock.py resolves them)."""

from __future__ import annotations

from typing import List

from pants.engine.addresses import Addresses
from pants.engine.console import Console
from pants.engine.fs import CreateDigest, Digest, FileContent, Workspace
from pants.engine.goal import Goal, GoalSubsystem
from pants.engine.rules import Get, collect_rules, goal_rule
from pants.engine.target import Targets
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.errors import RocmBuildError
from rocm_build.goals.lockfiles import BUILD, RocmLock, RocmLockRequest
from rocm_build.locks.lockfile import resolve_name
from rocm_build.wheel.target_types import RocmWheelTarget, WheelBuildRequirementsField
from rocm_build.goals import lockfiles


class LockBuildRequirementsSubsystem(GoalSubsystem):
    name = "lock-build-requirements"
    help = (
        "Resolve the `build_requirements` of rocm_wheel targets and write their locks (3rdparty/build/). "
        "An alias by target of `pants generate-lockfiles --resolve=build:<py3.X/pin>`, which writes the same bytes."
    )


class LockBuildRequirements(Goal):
    subsystem_cls = LockBuildRequirementsSubsystem
    environment_behavior = Goal.EnvironmentBehavior.LOCAL_ONLY


@goal_rule
async def lock_build_requirements(console: Console, addresses: Addresses, workspace: Workspace) -> LockBuildRequirements:
    targets = await Get(Targets, Addresses, addresses)
    wheels = [t for t in targets if isinstance(t, RocmWheelTarget) and t[WheelBuildRequirementsField].value]
    if not wheels:
        raise RocmBuildError(
            "lock-build-requirements: none of the given targets is a rocm_wheel with `build_requirements`"
        )
    written: List[FileContent] = []
    for target in wheels:
        resolved = await Get(RocmLock, RocmLockRequest(BUILD, target.address))
        written.append(FileContent(resolved.path, resolved.content))
        left_out = resolved.lock.left_out
        extra = f"; left out: {', '.join(left_out)}" if left_out else ""
        console.print_stdout(
            f"Wrote {resolved.path}: {len(resolved.lock.dists)} distribution(s) for {target.address.spec}{extra} "
            f"(resolve {resolve_name(BUILD, resolved.path)})"
        )
    # Written together, once every lock resolved: a failure leaves all of them as they were.
    workspace.write_digest(await Get(Digest, CreateDigest(written)))
    return LockBuildRequirements(exit_code=0)


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *lockfiles.rules()])
