"""`pants verify-reproducible <rocm_wheel>...`: rebuild and compare, byte for byte.

Each target is built again from the same request, in a fresh sandbox, with neither Pants'
caches nor the compiler cache, and the result is compared with the wheel the cache holds
(or with `--against`, e.g. a wheel a colleague or the shared cache handed you). On a
difference it names the sha256 of both wheels (against the cache: as the build wrote them,
before the build info is added; a remote cache entry is found by that digest), then the
differing members and their first differing bytes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from dataclasses import dataclass
from typing import List, Optional

from pants.base.build_root import BuildRoot
from pants.engine.addresses import Address, Addresses
from pants.engine.console import Console
from pants.engine.fs import AddPrefix, CreateDigest, Digest, FileContent, MergeDigests
from pants.engine.goal import Goal, GoalSubsystem
from pants.engine.process import FallibleProcessResult, Process, ProcessCacheScope
from pants.engine.rules import Get, MultiGet, collect_rules, goal_rule, rule
from pants.engine.target import Targets
from pants.option.option_types import StrOption
from pants.util.frozendict import FrozenDict
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.wheel.build_process import WheelBuildRequest
from rocm_build.wheel.build_spec import WheelRequest
from rocm_build.errors import RocmBuildError
from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_files
from rocm_build.wheel.target_types import RocmWheelTarget
from rocm_build.subsystems.host_tools import HostTools
from rocm_build.prepare.inputs import BuiltRocmWheel, PreparedWheelBuild
from rocm_build.build.build_output import BuildOutput, BuiltPayload, FinishedWheel, WheelWithBuildInfo
from rocm_build.build import build as wheel_build
from rocm_build.build import build_output
from rocm_build.subsystems import host_tools
from rocm_build.wheel import build_process


class VerifyReproducibleSubsystem(GoalSubsystem):
    name = "verify-reproducible"
    help = "Rebuild rocm_wheel targets without any cache and check the wheels come out byte-identical."

    against = StrOption(
        default=None,
        help="A wheel file (absolute, or from the build root) to compare the rebuild with, instead of the cached build.",
    )


class VerifyReproducible(Goal):
    subsystem_cls = VerifyReproducibleSubsystem
    environment_behavior = Goal.EnvironmentBehavior.LOCAL_ONLY


@dataclass(frozen=True)
class AgainstWheel:
    """The wheel `--against` names, read by the goal (a file outside Pants' view)."""

    name: str
    digest: Digest  # the file at the root
    sha256: str


@dataclass(frozen=True)
class RebuildCheckRequest:
    address: Address
    against: Optional[AgainstWheel]  # else the cached build


@dataclass(frozen=True)
class RebuildCheck:
    identical: bool
    report: str  # what the goal prints for this target


@rule(desc="Rebuilding a rocm_wheel to compare it with its cached build")
async def rebuild_and_compare(request: RebuildCheckRequest, tools: HostTools) -> RebuildCheck:
    owner = request.address.spec
    cached, prepared = await MultiGet(
        Get(BuiltRocmWheel, WheelRequest(request.address)), Get(PreparedWheelBuild, WheelRequest(request.address))
    )
    # From an empty build directory (none kept), not read from any cache, and not written
    # to the persistent ones: a real rebuild.
    process = await Get(Process, WheelBuildRequest, dataclasses.replace(prepared.request, kept_key=""))
    fresh = dataclasses.replace(
        process,
        env=FrozenDict({**process.env, "CCACHE_DISABLE": "1"}),
        cache_scope=ProcessCacheScope.PER_SESSION,
        description=f"Rebuilding rocm_wheel {owner} to verify it",
    )
    result = await Get(FallibleProcessResult, Process, fresh)
    if result.exit_code != 0:
        raise RocmBuildError(f"verify-reproducible: the rebuild of {owner} failed (exit {result.exit_code})")
    rebuilt = await Get(BuiltPayload, BuildOutput(result.output_digest))
    against = request.against
    if against:
        finished = await Get(FinishedWheel, WheelWithBuildInfo(rebuilt.payload, rebuilt.wheel_name, prepared.build_info))
        expected, expected_name, expected_sha256 = against.digest, against.name, against.sha256
        actual, actual_sha256 = finished.wheel, finished.sha256
    else:
        expected, expected_name, actual = cached.payload, f"the cached build of {owner}", rebuilt.payload
        expected_sha256, actual_sha256 = cached.payload_sha256, rebuilt.sha256
    expected_dir, actual_dir = await MultiGet(Get(Digest, AddPrefix(expected, "expected")), Get(Digest, AddPrefix(actual, "actual")))
    inputs = await Get(Digest, MergeDigests([await Get(Digest, script_files("compare_wheels.py")), expected_dir, actual_dir]))
    compare = await Get(
        FallibleProcessResult,
        Process(
            argv=(
                tools.bash.path, "-c",
                f'exec "$0" {SCRIPTS_DIR}/compare_wheels.py expected/* actual/*', tools.python.path,
            ),
            input_digest=inputs,
            description=f"Comparing the rebuild of {owner}",
            level=LogLevel.DEBUG,
        ),
    )  # fmt: skip
    if compare.exit_code == 0:
        return RebuildCheck(True, f"ok {owner}: the rebuild is byte-identical to {expected_name} ({rebuilt.wheel_name})")
    report = compare.stdout.decode().strip().replace("expected/", "expected ").replace("actual/", "rebuilt ")
    lines: List[str] = [f"  {line}" for line in report.splitlines()]
    # Both digests: which cache entry (local, remote, or a colleague's file) to distrust.
    digests = f"  sha256 {expected_sha256} ({expected_name})\n  sha256 {actual_sha256} (the rebuild)"
    return RebuildCheck(False, "\n".join([f"DIFFERENT {owner}: the rebuild differs from {expected_name}:", digests, *lines]))


@goal_rule
async def verify_reproducible(console: Console, addresses: Addresses, options: VerifyReproducibleSubsystem) -> VerifyReproducible:
    targets = [t for t in await Get(Targets, Addresses, addresses) if isinstance(t, RocmWheelTarget)]
    if not targets or (options.against and len(targets) != 1):
        raise RocmBuildError("verify-reproducible: give it rocm_wheel targets (exactly one with --against)")
    against = None
    if options.against:
        # A file from anywhere (dist/ and downloads are outside Pants' view), read once, here:
        # a goal rule runs each time, a rule's result would be kept.
        path = os.path.join(BuildRoot().path, options.against)
        try:
            with open(path, "rb") as f:
                content = f.read()
        except OSError as e:
            raise RocmBuildError(f"verify-reproducible: cannot read --against {options.against}: {e}") from None
        digest = await Get(Digest, CreateDigest([FileContent(os.path.basename(path), content)]))
        against = AgainstWheel(options.against, digest, hashlib.sha256(content).hexdigest())
    # Every target rebuilt at once; the reports in the order given.
    checks = await MultiGet(Get(RebuildCheck, RebuildCheckRequest(t.address, against)) for t in targets)
    for check in checks:
        console.print_stdout(check.report)
    return VerifyReproducible(exit_code=0 if all(c.identical for c in checks) else 1)


@memoized
def rules():
    return FrozenOrderedSet(
        [
            *collect_rules(),
            *wheel_build.rules(),
            *build_output.rules(),
            *host_tools.rules(),
            *build_process.rules(),
        ]
    )
