"""Applying a component's patch sets to its fetched tree, as a cached Pants process."""

from __future__ import annotations

import pkgutil
from dataclasses import dataclass
from typing import Tuple

from pants.engine.fs import CreateDigest, Digest, FileContent, MergeDigests
from pants.engine.process import FallibleProcessResult, Process
from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel

from rocm_build.errors import RocmBuildError
from rocm_build.sources import TREE_DIR
from rocm_build.tools import REMOTE_CACHE_FIRST_MILLIS, HostTools

SCRIPT_PATH = "__rocm_build/apply_patches.py"


@dataclass(frozen=True)
class PatchRequest:
    tree: Digest  # under TREE_DIR/
    patch_files: Tuple[str, ...]  # build-root-relative, in the order they apply
    patches: Digest
    owner: str


@dataclass(frozen=True)
class PatchedTree:
    digest: Digest  # under TREE_DIR/
    log: str


@rule
async def apply_patches(request: PatchRequest, tools: HostTools) -> PatchedTree:
    if not request.patch_files:
        return PatchedTree(request.tree, "")
    script = await Get(
        Digest,
        CreateDigest([FileContent(SCRIPT_PATH, pkgutil.get_data(__name__, "scripts/apply_patches.py"))]),
    )
    input_digest = await Get(Digest, MergeDigests([request.tree, request.patches, script]))
    result = await Get(
        FallibleProcessResult,
        Process(
            argv=(tools.python.path, SCRIPT_PATH, TREE_DIR, *request.patch_files),
            env={"PATH": "/usr/bin:/bin", "ROCM_BUILD_GIT": tools.git.fingerprint},
            input_digest=input_digest,
            output_directories=(TREE_DIR,),
            remote_cache_speculation_delay_millis=REMOTE_CACHE_FIRST_MILLIS,
            description=f"Applying {len(request.patch_files)} patch file(s) for {request.owner}",
            level=LogLevel.INFO,
        ),
    )
    if result.exit_code != 0:
        raise RocmBuildError(
            f"{request.owner}: {result.stderr.decode().strip() or 'applying patches failed'}"
        )
    return PatchedTree(result.output_digest, result.stdout.decode())


def rules():
    return collect_rules()
