"""Applying a component's patch sets to its fetched source, as cached Pants processes.

The patch process gets only the files the patches touch, checked out of the fetched pack, not
the tree: at PyTorch scale (100k files) writing the whole tree into a sandbox and capturing it
again cost 10-20 s here, against well under a second for the touched files. What it writes is
the patched tree's `changes` over the fetched one (source_tree.py).

An upstream_archive's unpacked tree is no pack: the same script patches the same touched files,
taken from the tree's entries, and its output replaces them there (`TreePatchRequest`). The
script needs no repository: `git apply` patches plain files outside one.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Iterable, Tuple

from pants.engine.addresses import Address, Addresses, UnparsedAddressInputs
from pants.engine.fs import (
    EMPTY_DIGEST,
    AddPrefix,
    CreateDigest,
    Digest,
    DigestContents,
    DigestEntries,
    Directory,
    MergeDigests,
    RemovePrefix,
)
from pants.engine.process import FallibleProcessResult, Process
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import HydratedSources, HydrateSourcesRequest, Targets
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.errors import RocmBuildError
from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_files
from rocm_build.scripts import apply_patches as APPLY_PATCHES
from rocm_build.upstream.source_tree import CheckedOut, CheckoutRequest, SourceTree
from rocm_build.upstream.fetch import TREE_DIR
from rocm_build.subsystems.host_tools import HostTools
from rocm_build.upstream.target_types import PatchSetTarget, PatchSourcesField
from rocm_build.subsystems import host_tools
from rocm_build.upstream import source_tree

SCRIPT_PATH = f"{SCRIPTS_DIR}/apply_patches.py"
DOES_NOT_APPLY = APPLY_PATCHES.EXIT_DOES_NOT_APPLY
GIT_SAID = APPLY_PATCHES.GIT_SAID


@dataclass(frozen=True)
class PatchFile:
    path: str
    sha256: str


@dataclass(frozen=True)
class PatchSetsRequest:
    """The `patches` field of an upstream_repo or upstream_archive: its patch sets' files, in order."""

    addresses: Tuple[str, ...]  # as the field lists them
    owner: Address


@dataclass(frozen=True)
class OrderedPatches:
    files: Tuple[PatchFile, ...]  # in the order they apply
    digest: Digest


@rule
async def order_patches(request: PatchSetsRequest) -> OrderedPatches:
    owner = request.owner.spec
    addresses = await Get(
        Addresses,
        UnparsedAddressInputs(request.addresses, owning_address=request.owner,
                              description_of_origin=f"the `patches` field of {owner}"),
    )
    patch_sets = await Get(Targets, Addresses, addresses)
    for patch_set in patch_sets:
        if not isinstance(patch_set, PatchSetTarget):
            raise RocmBuildError(
                f"{owner}: `patches` lists {patch_set.address.spec}, a `{patch_set.alias}`; "
                "only `patch_set` targets can be listed there"
            )
    hydrated = await MultiGet(Get(HydratedSources, HydrateSourcesRequest(t[PatchSourcesField])) for t in patch_sets)
    # Patch sets apply in the order listed; the files of one set in file-name order.
    ordered = tuple(
        path for sources in hydrated for path in sorted(sources.snapshot.files, key=lambda p: p.rsplit("/", 1)[-1])
    )
    digest = await Get(Digest, MergeDigests(s.snapshot.digest for s in hydrated))
    contents = {fc.path: fc.content for fc in await Get(DigestContents, Digest, digest)}
    return OrderedPatches(tuple(PatchFile(p, hashlib.sha256(contents[p]).hexdigest()) for p in ordered), digest)


@dataclass(frozen=True)
class PatchRequest:
    pack: Digest  # the fetched source (fetch.py)
    patch_files: Tuple[str, ...]  # build-root-relative, in the order they apply
    patches: Digest
    owner: str


@dataclass(frozen=True)
class PatchedTree:
    source: SourceTree
    log: str


@dataclass(frozen=True)
class TreePatchRequest:
    """The same patches on a tree that is no git pack: an upstream_archive's, at the digest root."""

    tree: Digest
    patch_files: Tuple[str, ...]
    patches: Digest
    owner: str


@dataclass(frozen=True)
class PatchedDigest:
    tree: Digest  # the whole patched tree, at the digest root
    log: str


def with_parents(paths: Iterable[str]) -> Tuple[str, ...]:
    """The paths and their parent directories: a symbolic link on the way is checked out with
    them, so the patch script sees it (it refuses a patch that writes through one)."""
    return tuple(sorted({"/".join(p.split("/")[:i]) for p in paths for i in range(1, p.count("/") + 2)}))


async def _run_script(owner: str, tools: HostTools, argv: Tuple[str, ...], input_digest: Digest,
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
    if result.exit_code == DOES_NOT_APPLY:
        raise RocmBuildError(does_not_apply(owner, result.stderr.decode()))
    if result.exit_code != 0:
        raise RocmBuildError(f"{owner}: {result.stderr.decode().strip() or 'applying patches failed'}")
    return result


def does_not_apply(owner: str, stderr: str) -> str:
    """The error of a patch that does not apply, said once (Pants prints the error; a log line
    of it too said it twice): what failed, the fix, then git's own words."""
    explanation, said, git_said = stderr.strip().partition(GIT_SAID.strip())
    message = f"{owner}: {explanation.strip()}\n{workspace_fix(owner)}"
    return f"{message}\n{said}{git_said}" if said else message


def workspace_fix(owner: str) -> str:
    """How to fix a patch that does not apply: in a workspace with the patches before it."""
    return (
        f"Fix it in a patch workspace: `./pants patch-workspace {owner}` checks out the pinned tree with the "
        f"patches before it as git commits; redo the patch there, commit it with its header, then "
        f"`./pants patch-workspace --save {owner}` (and remove the old file)."
    )


async def _touched(request: PatchRequest | TreePatchRequest, tools: HostTools) -> Tuple[str, ...]:
    """Every path the patches read or write (each patch's paths checked first)."""
    listed = await _run_script(
        request.owner, tools, ("--touched", *request.patch_files),
        await Get(Digest, MergeDigests([request.patches, await Get(Digest, script_files("apply_patches.py"))])),
        f"Listing the files {len(request.patch_files)} patch file(s) touch for {request.owner}",
        level=LogLevel.DEBUG,
    )
    return tuple(sorted(json.loads(listed.stdout)))


async def _applied(request: PatchRequest | TreePatchRequest, tools: HostTools, files: Digest) -> FallibleProcessResult:
    """The patches applied to `files` (the touched files, under TREE_DIR/): the files they wrote."""
    return await _run_script(
        request.owner, tools, (TREE_DIR, *request.patch_files),
        await Get(Digest, MergeDigests([files, request.patches, await Get(Digest, script_files("apply_patches.py"))])),
        f"Applying {len(request.patch_files)} patch file(s) for {request.owner}",
        output_directories=(TREE_DIR,),
        level=LogLevel.INFO,
    )


@rule
async def apply_patches(request: PatchRequest, tools: HostTools) -> PatchedTree:
    if not request.patch_files:
        return PatchedTree(SourceTree(request.pack, EMPTY_DIGEST), "")
    touched = await _touched(request, tools)
    files = await Get(CheckedOut, CheckoutRequest(request.pack, request.owner, "only", with_parents(touched)))
    applied = await _applied(request, tools, files.digest)
    entries = await Get(DigestEntries, Digest, applied.output_digest)
    written = {e.path for e in entries if not isinstance(e, Directory)}
    removes = any(f"{TREE_DIR}/{p}" not in written for p in touched)
    return PatchedTree(SourceTree(request.pack, applied.output_digest, touched, removes), applied.stdout.decode())


@rule
async def apply_patches_to_tree(request: TreePatchRequest, tools: HostTools) -> PatchedDigest:
    """As `apply_patches`, the touched files taken from the tree's entries instead of a pack:
    the patch process gets only those, and its output replaces them in the tree."""
    if not request.patch_files:
        return PatchedDigest(request.tree, "")
    touched = await _touched(request, tools)
    entries = await Get(DigestEntries, Digest, request.tree)
    near = set(with_parents(touched))
    files = await Get(Digest, CreateDigest([e for e in entries if e.path in near]))
    applied = await _applied(request, tools, await Get(Digest, AddPrefix(files, TREE_DIR)))
    written = await Get(Digest, RemovePrefix(applied.output_digest, TREE_DIR))
    rest = await Get(Digest, CreateDigest([e for e in entries if e.path not in touched]))
    return PatchedDigest(await Get(Digest, MergeDigests([rest, written])), applied.stdout.decode())


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *host_tools.rules(), *source_tree.rules()])
