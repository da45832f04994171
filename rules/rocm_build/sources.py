"""Fetching a pinned upstream commit into a digest.

The fetch is a Pants process whose inputs are only the URL, the SHA and the submodule
flag, so its cache key is the same on every machine and checkout path: a second build, or
another checkout, never fetches again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pants.engine.fs import Digest, DigestContents, DigestSubset, PathGlobs
from pants.engine.process import FallibleProcessResult, Process
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.util.logging import LogLevel

from rocm_build.errors import RocmBuildError, indent, tail
from rocm_build.tools import REMOTE_CACHE_FIRST_MILLIS, HostTools

TREE_DIR = "tree"

# Exit codes of FETCH_SCRIPT, so failures can be explained without parsing everything.
EXIT_FETCH, EXIT_MISMATCH, EXIT_SUBMODULES = 10, 11, 12

FETCH_SCRIPT = r"""
set -uo pipefail
url="$1"; sha="$2"; submodules="$3"
git init -q tree && cd tree || exit 1
git -c protocol.file.allow=always fetch -q --depth 1 --no-tags "$url" "$sha" || exit 10
git checkout -q --detach FETCH_HEAD || exit 1
got="$(git rev-parse HEAD)"
[ "$got" = "$sha" ] || { echo "fetched $got instead of $sha" >&2; exit 11; }
if [ "$submodules" = 1 ]; then
  git -c protocol.file.allow=always submodule update -q --init --recursive --depth 1 || exit 12
fi
# The commit's time, for SOURCE_DATE_EPOCH: a timestamp that is content, not the day's.
git log -1 --format=%ct HEAD > ../commit_time || exit 1
# The digest is the tree itself: git metadata differs between fetches of the same commit.
find . -name .git -prune -exec rm -rf {} +
"""

_NOT_FOUND = re.compile(
    r"not our ref|couldn't find remote ref|no such remote ref|unadvertised object|"
    r"did not send all necessary objects|Could not find remote ref|not a valid object",
    re.I,
)


@dataclass(frozen=True)
class FetchRequest:
    url: str
    commit: str
    submodules: bool
    # For messages only; not part of the process key.
    pin_name: str
    pins_file: str
    owner: str


@dataclass(frozen=True)
class FetchedTree:
    digest: Digest  # the tree, under TREE_DIR/
    commit_time: int  # seconds since the epoch, the commit's committer date


@rule
async def fetch_upstream(request: FetchRequest, tools: HostTools) -> FetchedTree:
    result = await Get(
        FallibleProcessResult,
        Process(
            argv=(
                tools.bash.path,
                "-c",
                FETCH_SCRIPT,
                "fetch",
                request.url,
                request.commit,
                "1" if request.submodules else "0",
            ),
            env={
                "PATH": "/usr/bin:/bin",
                "GIT_TERMINAL_PROMPT": "0",
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_CONFIG_GLOBAL": "/dev/null",
                # Version of git, so a different git is a different key.
                "ROCM_BUILD_GIT": tools.git.fingerprint,
            },
            output_directories=(TREE_DIR,),
            output_files=("commit_time",),
            remote_cache_speculation_delay_millis=REMOTE_CACHE_FIRST_MILLIS,
            description=f"Fetching {request.pin_name} @ {request.commit[:12]} for {request.owner}",
            level=LogLevel.INFO,
            timeout_seconds=3600,
        ),
    )
    if result.exit_code != 0:
        raise RocmBuildError(explain_fetch_failure(request, result.exit_code, result.stderr.decode()))
    tree, time_file = await MultiGet(
        Get(Digest, DigestSubset(result.output_digest, PathGlobs([f"{TREE_DIR}/**"]))),
        Get(Digest, DigestSubset(result.output_digest, PathGlobs(["commit_time"]))),
    )
    commit_time = await Get(DigestContents, Digest, time_file)
    return FetchedTree(tree, int(commit_time[0].content))


def explain_fetch_failure(request: FetchRequest, exit_code: int, stderr: str) -> str:
    where = f"{request.owner}: pin `{request.pin_name}` in {request.pins_file}"
    said = f"\ngit said:\n{indent(tail(stderr, 8))}" if stderr.strip() else ""
    if exit_code == EXIT_FETCH and _NOT_FOUND.search(stderr):
        return (
            f"{where}: commit {request.commit} was not found at {request.url}. The SHA may be "
            f"mistyped or on a branch that was force-pushed; check it upstream or run "
            f"`pants run rules:update-pins -- --only {request.pin_name}`.{said}"
        )
    if exit_code == EXIT_FETCH:
        return (
            f"{where}: cannot fetch from {request.url}. Check the URL, the network or proxy, "
            f"and your credentials for that host.{said}"
        )
    if exit_code == EXIT_MISMATCH:
        return f"{where}: {request.url} served a different commit than {request.commit}.{said}"
    if exit_code == EXIT_SUBMODULES:
        return (
            f"{where}: the submodules of {request.commit} could not be fetched; check that "
            f"their URLs are reachable, or set `submodules = false` if they are not needed.{said}"
        )
    return f"{where}: fetching {request.commit} from {request.url} failed (exit {exit_code}).{said}"


def rules():
    return collect_rules()
