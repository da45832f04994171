"""A patched upstream tree as the rules hold it: the fetched pack and the files our patches wrote.

A PyTorch-sized tree is 100k files. Each time Pants captured it into its store or wrote it into
a sandbox it cost ~20 s on our machines, where git checks the same tree out of a pack in 2 s;
so the tree stays a pack (fetch.py), and a process that needs files checks out only those:
the patch step the files the patches touch, the preflight the files a recipe names, a build the
whole tree once per machine (build_wheel.sh). The whole tree as a digest (`MergedTree`) is made
only where nothing else will do: `package` of an upstream_repo, a build when a patch
deletes files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Dict, Iterable, Optional, Tuple

from pants.engine.fs import Digest, DigestContents, MergeDigests
from pants.engine.process import FallibleProcessResult, Process
from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.errors import RocmBuildError, indent, tail
from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_files
from rocm_build.upstream.fetch import PACK_DIR, TREE_DIR
from rocm_build.subsystems.host_tools import REMOTE_CACHE_FIRST_MILLIS, HostTools
from rocm_build.subsystems import host_tools

PACK_ROOT = ".source-pack"  # where a checkout's sandbox has the pack (linked, immutable)


@dataclass(frozen=True)
class SourceTree:
    pack: Digest  # under PACK_DIR/: the fetched commits (fetch.py)
    changes: Digest  # under TREE_DIR/: the files the patches wrote
    touched: Tuple[str, ...] = ()  # every path the patches touched: written, deleted or renamed away
    # A patch deleted or renamed a file: the pack's tree cannot be a lower layer under the
    # changes (a lower layer cannot lose a file), builds get the merged tree.
    removes_files: bool = False


def local_git_env(tools: HostTools) -> Dict[str, str]:
    """The environment of a git process on local objects only (a checkout, an archive's pack):
    none of the host's git configuration, and the git's version in the key."""
    return {"PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_ATTR_NOSYSTEM": "1", "ROCM_BUILD_GIT": tools.git.fingerprint}  # fmt: skip


@dataclass(frozen=True)
class CheckoutRequest:
    """The tree of a pack: all of it, or `only` the entries at `paths`, or all `except` them, or
    (`read`) each path's content, symbolic links followed (source_pack.py)."""

    pack: Digest
    owner: str  # for messages only
    mode: str = "all"
    paths: Tuple[str, ...] = ()


@dataclass(frozen=True)
class CheckedOut:
    digest: Digest  # under TREE_DIR/
    named: Tuple[Tuple[str, str], ...] = ()  # `read`: (path, the file it named) of each path found


@rule
async def check_out(request: CheckoutRequest, tools: HostTools) -> CheckedOut:
    assert request.mode in ("all", "only", "except", "read"), request.mode
    selection = () if request.mode == "all" else (f"--{request.mode}", *request.paths)
    few = request.mode in ("only", "read")
    what = f"{len(request.paths)} path(s) of" if few else "the tree of"
    result = await Get(
        FallibleProcessResult,
        Process(
            argv=(tools.python.path, f"{SCRIPTS_DIR}/source_pack.py", "checkout", f"{PACK_ROOT}/{PACK_DIR}", TREE_DIR,
                  *selection),
            env=local_git_env(tools),
            input_digest=await Get(Digest, script_files("source_pack.py")),
            # The pack is linked into the sandbox, not copied: at PyTorch scale it is ~100s of MB.
            immutable_input_digests={PACK_ROOT: request.pack},
            output_directories=(TREE_DIR,),
            # Its input is the whole pack: ask the cache before materializing it for a local run.
            remote_cache_speculation_delay_millis=REMOTE_CACHE_FIRST_MILLIS,
            description=f"Checking out {what} the fetched source of {request.owner}",
            # The whole tree is a long step worth seeing; a few files are not.
            level=LogLevel.DEBUG if few else LogLevel.INFO,
        ),
    )
    if result.exit_code != 0:
        raise RocmBuildError(
            f"{request.owner}: checking out the fetched source failed (exit {result.exit_code}); "
            f"git said:\n{indent(tail(result.stderr.decode(), 8))}"
        )
    named = tuple(sorted(json.loads(result.stdout).items())) if request.mode == "read" else ()
    return CheckedOut(result.output_digest, named)


@dataclass(frozen=True)
class MergedTree:
    digest: Digest  # the patched tree, under TREE_DIR/


@dataclass(frozen=True)
class MergedTreeRequest:
    source: SourceTree
    owner: str


@rule
async def merged_tree(request: MergedTreeRequest) -> MergedTree:
    source = request.source
    base = await Get(CheckedOut, CheckoutRequest(source.pack, request.owner, "except", source.touched))
    return MergedTree(await Get(Digest, MergeDigests([base.digest, source.changes])))


async def source_files(source: Optional[SourceTree], paths: Iterable[str], owner: str) -> Dict[str, Optional[bytes]]:
    """The content of each of `paths` in the patched tree (None when missing), symbolic links
    followed as a reader of the tree would; reads only those files."""
    paths = tuple(dict.fromkeys(paths))
    if source is None or not paths:
        return {p: None for p in paths}
    patched: Dict[str, bytes] = {}
    if source.touched:
        changed = await Get(DigestContents, Digest, source.changes)
        patched.update((fc.path[len(TREE_DIR) + 1 :], fc.content) for fc in changed)
    found: Dict[str, Optional[bytes]] = {p: patched.get(p) for p in paths if p in source.touched}
    unread = tuple(p for p in paths if p not in found)
    if unread:
        read = await Get(CheckedOut, CheckoutRequest(source.pack, owner, "read", unread))
        fetched = {fc.path[len(TREE_DIR) + 1 :]: fc.content for fc in await Get(DigestContents, Digest, read.digest)}
        for path, named in read.named:
            # A link to a file our patches changed reads the changed file.
            found[path] = patched.get(named) if named in source.touched else fetched.get(path)
    return {p: found.get(p) for p in paths}


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *host_tools.rules()])
