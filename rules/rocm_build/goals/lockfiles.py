"""The build and run-time locks as resolves of `pants generate-lockfiles`.

Every lock file the rocm_wheel targets name is one resolve, named for its kind and its path
under 3rdparty/<kind>/: `build:py3.11/mini-vllm` is 3rdparty/build/py3.11/mini-vllm.lock (a
target's `build_requirements`, locks/lockfile.py), `run:py3.11/mini-flash_attention` is
3rdparty/run/py3.11/mini-flash_attention.lock (its `runtime_requirements` with its chain's,
install/runtime_lock.py). `pants generate-lockfiles` writes them with the Python resolves;
`--resolve=<name>` picks some. The `lock-build-requirements` and `lock-runtime-requirements`
goals are aliases by target: all three resolve and render a lock with `RocmLockRequest`, so
the bytes written are the same whichever is run.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import DefaultDict, Dict, List, Sequence, Tuple

from packaging.version import Version
from pants.core.goals.generate_lockfiles import (
    GenerateLockfile,
    GenerateLockfileResult,
    KnownUserResolveNames,
    KnownUserResolveNamesRequest,
    LockfileDiff,
    LockfilePackages,
    RequestedUserResolveNames,
    UserGenerateLockfiles,
)
from pants.engine.addresses import Address
from pants.engine.collection import Collection
from pants.engine.environment import ChosenLocalEnvironmentName, EnvironmentName
from pants.engine.fs import CreateDigest, Digest, DigestContents, FileContent, GlobMatchErrorBehavior, PathGlobs
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import AllTargets
from pants.engine.unions import UnionRule
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.errors import RocmBuildError
from rocm_build.install import runtime_lock
from rocm_build.install.runtime_lock import ChainRuntimeRequirements, ChainRuntimeRequirementsRequest, RuntimeLockRequest
from rocm_build.install.sdk_modules import index_requirements
from rocm_build.wheel.target_types import WheelRuntimeRequirementsField
from rocm_build.toolchain.interpreters import BuildPython, BuildPythonRequest, parse_constraint
from rocm_build.locks import lockfile
from rocm_build.locks.lockfile import resolve_name
from rocm_build.wheel.build_lock import BuildLockRequest
from rocm_build.wheel.build_spec import WheelBuildSpec, WheelRequest
from rocm_build.wheel.target_types import RocmWheelTarget, WheelBuildRequirementsField
from rocm_build.pants_environments import environment_rules
from rocm_build.toolchain import interpreters
from rocm_build.wheel import build_lock, build_spec

BUILD = "build"  # a rocm_wheel's `build_requirements`: 3rdparty/build/
RUN = "run"  # its `runtime_requirements`, with its chain's: 3rdparty/run/


@dataclass(frozen=True)
class RocmLockRequest:
    kind: str  # BUILD or RUN
    address: Address  # a rocm_wheel with such requirements


@dataclass(frozen=True)
class RocmLock:
    """A lock resolved and rendered, not yet written."""

    path: str
    content: bytes
    lock: lockfile.BuildLock


@rule(desc="Resolving a rocm_wheel lock")
async def resolve_rocm_lock(request: RocmLockRequest) -> RocmLock:
    if request.kind == BUILD:
        resolved = await Get(lockfile.ResolvedLock, BuildLockRequest(request.address))
        return RocmLock(resolved.path, lockfile.render(resolved.lock).encode(), resolved.lock)
    # Resolved with its chain's: one venv holds them all (runtime_lock.py).
    requirements = await Get(ChainRuntimeRequirements, ChainRuntimeRequirementsRequest(request.address))
    resolved = await Get(lockfile.ResolvedLock, RuntimeLockRequest(request.address, requirements.chain))
    return RocmLock(resolved.path, runtime_lock.render(resolved.lock).encode(), resolved.lock)


def check_shared_runtime_lock(path: str, owners: Sequence[Tuple[str, Tuple[str, ...]]]) -> None:
    """Two targets of one pin (and Python, and name) share a run-time lock: they must ask for
    the same requirements. `owners` is (target, requirements of its chain) of each."""
    first, first_requirements = owners[0]
    for owner, requirements in owners[1:]:
        if requirements != first_requirements:
            raise RocmBuildError(
                f"{owner} and {first} share the lock {path} (same pin, same Python) but their "
                f"`runtime_requirements` differ ({list(requirements)}, {list(first_requirements)}): "
                "make them the same."
            )


@dataclass(frozen=True)
class RocmLockResolve:
    name: str
    kind: str
    path: str
    owners: Tuple[Address, ...]  # the rocm_wheels whose lock it is, sorted: the first's is written


class RocmLockResolves(Collection[RocmLockResolve]):
    pass


async def _runtime_lock_path(spec: WheelBuildSpec) -> str:
    # As resolve_runtime_lock names it; the interpreter is looked for only when `python`
    # allows more than one minor version.
    minor = parse_constraint(spec.python, spec.owner).minor
    if not minor:
        minor = (await Get(BuildPython, BuildPythonRequest(spec.python, spec.owner))).major_minor
    return runtime_lock.runtime_lock_path(spec.upstream.pin_name, minor, spec.address.target_name)


@rule(desc="Listing the locks of the rocm_wheel targets")
async def rocm_lock_resolves(targets: AllTargets) -> RocmLockResolves:
    wheels = [t for t in targets if isinstance(t, RocmWheelTarget)]
    build = [t.address for t in wheels if t[WheelBuildRequirementsField].value]
    # Only what an index serves is locked: the SDK's own modules come with the SDK.
    run = [t.address for t in wheels if index_requirements(t.address.spec, t[WheelRuntimeRequirementsField].value or ())]
    specs = await MultiGet(Get(WheelBuildSpec, WheelRequest(a)) for a in dict.fromkeys([*build, *run]))
    by_address = {s.address: s for s in specs}
    run_paths = [await _runtime_lock_path(by_address[a]) for a in run]
    owners: DefaultDict[Tuple[str, str], List[Address]] = defaultdict(list)
    for address in build:
        owners[(BUILD, by_address[address].lock_path or "")].append(address)
    for address, path in zip(run, run_paths):
        owners[(RUN, path)].append(address)
    resolves = [
        RocmLockResolve(resolve_name(kind, path), kind, path, tuple(sorted(addresses)))
        for (kind, path), addresses in owners.items()
    ]
    return RocmLockResolves(sorted(resolves, key=lambda r: r.name))


class KnownRocmLockNamesRequest(KnownUserResolveNamesRequest):
    pass


class RequestedRocmLockNames(RequestedUserResolveNames):
    pass


@rule
async def known_rocm_lock_names(_: KnownRocmLockNamesRequest, local: ChosenLocalEnvironmentName) -> KnownUserResolveNames:
    # Pants asks for the names with no environment; the specs are read in the local one, as
    # `generate-lockfiles` plans every resolve.
    resolves = await Get(RocmLockResolves, EnvironmentName, local.val)
    return KnownUserResolveNames(
        names=tuple(r.name for r in resolves),
        option_name="the locks of rocm_wheel targets (`build_requirements`, `runtime_requirements`)",
        requested_resolve_names_cls=RequestedRocmLockNames,
    )


@dataclass(frozen=True)
class GenerateRocmLockfile(GenerateLockfile):
    kind: str
    owners: Tuple[Address, ...]


@rule
async def requested_rocm_locks(requested: RequestedRocmLockNames, resolves: RocmLockResolves) -> UserGenerateLockfiles:
    return UserGenerateLockfiles(
        GenerateRocmLockfile(resolve_name=r.name, lockfile_dest=r.path, diff=False, kind=r.kind, owners=r.owners)
        for r in resolves
        if r.name in requested
    )


def _versions(lock: lockfile.BuildLock) -> LockfilePackages:
    return LockfilePackages({d.name: Version(d.version) for d in lock.dists})  # pip's: PEP 440


async def _diff(request: GenerateRocmLockfile, new: RocmLock) -> LockfileDiff:
    """`--diff`: what changed against the lock on disk (none there: everything is added)."""
    old: Dict[str, object] = {}
    contents = await Get(DigestContents, PathGlobs([new.path], glob_match_error_behavior=GlobMatchErrorBehavior.ignore))
    parse = lockfile.parse if request.kind == BUILD else runtime_lock.parse
    if contents:
        try:
            old = dict(_versions(parse(contents[0].content.decode(), new.path)))
        except lockfile.LockError:
            pass  # unreadable: shown as all added
    return LockfileDiff.create(new.path, request.resolve_name, LockfilePackages(old), _versions(new.lock))


@rule(desc="Generating a rocm_wheel lock")
async def generate_rocm_lockfile(request: GenerateRocmLockfile) -> GenerateLockfileResult:
    if request.kind == RUN and len(request.owners) > 1:
        chains = await MultiGet(Get(ChainRuntimeRequirements, ChainRuntimeRequirementsRequest(a)) for a in request.owners)
        check_shared_runtime_lock(request.lockfile_dest, [(a.spec, c.chain) for a, c in zip(request.owners, chains)])
    lock = await Get(RocmLock, RocmLockRequest(request.kind, request.owners[0]))
    digest = await Get(Digest, CreateDigest([FileContent(lock.path, lock.content)]))
    diff = await _diff(request, lock) if request.diff else None
    return GenerateLockfileResult(digest, request.resolve_name, lock.path, diff)


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        UnionRule(KnownUserResolveNamesRequest, KnownRocmLockNamesRequest),
        UnionRule(RequestedUserResolveNames, RequestedRocmLockNames),
        UnionRule(GenerateLockfile, GenerateRocmLockfile),
        *environment_rules.rules(),
        *runtime_lock.rules(),
        *interpreters.rules(),
        *build_lock.rules(),
        *build_spec.rules(),
    ])
