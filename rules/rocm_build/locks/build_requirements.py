"""Locked build requirements: check a wheel's lock against its inputs, download its wheelhouse.

The wheelhouse is its own cached process, keyed by the lock's content (plus the pip and
Python that download it), so it is fetched once per lock and shared through the remote cache;
the build installs from it with `--no-index --require-hashes` and never sees an index.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Optional, Tuple

from pants.engine.fs import (
    EMPTY_DIGEST,
    AddPrefix,
    CreateDigest,
    Digest,
    DigestContents,
    FileContent,
    GlobMatchErrorBehavior,
    MergeDigests,
    PathGlobs,
)
from pants.engine.process import FallibleProcessResult, Process, ProcessCacheScope
from pants.engine.rules import Get, collect_rules, rule
from pants.option.global_options import GlobalOptions
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.locks import lockfile
from rocm_build.subsystems.bootstrap_wheels import BootstrapWheels
from rocm_build.errors import RocmBuildError, indent, tail
from rocm_build.toolchain.interpreters import PYTHON_LINK, BuildPython
from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_files
from rocm_build.subsystems.package_indexes import PipIndexArgs
from rocm_build.upstream.source_tree import SourceTree, source_files
from rocm_build.subsystems.host_tools import REMOTE_CACHE_FIRST_MILLIS, HostTools
from rocm_build.subsystems import bootstrap_wheels, host_tools, package_indexes
from rocm_build.upstream import source_tree

LOCK_IN_SANDBOX = f"{SCRIPTS_DIR}/build.lock"
WHEELHOUSE_DIR = "wheelhouse"
_HASH_MISMATCH = re.compile(r"^\s*(\S+) from (\S+).*?\n\s*Expected sha256 (\w+)\s*\n\s*Got\s+(\w+)", re.M | re.S)


def regenerate_command(owner: str) -> str:
    return f"pants lock-build-requirements {owner}"


def pip_environment(python: BuildPython, global_options: GlobalOptions) -> dict:
    env = {"PATH": "/usr/bin:/bin", "PIP_CONFIG_FILE": "/dev/null", "ROCM_BUILD_PYTHON_VERSION": python.identity}
    if global_options.ca_certs_path:
        # The repository's CA bundle (`[GLOBAL] ca_certs_path`), e.g. for an intercepting proxy.
        env["PIP_CERT"] = global_options.ca_certs_path
    return env


@dataclass(frozen=True)
class LockPath:
    path: str  # from the build root


@dataclass(frozen=True)
class LockedRequirementsRequest:
    owner: str
    lock_path: str
    pin: str
    commit: str
    requirements: Tuple[str, ...]  # requirement lines of the target
    source: SourceTree  # the patched tree
    python: BuildPython


@dataclass(frozen=True)
class LockedRequirements:
    lock_path: str
    sha256: str  # of the lock file
    lock: lockfile.BuildLock
    inputs: Digest  # the lock at LOCK_IN_SANDBOX and its wheels under WHEELHOUSE_DIR/


@dataclass(frozen=True)
class Wheelhouse:
    digest: Digest  # the locked wheels under WHEELHOUSE_DIR/


@dataclass(frozen=True)
class WheelhouseRequest:
    owner: str
    lock_path: str
    lock: Digest  # the lock file at LOCK_IN_SANDBOX
    count: int
    python: BuildPython  # wheels are chosen for its version


@dataclass(frozen=True)
class LockWheelsRequest:
    owner: str
    lock_path: str
    python: BuildPython  # the Python the wheels are downloaded for (see WheelhouseRequest)


@dataclass(frozen=True)
class LockWheels:
    """A lock's wheels, downloaded before its check against the tree, so that a build fetches
    them beside the tree rather than after it. Empty if the lock is missing or unreadable
    (the check names the fix)."""

    lock_file: Digest  # the lock at LOCK_IN_SANDBOX
    wheelhouse: Digest  # its wheels under WHEELHOUSE_DIR/


def sha256_or_none(data: Optional[bytes]) -> Optional[str]:
    return None if data is None else hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class ReadLock:
    """A lock file as found: missing (no content), unreadable (`error`), or parsed."""

    path: str
    content: Optional[bytes]
    lock: Optional[lockfile.BuildLock]
    error: Optional[str] = None

    @property
    def sha256(self) -> Optional[str]:
        return sha256_or_none(self.content)


@rule(desc="Reading a build-requirements lock")
async def read_lock(path: LockPath) -> ReadLock:
    contents = await Get(
        DigestContents,
        PathGlobs([path.path], glob_match_error_behavior=GlobMatchErrorBehavior.ignore),
    )
    if not contents:
        return ReadLock(path.path, None, None)
    try:
        return ReadLock(path.path, contents[0].content, lockfile.parse(contents[0].content.decode(), path.path))
    except lockfile.LockError as e:
        return ReadLock(path.path, contents[0].content, None, str(e))


@rule(desc="Checking a build-requirements lock")
async def locked_requirements(request: LockedRequirementsRequest) -> LockedRequirements:
    owner, path, python = request.owner, request.lock_path, request.python
    read = await Get(ReadLock, LockPath(path))
    if read.content is None:
        raise RocmBuildError(
            f"rocm_wheel {owner} has `build_requirements` but no lock at {path}. Make it (it "
            f"resolves them against the index once and pins every file by sha256): "
            f"{regenerate_command(owner)}"
        )
    if read.lock is None:
        raise RocmBuildError(f"rocm_wheel {owner}: {read.error}. Regenerate it: {regenerate_command(owner)}")
    lock = read.lock
    found = await source_files(request.source, (p for p, _ in lock.files), owner)
    hashes = {p: sha256_or_none(data) for p, data in found.items()}
    reasons = lockfile.stale_reasons(
        lock, request.pin, request.commit, python.major_minor, request.requirements, hashes
    )
    if reasons:
        raise RocmBuildError(
            f"rocm_wheel {owner}: the lock {path} no longer matches its inputs: "
            + "; ".join(reasons)
            + f". Regenerate it: {regenerate_command(owner)}"
        )
    wheels = await Get(LockWheels, LockWheelsRequest(owner, path, python))
    return LockedRequirements(
        lock_path=path,
        sha256=read.sha256 or "",
        lock=lock,
        inputs=await Get(Digest, MergeDigests([wheels.lock_file, wheels.wheelhouse])),
    )


@rule(desc="Downloading a build-requirements lock's wheels", level=LogLevel.DEBUG)
async def lock_wheels(request: LockWheelsRequest) -> LockWheels:
    read = await Get(ReadLock, LockPath(request.lock_path))
    if read.content is None or read.lock is None:
        return LockWheels(EMPTY_DIGEST, EMPTY_DIGEST)
    lock_file = await Get(Digest, CreateDigest([FileContent(LOCK_IN_SANDBOX, read.content)]))
    count = len(read.lock.dists)
    wheelhouse = await Get(Wheelhouse, WheelhouseRequest(request.owner, request.lock_path, lock_file, count, request.python))
    return LockWheels(lock_file, wheelhouse.digest)


@dataclass(frozen=True)
class PipRun:
    """A pip command, run by the pinned bootstrap pip with the build Python (run_pip.sh)."""

    args: Tuple[str, ...]  # pip's own; the index arguments of `[rocm-build]` are appended
    python: BuildPython
    inputs: Digest
    description: str
    output_files: Tuple[str, ...] = ()
    output_directories: Tuple[str, ...] = ()
    cache_scope: ProcessCacheScope = ProcessCacheScope.SUCCESSFUL


@rule
async def pip_run_process(
    request: PipRun, tools: HostTools, index: PipIndexArgs, global_options: GlobalOptions, bootstrap: BootstrapWheels
) -> Process:
    python = request.python
    scripts = await Get(Digest, script_files("run_pip.sh"))
    input_digest = await Get(
        Digest, MergeDigests([request.inputs, scripts, await Get(Digest, AddPrefix(bootstrap.digest, "bootstrap"))])
    )
    return Process(
        argv=(tools.bash.path, f"{SCRIPTS_DIR}/run_pip.sh", python.in_sandbox, *request.args, *index.args),
        env=pip_environment(python, global_options),
        append_only_caches={python.cache_name: PYTHON_LINK},
        input_digest=input_digest,
        output_files=request.output_files,
        output_directories=request.output_directories,
        remote_cache_speculation_delay_millis=REMOTE_CACHE_FIRST_MILLIS,
        description=request.description,
        level=LogLevel.INFO,
        timeout_seconds=3600,
        cache_scope=request.cache_scope,
    )


@dataclass(frozen=True)
class PipResolveRequest:
    """What pip would install for `requirements_in` (a file in `inputs`) from the index today,
    as a lock records it; `what` names the requirements in an error ("`build_requirements`")."""

    owner: str
    what: str
    requirements: Tuple[str, ...]
    python: BuildPython
    requirements_in: str
    inputs: Digest
    description: str
    extra_args: Tuple[str, ...] = ()  # more pip options, for files in `inputs`
    also_left_out: Tuple[Tuple[str, str], ...] = ()  # (PEP 503 name, why): resolved, not locked


@dataclass(frozen=True)
class PipResolved:
    dists: Tuple[lockfile.LockedDist, ...]
    left_out: Tuple[str, ...]


@rule
async def resolve_with_pip(request: PipResolveRequest) -> PipResolved:
    process = await Get(
        Process,
        PipRun(
            args=(
                "install", "--dry-run", "--ignore-installed", "--only-binary=:all:", "--quiet",
                "--report", "report.json", "-r", request.requirements_in, *request.extra_args,
            ),
            python=request.python,
            inputs=request.inputs,
            description=request.description,
            output_files=("report.json",),
            # A resolve asks the index what exists today: never reuse an earlier answer.
            cache_scope=ProcessCacheScope.PER_SESSION,
        ),
    )  # fmt: skip
    result = await Get(FallibleProcessResult, Process, process)
    if result.exit_code != 0:
        raise RocmBuildError(
            f"{request.owner}: pip could not resolve {request.what}{list(request.requirements)} for "
            f"{request.python.identity}:\n{indent(tail(result.stderr.decode(errors='replace'), 15))}"
        )
    report = json.loads((await Get(DigestContents, Digest, result.output_digest))[0].content)
    try:
        dists, left_out = lockfile.from_pip_report(report, dict(request.also_left_out))
    except lockfile.LockError as e:
        raise RocmBuildError(f"{request.owner}: {e}") from None
    return PipResolved(dists, left_out)


@rule(desc="Downloading a wheelhouse")
async def download_wheelhouse(request: WheelhouseRequest, index: PipIndexArgs) -> Wheelhouse:
    process = await Get(
        Process,
        PipRun(
            args=(
                "download", "--no-deps", "--only-binary=:all:", "--require-hashes", "--progress-bar=off",
                "--dest", WHEELHOUSE_DIR, "-r", LOCK_IN_SANDBOX,
            ),
            python=request.python,
            inputs=request.lock,
            description=f"Downloading {request.count} locked build requirement(s) of {request.owner}",
            output_directories=(WHEELHOUSE_DIR,),
        ),
    )  # fmt: skip
    result = await Get(FallibleProcessResult, Process, process)
    if result.exit_code != 0:
        output = result.stdout.decode(errors="replace") + result.stderr.decode(errors="replace")
        raise RocmBuildError(explain_download_failure(request, index, output))
    return Wheelhouse(result.output_digest)


def explain_download_failure(request: WheelhouseRequest, index: PipIndexArgs, output: str) -> str:
    where = f"rocm_wheel {request.owner}: lock {request.lock_path}"
    m = _HASH_MISMATCH.search(output)
    if m:
        dist, url, expected, got = m.groups()
        return (
            f"{where}: the file downloaded for {dist} does not match the lock: the lock says "
            f"sha256:{expected}, the file from {url} has sha256:{got}. Nothing was installed. If "
            f"the index really serves new bytes under the same version, check why before you "
            f"trust them, then regenerate the lock: {regenerate_command(request.owner)}"
        )
    sources = " ".join(index.args)
    return (
        f"{where}: the locked distributions could not be downloaded ({sources}). Check "
        f"`{index.where}` and the network.\n{indent(tail(output, 12))}"
    )


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        *package_indexes.rules(),
        *bootstrap_wheels.rules(),
        *host_tools.rules(),
        *source_tree.rules(),
    ])
