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
from typing import List

from pants.base.build_root import BuildRoot
from pants.engine.addresses import Addresses
from pants.engine.console import Console
from pants.engine.fs import AddPrefix, CreateDigest, Digest, FileContent, MergeDigests
from pants.engine.goal import Goal, GoalSubsystem
from pants.engine.process import FallibleProcessResult, Process, ProcessCacheScope
from pants.engine.rules import Get, collect_rules, goal_rule
from pants.engine.target import Targets
from pants.option.option_types import StrOption
from pants.util.frozendict import FrozenDict
from pants.util.logging import LogLevel

from rocm_build.wheel.build_process import WheelBuildRequest
from rocm_build.wheel.build_spec import WheelRequest
from rocm_build.errors import RocmBuildError
from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_digest
from rocm_build.wheel.target_types import RocmWheelTarget
from rocm_build.subsystems.host_tools import HostTools
from rocm_build.wheel.build import BuiltRocmWheel, PreparedWheelBuild
from rocm_build.wheel.build_output import BuildOutput, BuiltPayload, FinishedWheel, WheelWithBuildInfo


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


@goal_rule
async def verify_reproducible(
    console: Console, addresses: Addresses, options: VerifyReproducibleSubsystem, tools: HostTools
) -> VerifyReproducible:
    targets = [t for t in await Get(Targets, Addresses, addresses) if isinstance(t, RocmWheelTarget)]
    if not targets or (options.against and len(targets) != 1):
        raise RocmBuildError("verify-reproducible: give it rocm_wheel targets (exactly one with --against)")
    failed = 0
    for target in targets:
        owner = target.address.spec
        cached = await Get(BuiltRocmWheel, WheelRequest(target.address))
        prepared = await Get(PreparedWheelBuild, WheelRequest(target.address))
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
        if options.against:
            # A file from anywhere (dist/ and downloads are outside Pants' view), read once.
            path = os.path.join(BuildRoot().path, options.against)
            try:
                with open(path, "rb") as f:
                    content = f.read()
            except OSError as e:
                raise RocmBuildError(f"verify-reproducible: cannot read --against {options.against}: {e}") from None
            expected = await Get(Digest, CreateDigest([FileContent(os.path.basename(path), content)]))
            expected_name, expected_sha256 = options.against, hashlib.sha256(content).hexdigest()
            finished = await Get(FinishedWheel, WheelWithBuildInfo(rebuilt.payload, rebuilt.wheel_name, prepared.build_info))
            actual, actual_sha256 = finished.wheel, finished.sha256
        else:
            expected, expected_name, actual = cached.payload, f"the cached build of {owner}", rebuilt.payload
            expected_sha256, actual_sha256 = cached.payload_sha256, rebuilt.sha256
        scripts = await script_digest("compare_wheels.py")
        inputs = await Get(
            Digest,
            MergeDigests(
                [scripts, await Get(Digest, AddPrefix(expected, "expected")), await Get(Digest, AddPrefix(actual, "actual"))]
            ),
        )
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
        report = compare.stdout.decode().strip().replace("expected/", "expected ").replace("actual/", "rebuilt ")
        if compare.exit_code == 0:
            console.print_stdout(f"ok {owner}: the rebuild is byte-identical to {expected_name} ({rebuilt.wheel_name})")
        else:
            failed += 1
            lines: List[str] = [f"  {line}" for line in report.splitlines()]
            # Both digests: which cache entry (local, remote, or a colleague's file) to distrust.
            digests = f"  sha256 {expected_sha256} ({expected_name})\n  sha256 {actual_sha256} (the rebuild)"
            console.print_stdout("\n".join([f"DIFFERENT {owner}: the rebuild differs from {expected_name}:", digests, *lines]))
    return VerifyReproducible(exit_code=1 if failed else 0)


def rules():
    return collect_rules()
