"""Run-time requirement locks (written by `pants lock-runtime-requirements`, goals/).

A rocm_wheel's `runtime_requirements` (what the installed wheel needs beside its chain, e.g.
flash-attention's einops) are resolved once against `[python-repos] indexes` for the build
Python, together with those of every rocm_wheel below it in its chain (one venv holds them
all: vLLM's setuptools<80 and torch's setuptools>=77.0.3 resolve to one version only when
resolved together), and pinned by sha256, in the build lock's format (lockfile.py) under its
own title:

    # rocm-pants run-time requirements lock. Generated: do not edit.
    # regenerate: pants lock-runtime-requirements components/flash_attention:wheel
    # pin: flash_attention (run time: any commit)
    # python: 3.12
    # requirement: einops
    # from einops-0.8.1-py3-none-any.whl
    einops==0.8.1 --hash=sha256:...

The requirements come from the target, not from the pinned tree, so the lock names no commit
and no file: it stays valid when the pin moves. The chain's own wheels (torch for vLLM's peft)
are not resolved from the index: the resolve sees them as stubs at the chain's versions and
the lock leaves them out, naming the target that provides each (chain_stubs.py). Modules that
TheRock's SDK ships instead of an index (sdk_modules.py) are never locked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence, Tuple

from pants.engine.addresses import Address
from pants.engine.fs import (
    CreateDigest,
    Digest,
    DigestContents,
    FileContent,
    GlobMatchErrorBehavior,
    PathGlobs,
    RemovePrefix,
)
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import WrappedTarget, WrappedTargetRequest
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.install.chain_stubs import chain_stubs, resolve_args
from rocm_build.install.sdk_modules import index_requirements, sdk_requirements
from rocm_build.wheel.target_types import WheelRuntimeRequirementsField
from rocm_build.wheel.chain_order import WheelChain, WheelChainRequest
from rocm_build.locks import lockfile
from rocm_build.wheel.chain_versions import ChainVersions, ChainVersionsRequest
from rocm_build.wheel.build_spec import WheelBuildSpec, WheelRequest
from rocm_build.locks.build_requirements import (
    LOCK_IN_SANDBOX,
    WHEELHOUSE_DIR,
    PipResolved,
    PipResolveRequest,
    Wheelhouse,
    WheelhouseRequest,
)
from rocm_build.errors import RocmBuildError
from rocm_build.toolchain.interpreters import BuildPython, BuildPythonRequest
from rocm_build.locks import build_requirements
from rocm_build.toolchain import interpreters
from rocm_build.wheel import build_spec, chain_order, chain_versions

TITLE = "# rocm-pants run-time requirements lock. Generated: do not edit."
# Where the build lock names the pin's commit: run-time requirements do not depend on it.
ANY_COMMIT = "(run time: any commit)"
REQUIREMENTS_IN = "runtime-requirements.in"


def runtime_lock_path(pin: str, python_minor: str, target_name: str = "wheel") -> str:
    """`<pin>.lock`; a target not named `wheel` (vllm:wheel-on-therock, whose chain differs)
    gets `<pin>.<name>.lock`."""
    suffix = "" if target_name == "wheel" else f".{target_name}"
    return f"3rdparty/run/py{python_minor}/{pin}{suffix}.lock"


def regenerate_command(owner: str) -> str:
    return f"pants lock-runtime-requirements {owner}"


def render(lock: lockfile.BuildLock) -> str:
    return TITLE + lockfile.render(lock)[len(lockfile.TITLE) :]


def parse(text: str, path: str) -> lockfile.BuildLock:
    if not text.startswith(TITLE):
        raise lockfile.LockError(f"{path} is not a rocm-pants run-time requirements lock (its first line is not {TITLE!r})")
    return lockfile.parse(lockfile.TITLE + text[len(TITLE) :], path)


def stale_reasons(lock: lockfile.BuildLock, python: str, requirements: Sequence[str]) -> List[str]:
    """Why `lock` no longer matches the target; empty if it does."""
    why = []
    if lock.python != python:
        why.append(f"it was resolved for Python {lock.python}, the target builds for Python {python}")
    if tuple(lock.requirements) != tuple(requirements):
        why.append(
            f"it was made from {list(lock.requirements)}, the `runtime_requirements` of the target and its chain "
            f"now say {list(requirements)}"
        )
    return why


@dataclass(frozen=True)
class ChainRuntimeRequirementsRequest:
    address: Address  # a rocm_wheel


@dataclass(frozen=True)
class ChainRuntimeRequirements:
    own: Tuple[str, ...]  # the target's `runtime_requirements` an index serves
    # those of every rocm_wheel of its chain, dependencies first, each line once: what its lock holds
    chain: Tuple[str, ...]
    members: Tuple[Address, ...]  # the rocm_wheels of its chain, itself last
    sdk: Tuple[str, ...] = ()  # the SDK's modules its chain asks for (sdk_modules.py), not locked


@rule(desc="Collecting the run-time requirements of a rocm_wheel chain")
async def chain_runtime_requirements(request: ChainRuntimeRequirementsRequest) -> ChainRuntimeRequirements:
    members = (await Get(WheelChain, WheelChainRequest(request.address))).addresses
    wrapped = await MultiGet(
        Get(WrappedTarget, WrappedTargetRequest(a, f"the chain of {request.address.spec}")) for a in members
    )
    lines: Tuple[str, ...] = ()
    sdk: Tuple[str, ...] = ()
    for w in wrapped:
        owner, field = w.target.address.spec, w.target[WheelRuntimeRequirementsField].value or ()
        lines, sdk = (*lines, *index_requirements(owner, field)), (*sdk, *sdk_requirements(owner, field))
    own = index_requirements(request.address.spec, wrapped[-1].target[WheelRuntimeRequirementsField].value or ())
    return ChainRuntimeRequirements(own, tuple(dict.fromkeys(lines)), members, tuple(dict.fromkeys(sdk)))


@dataclass(frozen=True)
class RuntimeLockRequest:
    address: Address  # a rocm_wheel with runtime requirements that an index serves
    requirements: Tuple[str, ...]  # those of its chain (ChainRuntimeRequirements.chain)


@rule(desc="Resolving a run-time requirements lock")
async def resolve_runtime_lock(request: RuntimeLockRequest) -> lockfile.ResolvedLock:
    spec = await Get(WheelBuildSpec, WheelRequest(request.address))
    python = await Get(BuildPython, BuildPythonRequest(spec.python, spec.owner))
    # The chain's own wheels are seen as stubs and left out (chain_stubs.py).
    chain = await Get(ChainVersions, ChainVersionsRequest(request.address))
    stubs, left_out = chain_stubs(chain.dists)
    files = {REQUIREMENTS_IN: "\n".join(request.requirements).encode() + b"\n", **stubs}
    inputs = await Get(Digest, CreateDigest([FileContent(path, data) for path, data in files.items()]))
    resolved = await Get(
        PipResolved,
        PipResolveRequest(
            spec.owner, "`runtime_requirements` ", request.requirements, python, REQUIREMENTS_IN, inputs,
            f"Resolving the run-time requirements of {spec.owner}", resolve_args(), tuple(sorted(left_out.items())),
        ),
    )  # fmt: skip
    lock = lockfile.BuildLock(
        pin=spec.upstream.pin_name,
        commit=ANY_COMMIT,
        python=python.major_minor,
        requirements=request.requirements,
        files=(),
        dists=resolved.dists,
        left_out=resolved.left_out,
        regenerate=regenerate_command(spec.owner),
    )
    return lockfile.ResolvedLock(runtime_lock_path(spec.upstream.pin_name, python.major_minor, request.address.target_name), lock)


@dataclass(frozen=True)
class RuntimeLockCheck:
    address: Address  # a rocm_wheel with runtime requirements that an index serves
    requirements: Tuple[str, ...]  # those of its chain (ChainRuntimeRequirements.chain)


@dataclass(frozen=True)
class CheckedRuntimeLock:
    owner: str
    path: str
    lock: lockfile.BuildLock
    wheels: Digest  # the locked wheels, at the digest root


@rule(desc="Checking a run-time requirements lock")
async def check_runtime_lock(request: RuntimeLockCheck) -> CheckedRuntimeLock:
    spec = await Get(WheelBuildSpec, WheelRequest(request.address))
    owner = spec.owner
    python = await Get(BuildPython, BuildPythonRequest(spec.python, owner))
    path = runtime_lock_path(spec.upstream.pin_name, python.major_minor, request.address.target_name)
    contents = await Get(DigestContents, PathGlobs([path], glob_match_error_behavior=GlobMatchErrorBehavior.ignore))
    if not contents:
        raise RocmBuildError(
            f"rocm_wheel {owner} has `runtime_requirements` {list(request.requirements)} (with those of its chain) "
            f"but no lock at {path}. "
            f"Make it (it resolves them against the index once and pins every file by sha256): {regenerate_command(owner)}"
        )
    try:
        lock = parse(contents[0].content.decode(), path)
    except lockfile.LockError as e:
        raise RocmBuildError(f"rocm_wheel {owner}: {e}. Regenerate it: {regenerate_command(owner)}") from None
    reasons = stale_reasons(lock, python.major_minor, request.requirements)
    if reasons:
        raise RocmBuildError(
            f"rocm_wheel {owner}: the lock {path} no longer matches its `runtime_requirements`: "
            + "; ".join(reasons)
            + f". Regenerate it: {regenerate_command(owner)}"
        )
    # Downloaded as build requirements are (one cached process per lock, every file checked
    # against its sha256), for the Python the wheel is built for.
    lock_file = await Get(Digest, CreateDigest([FileContent(LOCK_IN_SANDBOX, contents[0].content)]))
    house = await Get(Wheelhouse, WheelhouseRequest(owner, path, lock_file, len(lock.dists), python))
    return CheckedRuntimeLock(owner, path, lock, await Get(Digest, RemovePrefix(house.digest, WHEELHOUSE_DIR)))


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        *build_requirements.rules(),
        *interpreters.rules(),
        *build_spec.rules(),
        *chain_order.rules(),
        *chain_versions.rules(),
    ])
