"""Fetching a pinned upstream commit into a digest: the commit and its submodules as one git pack.

The fetch is a Pants process whose inputs are only the URL, the SHA, the submodule flag and
the git that fetches, so its cache key is the same on every machine and checkout path: a
second build, or another checkout, never fetches again. It writes no working tree: processes
that need files check them out of the pack themselves (source_tree.py), so a 100k-file tree
is never captured into Pants' store nor written back out of it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from pants.engine.fs import Digest, DigestContents, DigestSubset, PathGlobs
from pants.engine.process import FallibleProcessResult, Process
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.util.frozendict import FrozenDict
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.errors import RocmBuildError, indent, tail
from rocm_build.scripts import git_urls as GIT_URLS
from rocm_build.scripts import source_pack as SOURCE_PACK  # its exit codes say which step failed
from rocm_build.subsystems.host_tools import HostTools
from rocm_build.upstream.download import DownloadProcess
from rocm_build.subsystems import host_tools
from rocm_build.upstream import download

TREE_DIR = "tree"
# The fetched commits as one git pack (scripts/source_pack.py): objects.pack, objects.idx, repos.
PACK_DIR = "source"

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
    pack: Digest  # under PACK_DIR/: the commit and its submodules' commits, all their trees
    commit_time: int  # seconds since the epoch, the commit's committer date


@rule
async def fetch_upstream(request: FetchRequest, tools: HostTools) -> FetchedTree:
    submodules = "1" if request.submodules else "0"
    process = await Get(
        Process,
        DownloadProcess(
            "source_pack.py",
            ("fetch", request.url, request.commit, submodules, PACK_DIR),
            f"Fetching {request.pin_name} @ {request.commit[:12]} for {request.owner}",
            imports=("git_urls.py",),
            ca_certs=False,
            env=FrozenDict(
                {
                    # Git's own last line behind our URL checks: only the schemes the pin allows.
                    "GIT_ALLOW_PROTOCOL": GIT_URLS.git_protocol_allow(GIT_URLS.schemes_for(request.url)),
                    "GIT_TERMINAL_PROMPT": "0",
                    "GIT_CONFIG_NOSYSTEM": "1",
                    "GIT_CONFIG_GLOBAL": "/dev/null",
                    # Version of git, so a different git is a different key.
                    "ROCM_BUILD_GIT": tools.git.fingerprint,
                }
            ),
            output_directories=(PACK_DIR,),
            output_files=("commit_time",),
        ),
    )
    result = await Get(FallibleProcessResult, Process, process)
    if result.exit_code != 0:
        raise RocmBuildError(explain_fetch_failure(request, result.exit_code, result.stderr.decode()))
    pack, time_file = await MultiGet(
        Get(Digest, DigestSubset(result.output_digest, PathGlobs([f"{PACK_DIR}/**"]))),
        Get(Digest, DigestSubset(result.output_digest, PathGlobs(["commit_time"]))),
    )
    commit_time = await Get(DigestContents, Digest, time_file)
    return FetchedTree(pack, int(commit_time[0].content))


def explain_fetch_failure(request: FetchRequest, exit_code: int, stderr: str) -> str:
    where = f"{request.owner}: pin `{request.pin_name}` in {request.pins_file}"
    said = f"\ngit said:\n{indent(tail(stderr, 8))}" if stderr.strip() else ""
    if exit_code == SOURCE_PACK.EXIT_FETCH and _NOT_FOUND.search(stderr):
        return (
            f"{where}: commit {request.commit} was not found at {request.url}. The SHA may be "
            f"mistyped or on a branch that was force-pushed; check it upstream or run "
            f"`pants run rules:update-pins -- --only {request.pin_name}`.{said}"
        )
    if exit_code == SOURCE_PACK.EXIT_FETCH:
        return (
            f"{where}: cannot fetch from {request.url}. Check the URL, the network or proxy, "
            f"and your credentials for that host.{said}"
        )
    if exit_code == SOURCE_PACK.EXIT_REFUSED:
        return explain_refused_url(where, stderr)
    if exit_code == SOURCE_PACK.EXIT_MISMATCH:
        return f"{where}: {request.url} served a different commit than {request.commit}.{said}"
    if exit_code == SOURCE_PACK.EXIT_SUBMODULES:
        return (
            f"{where}: the submodules of {request.commit} could not be fetched; check that "
            f"their URLs are reachable, or set `submodules = false` if they are not needed.{said}"
        )
    return f"{where}: fetching {request.commit} from {request.url} failed (exit {exit_code}).{said}"


def explain_refused_url(where: str, stderr: str) -> str:
    refused = json.loads(stderr.strip().splitlines()[-1])["refused"]
    if refused["path"] == ".":
        return f"{where}: the URL {refused['url']} {refused['why']}. Nothing was fetched; fix `url`."
    return (
        f"{where}: the submodule `{refused['path']}` has the URL {refused['url']}, which {refused['why']}. "
        "It was refused before any git process saw it; nothing was fetched from it. The upstream's "
        "`.gitmodules` is not trusted: pin a commit whose submodule URLs are https or ssh, or set "
        "`submodules = false` if the build does not need them."
    )


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *host_tools.rules(), *download.rules()])
