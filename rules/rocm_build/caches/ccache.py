"""ccache's remote storage (`[compiler-cache] ccache_remote_storage`), kept out of every key.

The plugin writes the configured address into a named cache that every build process has
(named caches are not part of a process's key), or removes it when unset; each session
checks that the server answers; the build's script starts a forwarder from it
(scripts/ccache_remote.py). So the address and its credentials are never in a Process's env
or argv (which are keys, and which Pants logs at -ldebug), and changing them rebuilds nothing.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Tuple

from pants.engine.fs import Digest
from pants.engine.process import FallibleProcessResult, Process, ProcessCacheScope
from pants.option.global_options import NamedCachesDirOption
from pants.engine.rules import Get, collect_rules, rule
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet
from pants.util.logging import LogLevel

from rocm_build.errors import RocmBuildError
from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_files
from rocm_build.scripts import ccache_remote as SCRIPT  # the same file the build's forwarder runs
from rocm_build.subsystems.compiler_cache import REMOTE_STORAGE_OPTION, CompilerCacheSubsystem
from rocm_build.subsystems.rocm_build import RocmBuildSubsystem
from rocm_build.subsystems.host_tools import HostTools
from rocm_build.subsystems import host_tools

logger = logging.getLogger(__name__)

CCACHE_REMOTE_CACHE = "rocm_build_ccache_remote"
CCACHE_REMOTE_DIR = ".ccache-remote"
OPTION = REMOTE_STORAGE_OPTION


@dataclass(frozen=True)
class CcacheRemote:
    shown: str  # the server without credentials; "" when none is configured
    problem: str  # why it does not answer; "" when it does


async def settings_probe(tools: HostTools, scripts: Tuple[str, ...], cache: str, cache_dir: str, description: str) -> Process:
    """`SCRIPT probe CACHE_DIR`: asks the server whose settings the plugin wrote into the named
    cache whether it answers, every session (this one, and sccache_dist.py's farm)."""
    return Process(
        argv=(tools.python.path, f"{SCRIPTS_DIR}/{scripts[0]}", "probe", cache_dir),
        env={"PATH": "/usr/bin:/bin"},
        input_digest=await Get(Digest, script_files(*scripts)),
        append_only_caches={cache: cache_dir},
        description=description,
        cache_scope=ProcessCacheScope.PER_SESSION,
        # Every run: its line only under -ldebug (a server that does not answer is a warning).
        level=LogLevel.DEBUG,
    )


@rule(desc="Configuring ccache's remote storage")
async def configure_ccache_remote(
    compilers: CompilerCacheSubsystem, settings: RocmBuildSubsystem, tools: HostTools, named_caches: NamedCachesDirOption
) -> CcacheRemote:
    # Written here, not by a process: a process's env and argv are in its key and in Pants'
    # -ldebug log ("spawned local process ... env: {...}"), and the address may hold a password.
    try:
        SCRIPT.store(os.path.join(named_caches.val, CCACHE_REMOTE_CACHE), compilers.remote_storage(settings))
    except SCRIPT.BadAddress as e:
        raise RocmBuildError(f"{OPTION}: {e}; expected {SCRIPT.ACCEPTED}") from None
    probe = await settings_probe(tools, ("ccache_remote.py",), CCACHE_REMOTE_CACHE, CCACHE_REMOTE_DIR, "Checking ccache's remote storage")
    result = await Get(FallibleProcessResult, Process, probe)
    if result.exit_code != 0:
        raise RocmBuildError(f"{OPTION}: {result.stderr.decode().strip()}")
    status = json.loads(result.stdout)
    remote = CcacheRemote(status["shown"], status["problem"] or "")
    if remote.problem:
        logger.warning(
            f"ccache remote storage {remote.shown} ({OPTION}) does not answer: {remote.problem}. "
            "Builds go on with only this machine's compiler cache."
        )
    return remote


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *host_tools.rules()])
