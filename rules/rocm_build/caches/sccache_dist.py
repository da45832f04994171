"""Distributed compiles on an sccache-dist farm (`[sccache] dist_scheduler_url`).

Two things reach a build that uses sccache as its compiler launcher:
- the farm's settings, written by the plugin into a named cache (scripts/dist_relay.py
  `store`) and never into a Process: the scheduler's URL and token are in no key, so a farm of
  any size or address builds the same cache entries as no farm at all;
- the toolchain archive every build server compiles with (scripts/dist_toolchain.py), made
  from the build's own toolchain. It is an input of every sccache build, farm or not, so its
  digest is in the key and a build's key does not depend on whether a farm is configured.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass

from pants.engine.fs import Digest, RemovePrefix
from pants.engine.process import FallibleProcessResult, Process, ProcessResult
from pants.engine.rules import Get, collect_rules, rule
from pants.option.global_options import NamedCachesDirOption
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.errors import RocmBuildError, process_failed
from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_files
from rocm_build.scripts import dist_relay as RELAY  # the same file the build's relay runs
from rocm_build.subsystems.host_tools import REMOTE_CACHE_FIRST_MILLIS, HostTools
from rocm_build.subsystems.sccache import Sccache
from rocm_build.toolchain.rocm_sdk import SANDBOX_ROOT, ResolvedToolchain
from rocm_build.caches.ccache import settings_probe
from rocm_build.subsystems import host_tools

logger = logging.getLogger(__name__)

FARM_CACHE = "rocm_build_sccache_dist"
FARM_DIR = ".sccache-dist-conf"
TOOLCHAIN_DIR = ".sccache-toolchain"
OPTION = "[sccache] dist_scheduler_url (PANTS_SCCACHE_DIST_SCHEDULER_URL)"


def read_token(sccache: Sccache) -> str:
    if not sccache.dist_token_file:
        raise RocmBuildError(f"{OPTION} is set but [sccache] dist_token_file is not: name the file that holds the farm's client token.")
    try:
        with open(os.path.expanduser(sccache.dist_token_file)) as f:
            return f.read().strip()
    except OSError as e:
        raise RocmBuildError(f"[sccache] dist_token_file: cannot read {sccache.dist_token_file}: {e.strerror}.") from None


@dataclass(frozen=True)
class SccacheFarm:
    shown: str  # the scheduler, e.g. http://10.0.0.2:10600; "" when none is configured
    servers: int
    problem: str  # why it cannot be used; "" when it can


@rule(desc="Configuring the sccache-dist farm")
async def configure_sccache_farm(sccache: Sccache, tools: HostTools, named_caches: NamedCachesDirOption) -> SccacheFarm:
    # Written here, not by a process: a process's env and argv are keys and are logged at -ldebug.
    token = read_token(sccache) if sccache.dist_scheduler_url else ""
    try:
        RELAY.store(os.path.join(named_caches.val, FARM_CACHE), sccache.dist_scheduler_url, token)
    except RELAY.BadSettings as e:
        raise RocmBuildError(f"{OPTION}: {e}.") from None
    probe = await settings_probe(tools, ("dist_relay.py", "ccache_remote.py"), FARM_CACHE, FARM_DIR, "Asking the sccache-dist scheduler for its servers")
    result = await Get(ProcessResult, Process, probe)
    status = json.loads(result.stdout)
    farm = SccacheFarm(status["shown"], status["servers"], status["problem"] or "")
    if farm.problem:
        logger.warning(f"sccache-dist scheduler {farm.shown} ({OPTION}) cannot be used: {farm.problem}. Builds compile locally.")
    elif farm.shown:
        logger.info(f"sccache-dist: {farm.shown} has {farm.servers} build server(s)")
    return farm


@dataclass(frozen=True)
class DistToolchainRequest:
    toolchain: ResolvedToolchain


@dataclass(frozen=True)
class DistToolchain:
    digest: Digest  # toolchain.tar.gz and toolchain.json, at the root


@rule(desc="Packing the toolchain for sccache-dist's build servers")
async def pack_dist_toolchain(request: DistToolchainRequest, tools: HostTools) -> DistToolchain:
    toolchain = request.toolchain
    compiler = toolchain.clang[len(SANDBOX_ROOT) + 1 :]
    result = await Get(
        FallibleProcessResult,
        Process(
            argv=(tools.python.path, f"{SCRIPTS_DIR}/dist_toolchain.py", "pack", SANDBOX_ROOT, compiler, TOOLCHAIN_DIR),
            env={"PATH": "/usr/bin:/bin"},
            input_digest=await Get(Digest, script_files("dist_toolchain.py")),
            # Named by the toolchain's identity (its compiler's --version among it).
            append_only_caches={toolchain.cache_name: ".rocm"},
            output_directories=(TOOLCHAIN_DIR,),
            remote_cache_speculation_delay_millis=REMOTE_CACHE_FIRST_MILLIS,
            description=f"Packing rocm_toolchain {toolchain.address.spec} for sccache-dist",
            level=LogLevel.INFO,
        ),
    )
    if result.exit_code != 0:
        what = f"{toolchain.address.spec}: packing its compiler for sccache-dist's build servers failed"
        raise process_failed(what, result.exit_code, result.stderr)
    return DistToolchain(await Get(Digest, RemovePrefix(result.output_digest, TOOLCHAIN_DIR)))


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *host_tools.rules()])
