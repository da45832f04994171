"""Applying a component's patch sets to its fetched tree, as a cached Pants process."""

from __future__ import annotations

import pkgutil
from dataclasses import dataclass
from typing import Tuple

from pants.engine.fs import CreateDigest, Digest, DigestSubset, FileContent, MergeDigests, PathGlobs
from pants.engine.process import FallibleProcessResult, Process
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.util.logging import LogLevel

from rocm_build.errors import RocmBuildError
from rocm_build.sources import TAR_PACK, TREE_DIR, TREE_TARBALL
from rocm_build.tools import REMOTE_CACHE_FIRST_MILLIS, HostTools

SCRIPT_PATH = "__rocm_build/apply_patches.py"
# Unpack the fetched tree, apply (the Python script; its exit code and messages pass
# through), pack the result.
PATCH_SCRIPT = f"""
set -uo pipefail
umask 022
mkdir {TREE_DIR} && tar -xf {TREE_TARBALL} -C {TREE_DIR} && rm {TREE_TARBALL} || exit 1
"$@" || exit $?
{TAR_PACK} || exit 1
"""


@dataclass(frozen=True)
class PatchRequest:
    tree: Digest  # under TREE_DIR/
    tarball: Digest  # the same tree, TREE_TARBALL at the root: the process's input
    patch_files: Tuple[str, ...]  # build-root-relative, in the order they apply
    patches: Digest
    owner: str


@dataclass(frozen=True)
class PatchedTree:
    digest: Digest  # under TREE_DIR/
    tarball: Digest  # the same tree, TREE_TARBALL at the root
    log: str


@rule
async def apply_patches(request: PatchRequest, tools: HostTools) -> PatchedTree:
    if not request.patch_files:
        return PatchedTree(request.tree, request.tarball, "")
    script = await Get(
        Digest,
        CreateDigest([FileContent(SCRIPT_PATH, pkgutil.get_data(__name__, "scripts/apply_patches.py"))]),
    )
    input_digest = await Get(Digest, MergeDigests([request.tarball, request.patches, script]))
    result = await Get(
        FallibleProcessResult,
        Process(
            argv=(tools.bash.path, "-c", PATCH_SCRIPT, "patch", tools.python.path, SCRIPT_PATH, TREE_DIR,
                  *request.patch_files),  # fmt: skip
            env={"PATH": "/usr/bin:/bin", "ROCM_BUILD_GIT": tools.git.fingerprint, "ROCM_BUILD_TAR": tools.tar.fingerprint},
            input_digest=input_digest,
            output_directories=(TREE_DIR,),
            output_files=(TREE_TARBALL,),
            remote_cache_speculation_delay_millis=REMOTE_CACHE_FIRST_MILLIS,
            description=f"Applying {len(request.patch_files)} patch file(s) for {request.owner}",
            level=LogLevel.INFO,
        ),
    )
    if result.exit_code != 0:
        raise RocmBuildError(
            f"{request.owner}: {result.stderr.decode().strip() or 'applying patches failed'}"
        )
    tree, tarball = await MultiGet(
        Get(Digest, DigestSubset(result.output_digest, PathGlobs([f"{TREE_DIR}/**"]))),
        Get(Digest, DigestSubset(result.output_digest, PathGlobs([TREE_TARBALL]))),
    )
    return PatchedTree(tree, tarball, result.stdout.decode())


def rules():
    return collect_rules()
