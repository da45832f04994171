"""Applying a component's patch sets to its fetched source, as cached Pants processes.

The patch process gets only the files the patches touch, checked out of the fetched pack, not
the tree: at PyTorch scale (100k files) writing the whole tree into a sandbox and capturing it
again cost 10-20 s here, against well under a second for the touched files. What it writes is
the patched tree's `changes` over the fetched one (source_tree.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable, Tuple

from pants.engine.fs import EMPTY_DIGEST, Digest, DigestEntries, Directory, MergeDigests
from pants.engine.process import FallibleProcessResult, Process
from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel

from rocm_build.errors import RocmBuildError
from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_digest
from rocm_build.upstream.source_tree import CheckedOut, CheckoutRequest, SourceTree
from rocm_build.upstream.fetch import TREE_DIR
from rocm_build.subsystems.host_tools import HostTools

SCRIPT_PATH = f"{SCRIPTS_DIR}/apply_patches.py"


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


def with_parents(paths: Iterable[str]) -> Tuple[str, ...]:
    """The paths and their parent directories: a symbolic link on the way is checked out with
    them, so the patch script sees it (it refuses a patch that writes through one)."""
    return tuple(sorted({"/".join(p.split("/")[:i]) for p in paths for i in range(1, p.count("/") + 2)}))


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


@rule
async def apply_patches(request: PatchRequest, tools: HostTools) -> PatchedTree:
    if not request.patch_files:
        return PatchedTree(SourceTree(request.pack, EMPTY_DIGEST), "")
    script = await script_digest("apply_patches.py")
    listed = await _run_script(
        request, tools, ("--touched", *request.patch_files),
        await Get(Digest, MergeDigests([request.patches, script])),
        f"Listing the files {len(request.patch_files)} patch file(s) touch for {request.owner}",
        level=LogLevel.DEBUG,
    )
    touched = tuple(sorted(json.loads(listed.stdout)))
    files = await Get(CheckedOut, CheckoutRequest(request.pack, request.owner, "only", with_parents(touched)))
    applied = await _run_script(
        request, tools, (TREE_DIR, *request.patch_files),
        await Get(Digest, MergeDigests([files.digest, request.patches, script])),
        f"Applying {len(request.patch_files)} patch file(s) for {request.owner}",
        output_directories=(TREE_DIR,),
        level=LogLevel.INFO,
    )
    entries = await Get(DigestEntries, Digest, applied.output_digest)
    written = {e.path for e in entries if not isinstance(e, Directory)}
    removes = any(f"{TREE_DIR}/{p}" not in written for p in touched)
    return PatchedTree(SourceTree(request.pack, applied.output_digest, touched, removes), applied.stdout.decode())


def rules():
    return collect_rules()
