"""An upstream_archive as a rocm_wheel's `source`: a release sdist built like a pinned commit.

A build's tree is a git pack everywhere else (fetch.py, source_tree.py: checked out once per
machine, patched by the same patch step, the files a check needs read out of it). So the
unpacked archive becomes a pack too: one commit of its files (scripts/source_pack.py `pack`),
dated by the archive's newest member and written by a fixed author, so the same archive
gives the same commit on every machine. From there an archive and a commit are one kind of
source; what differs is what the build info and messages name: the archive's URL and
sha256 (`ArchiveSourcePin`), never a commit no upstream published.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from pants.engine.fs import AddPrefix, Digest, DigestContents, DigestSubset, MergeDigests, PathGlobs
from pants.engine.process import FallibleProcessResult, Process
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.errors import RocmBuildError, indent, tail
from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_files
from rocm_build.subsystems.host_tools import HostTools
from rocm_build.target_types_rules import TargetRequest
from rocm_build.upstream.archives import ArchiveRequest, UnpackedArchive
from rocm_build.upstream.fetch import PACK_DIR, FetchedTree
from rocm_build.upstream.source_tree import local_git_env
from rocm_build.subsystems import host_tools
from rocm_build.upstream import archives as upstream_archives

UNPACKED = "archive"  # where the pack step finds the unpacked tree


@dataclass(frozen=True)
class ArchiveSourcePin:
    """What a rocm_wheel reads of its source's pin, for an archive. `commit` is the archive's
    sha256: the one identity of its content (keys, messages, the build info's `sha256`)."""

    url: str
    sha256: str
    track: str = ""
    submodules: bool = False
    derived_from: Optional[str] = None  # an archive's pin is moved by update-pins itself
    version: Optional[str] = None  # the release, where the archive's pins table says (`version_env`)

    @property
    def commit(self) -> str:
        return self.sha256


@dataclass(frozen=True)
class ArchivePackRequest(TargetRequest):
    """An upstream_archive's tree, unpatched, as a source pack (`FetchedTree`)."""


@rule(desc="Packing an upstream_archive's tree", level=LogLevel.DEBUG)
async def pack_archive(request: ArchivePackRequest, tools: HostTools) -> FetchedTree:
    unpacked = await Get(UnpackedArchive, ArchiveRequest(request.address, request.description_of_origin))
    tree = await Get(Digest, AddPrefix(unpacked.tree, UNPACKED))
    script = await Get(Digest, script_files("source_pack.py"))
    result = await Get(
        FallibleProcessResult,
        Process(
            argv=(tools.python.path, f"{SCRIPTS_DIR}/source_pack.py", "pack", UNPACKED, str(unpacked.newest_mtime), PACK_DIR),
            env=local_git_env(tools),
            input_digest=await Get(Digest, MergeDigests([tree, script])),
            output_directories=(PACK_DIR,),
            output_files=("commit_time",),
            description=f"Packing the tree of {request.address.spec} ({unpacked.spec.url})",
            level=LogLevel.DEBUG,
        ),
    )
    if result.exit_code != 0:
        raise RocmBuildError(
            f"{request.address.spec}: packing the unpacked archive failed (exit {result.exit_code}); "
            f"git said:\n{indent(tail(result.stderr.decode(), 8))}"
        )
    pack, time_file = await MultiGet(
        Get(Digest, DigestSubset(result.output_digest, PathGlobs([f"{PACK_DIR}/**"]))),
        Get(DigestContents, DigestSubset(result.output_digest, PathGlobs(["commit_time"]))),
    )
    return FetchedTree(pack, int(time_file[0].content))


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *host_tools.rules(), *upstream_archives.rules()])
