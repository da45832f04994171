"""Applying a component's patch sets to its fetched tree, as cached Pants processes.

The patch process gets only the files the patches touch, not the tree: at PyTorch scale (100k
files) writing the whole tree into a sandbox and capturing it again cost 10-20 s here, against
well under a second for the touched files. The patched files are then merged back over the
fetched tree's digest, which Pants does in its store without touching the disk.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Iterable, Optional, Tuple

from pants.engine.fs import EMPTY_DIGEST, Digest, DigestEntries, DigestSubset, Directory, MergeDigests, PathGlobs, RemovePrefix
from pants.engine.process import FallibleProcessResult, Process
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.util.logging import LogLevel

from rocm_build.errors import RocmBuildError
from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_digest
from rocm_build.sources import TREE_DIR
from rocm_build.tools import HostTools

SCRIPT_PATH = f"{SCRIPTS_DIR}/apply_patches.py"
# A path holding these would be read as glob or gitignore syntax by PathGlobs; such a patch
# set gets the whole tree, as before, rather than a subset that might miss a file.
GLOB_SYNTAX = re.compile(r"[*?\[\]{}!\\#]|\s$")


@dataclass(frozen=True)
class PatchRequest:
    tree: Digest  # under TREE_DIR/
    patch_files: Tuple[str, ...]  # build-root-relative, in the order they apply
    patches: Digest
    owner: str


@dataclass(frozen=True)
class TreeLayers:
    """The patched tree as the fetched tree with the patched files over it, for builds that
    stack the two (build_wheel.sh) instead of having 100k files written into their sandbox.
    Only where the patches delete or rename nothing: a lower layer cannot lose a file."""

    base: Digest  # the fetched tree's contents, without the TREE_DIR/ prefix
    changes: Digest  # the files the patches wrote, likewise


@dataclass(frozen=True)
class PatchedTree:
    digest: Digest  # under TREE_DIR/
    log: str
    layers: Optional[TreeLayers] = None


@dataclass(frozen=True)
class TreeSplit:
    touched: PathGlobs  # the touched paths and their parent directories (symlinks among them)
    untouched: PathGlobs  # everything else


def split_tree(paths: Iterable[str]) -> Optional[TreeSplit]:
    """Globs for the files patches touch and the rest of the tree; None when a path cannot be
    written as a glob. Parents come along so that a symbolic link on the way is still seen (the
    script refuses a patch that writes through one); a real directory comes as an empty one."""
    paths = sorted(paths)
    if any(GLOB_SYNTAX.search(p) for p in paths):
        return None
    with_parents = {"/".join(p.split("/")[:i]) for p in paths for i in range(1, p.count("/") + 2)}
    return TreeSplit(
        touched=PathGlobs([f"{TREE_DIR}/{p}" for p in sorted(with_parents)]),
        untouched=PathGlobs([f"{TREE_DIR}/**", *(f"!{TREE_DIR}/{p}" for p in paths)]),
    )


async def _run_script(request: PatchRequest, tools: HostTools, argv: Tuple[str, ...], input_digest: Digest,
                     description: str, **process: object) -> FallibleProcessResult:
    result = await Get(
        FallibleProcessResult,
        Process(
            argv=(tools.python.path, SCRIPT_PATH, *argv),
            env={"PATH": "/usr/bin:/bin", "ROCM_BUILD_GIT": tools.git.fingerprint},
            input_digest=input_digest,
            description=description,
            **process,  # type: ignore[arg-type]
        ),
    )
    if result.exit_code != 0:
        raise RocmBuildError(
            f"{request.owner}: {result.stderr.decode().strip() or 'applying patches failed'}"
        )
    return result


async def _layers_of(tree: Digest, written: Digest, touched: Iterable[str]) -> Optional[TreeLayers]:
    entries = await Get(DigestEntries, Digest, written)
    kept = {e.path for e in entries if not isinstance(e, Directory)}
    if any(f"{TREE_DIR}/{p}" not in kept for p in touched):
        return None  # a file deleted or renamed away
    base, changes = await MultiGet(Get(Digest, RemovePrefix(tree, TREE_DIR)), Get(Digest, RemovePrefix(written, TREE_DIR)))
    return TreeLayers(base, changes)


@rule
async def apply_patches(request: PatchRequest, tools: HostTools) -> PatchedTree:
    if not request.patch_files:
        base = await Get(Digest, RemovePrefix(request.tree, TREE_DIR))
        return PatchedTree(request.tree, "", TreeLayers(base, EMPTY_DIGEST))
    script = await script_digest("apply_patches.py")
    listed = await _run_script(
        request, tools, ("--touched", *request.patch_files),
        await Get(Digest, MergeDigests([request.patches, script])),
        f"Listing the files {len(request.patch_files)} patch file(s) touch for {request.owner}",
        level=LogLevel.DEBUG,
    )
    paths = json.loads(listed.stdout)
    split = split_tree(paths)
    touched, untouched = request.tree, None
    if split:
        touched = await Get(Digest, DigestSubset(request.tree, split.touched))
        untouched = await Get(Digest, DigestSubset(request.tree, split.untouched))
    applied = await _run_script(
        request, tools, (TREE_DIR, *request.patch_files),
        await Get(Digest, MergeDigests([touched, request.patches, script])),
        f"Applying {len(request.patch_files)} patch file(s) for {request.owner}",
        output_directories=(TREE_DIR,),
        level=LogLevel.INFO,
    )
    if untouched is None:
        return PatchedTree(applied.output_digest, applied.stdout.decode())
    patched = await Get(Digest, MergeDigests([untouched, applied.output_digest]))
    return PatchedTree(patched, applied.stdout.decode(), await _layers_of(request.tree, applied.output_digest, paths))


def rules():
    return collect_rules()
