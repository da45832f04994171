"""A scan of an upstream's patched tree (scripts/tree_scan.py, a process keyed by the tree
alone): the configure-time downloads it names, its Cargo.lock files and the torch/triton
versions it names. The preflight's upstream steps (checks/upstream_steps.py) judge what it
found; a Rust build (rust/cargo.py) takes its Cargo.lock files from it."""

from __future__ import annotations

from dataclasses import dataclass

from pants.engine.fs import CreateDigest, Digest, FileContent, MergeDigests
from pants.engine.process import FallibleProcessResult, Process
from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.errors import process_failed
from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_files
from rocm_build.subsystems import host_tools
from rocm_build.subsystems.host_tools import REMOTE_CACHE_FIRST_MILLIS, HostTools
from rocm_build.upstream.fetch import PACK_DIR, TREE_DIR
from rocm_build.upstream.source_tree import PACK_ROOT, SourceTree

TOUCHED = ".touched"


@dataclass(frozen=True)
class TreeScanRequest:
    source: SourceTree
    owner: str  # for messages only


@dataclass(frozen=True)
class TreeScan:
    result: str  # tree_scan.py's JSON


@rule(desc="Scanning an upstream tree for downloads and versions")
async def scan_tree(request: TreeScanRequest, tools: HostTools) -> TreeScan:
    source = request.source
    touched = await Get(Digest, CreateDigest([FileContent(TOUCHED, "".join(f"{p}\n" for p in source.touched).encode())]))
    result = await Get(
        FallibleProcessResult,
        Process(
            argv=(tools.python.path, f"{SCRIPTS_DIR}/tree_scan.py", f"{PACK_ROOT}/{PACK_DIR}", TREE_DIR, TOUCHED),
            env={"PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
                 "ROCM_BUILD_GIT": tools.git.fingerprint},  # fmt: skip
            input_digest=await Get(
                Digest, MergeDigests([await Get(Digest, script_files("tree_scan.py", "source_pack.py")), source.changes, touched])
            ),
            immutable_input_digests={PACK_ROOT: source.pack},
            remote_cache_speculation_delay_millis=REMOTE_CACHE_FIRST_MILLIS,
            description=f"Scanning the tree of {request.owner} for downloads and versions",
            level=LogLevel.DEBUG,
        ),
    )
    if result.exit_code != 0:
        raise process_failed(f"{request.owner}: scanning the fetched source failed", result.exit_code, result.stderr)
    return TreeScan(result.stdout.decode())


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *host_tools.rules()])
