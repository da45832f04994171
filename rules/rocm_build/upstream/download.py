"""A download process: one of our fetch scripts (scripts/source_pack.py, fetch_archive.py,
simple_index.py) run on the host, the only processes that reach the network.

Every download is keyed by what it pins (a commit, a sha256) and the script, never by the
machine: the mirror table is in a named cache (upstream/mirror_table.py), the CA bundle's path in
an environment variable that is the same wherever it is unset. A hit in the remote cache is
taken before a download is started (REMOTE_CACHE_FIRST_MILLIS).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from pants.engine.fs import Digest
from pants.engine.process import Process
from pants.engine.rules import Get, collect_rules, rule
from pants.option.global_options import GlobalOptions
from pants.util.frozendict import FrozenDict
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_files
from rocm_build.subsystems import host_tools
from rocm_build.subsystems.host_tools import REMOTE_CACHE_FIRST_MILLIS, HostTools
from rocm_build.upstream import mirror_table as upstream_mirrors
from rocm_build.upstream.mirror_table import Mirrors

DOWNLOAD_TIMEOUT_SECONDS = 3600


@dataclass(frozen=True)
class DownloadProcess:
    script: str  # run by the host's Python, beside scripts/mirrors.py
    args: Tuple[str, ...]
    description: str
    imports: Tuple[str, ...] = ()  # other scripts it imports
    # Set for the scripts that download with Python (urllib): `[GLOBAL] ca_certs_path`, as
    # ROCM_BUILD_CA_CERTS. git, which fetches the source packs, is not told.
    ca_certs: bool = True
    env: FrozenDict[str, str] = FrozenDict()
    output_directories: Tuple[str, ...] = ()
    output_files: Tuple[str, ...] = ()


@rule
async def setup_download_process(request: DownloadProcess, tools: HostTools, global_options: GlobalOptions) -> Process:
    mirrors = await Get(Mirrors)
    ca_certs = {"ROCM_BUILD_CA_CERTS": global_options.ca_certs_path or ""} if request.ca_certs else {}
    return Process(
        argv=(tools.python.path, f"{SCRIPTS_DIR}/{request.script}", *request.args),
        env={"PATH": "/usr/bin:/bin", **ca_certs, **request.env},
        input_digest=await Get(Digest, script_files(request.script, *request.imports, "mirrors.py")),
        # The mirror table: read from a named cache, in no key (rocm_build/upstream/mirror_table.py).
        append_only_caches=mirrors.caches,
        output_directories=request.output_directories,
        output_files=request.output_files,
        remote_cache_speculation_delay_millis=REMOTE_CACHE_FIRST_MILLIS,
        description=request.description,
        level=LogLevel.INFO,
        timeout_seconds=DOWNLOAD_TIMEOUT_SECONDS,
    )


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *host_tools.rules(), *upstream_mirrors.rules()])
