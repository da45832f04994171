"""`pants lock-build-requirements <rocm_wheel>...`: write the build-requirements locks.

For each rocm_wheel with `build_requirements`, the patched tree at its pin is fetched (for
the `-r` files it names), pip resolves the requirements against `[rocm-build].index_urls`
for the build Python, and the lock is written with a sha256 per distribution and a header
naming the pin commit, the Python and the requirement files it was made from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

from pants.engine.addresses import Address, Addresses
from pants.engine.console import Console
from pants.engine.fs import (
    CreateDigest,
    Digest,
    FileContent,
    MergeDigests,
    Workspace,
)
from pants.engine.goal import Goal, GoalSubsystem
from pants.engine.rules import Get, collect_rules, goal_rule, rule
from pants.engine.target import Targets

from rocm_build.wheel import lockfile
from rocm_build.wheel.build_spec import WheelBuildSpec, WheelRequest
from rocm_build.wheel.build_requirements import (
    PipResolved,
    PipResolveRequest,
    regenerate_command,
    sha256_or_none,
)
from rocm_build.errors import RocmBuildError
from rocm_build.toolchain.interpreters import BuildPython, BuildPythonRequest
from rocm_build.upstream.source_tree import source_files
from rocm_build.upstream.fetch import TREE_DIR
from rocm_build.wheel.target_types import RocmWheelTarget, WheelBuildRequirementsField
from rocm_build.upstream.upstream_repo import ResolvedUpstream, UpstreamRequest

REQUIREMENTS_IN = f"{TREE_DIR}/.rocm-build-requirements.in"


class LockBuildRequirementsSubsystem(GoalSubsystem):
    name = "lock-build-requirements"
    help = "Resolve the `build_requirements` of rocm_wheel targets and write their locks."


class LockBuildRequirements(Goal):
    subsystem_cls = LockBuildRequirementsSubsystem
    environment_behavior = Goal.EnvironmentBehavior.LOCAL_ONLY


@dataclass(frozen=True)
class BuildLockRequest:
    address: Address  # a rocm_wheel with build_requirements


@rule(desc="Resolving a build-requirements lock")
async def resolve_build_lock(request: BuildLockRequest) -> lockfile.ResolvedLock:
    spec = await Get(WheelBuildSpec, WheelRequest(request.address))
    python = await Get(BuildPython, BuildPythonRequest(spec.python, spec.owner))
    pin = spec.upstream.pin
    # The tree is fetched only when a requirement names a file in it: the -r files, nested
    # ones too, read from the patched tree, which is what the build will see.
    source = None
    if any(line.split()[0] in lockfile.INCLUDE_OPTIONS for line in spec.requirements):
        upstream = await Get(ResolvedUpstream, UpstreamRequest(spec.upstream.address, f"the `source` field of {spec.owner}"))
        source = upstream.source
    texts: Dict[str, Optional[bytes]] = {}
    while True:
        try:
            files = lockfile.included_files(spec.requirements, lambda p: _text(texts[p]))
            break
        except KeyError as missing:
            texts.update(await source_files(source, (missing.args[0],), spec.owner))
        except lockfile.LockError as e:
            raise RocmBuildError(f"{spec.owner}: `build_requirements`: {e} (pin {spec.upstream.pin_name} at {pin.commit})") from None
    # pip reads the included files from the tree: only those are given to it.
    tree = await Get(Digest, CreateDigest([FileContent(f"{TREE_DIR}/{p}", texts[p] or b"") for p in files]))
    requirements_in = await Get(
        Digest, CreateDigest([FileContent(REQUIREMENTS_IN, "\n".join(spec.requirements).encode() + b"\n")])
    )
    resolved = await Get(
        PipResolved,
        PipResolveRequest(
            spec.owner, "", spec.requirements, python, REQUIREMENTS_IN,
            await Get(Digest, MergeDigests([tree, requirements_in])),
            f"Resolving the build requirements of {spec.owner}",
        ),
    )  # fmt: skip
    lock = lockfile.BuildLock(
        pin=spec.upstream.pin_name,
        commit=pin.commit,
        python=python.major_minor,
        requirements=spec.requirements,
        files=tuple((p, sha256_or_none(texts[p]) or "") for p in files),
        dists=resolved.dists,
        left_out=resolved.left_out,
        regenerate=regenerate_command(spec.owner),
    )
    return lockfile.ResolvedLock(spec.lock_path or "", lock)


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
        resolved = await Get(lockfile.ResolvedLock, BuildLockRequest(target.address))
        written.append(FileContent(resolved.path, lockfile.render(resolved.lock).encode()))
        left_out = resolved.lock.left_out
        extra = f"; left out: {', '.join(left_out)}" if left_out else ""
        console.print_stdout(
            f"Wrote {resolved.path}: {len(resolved.lock.dists)} distribution(s) for {target.address.spec}{extra}"
        )
    # Written together, once every lock resolved: a failure leaves all of them as they were.
    workspace.write_digest(await Get(Digest, CreateDigest(written)))
    return LockBuildRequirements(exit_code=0)


def _text(data: Optional[bytes]) -> Optional[str]:
    return None if data is None else data.decode()


def rules():
    return collect_rules()
