"""ccache's remote storage (`[rocm-build] ccache_remote_storage`), kept out of every key.

Each Pants session writes the configured address into a named cache that every build
process has (named caches are not part of a process's key) or removes it when unset; the
build's script starts a forwarder from it (scripts/ccache_remote.py). So the address and its
credentials are never in a Process's env or argv, and changing them rebuilds nothing.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from pants.engine.process import FallibleProcessResult, Process, ProcessCacheScope
from pants.engine.rules import Get, collect_rules, rule

from rocm_build.errors import RocmBuildError
from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_digest
from rocm_build.settings import RocmBuildSubsystem
from rocm_build.tools import HostTools

logger = logging.getLogger(__name__)

CCACHE_REMOTE_CACHE = "rocm_build_ccache_remote"
CCACHE_REMOTE_DIR = ".ccache-remote"
OPTION = "[rocm-build] ccache_remote_storage (PANTS_ROCM_BUILD_CCACHE_REMOTE_STORAGE)"


@dataclass(frozen=True)
class CcacheRemote:
    shown: str  # the server without credentials; "" when none is configured
    problem: str  # why it does not answer; "" when it does


@rule(desc="Configuring ccache's remote storage")
async def configure_ccache_remote(settings: RocmBuildSubsystem, tools: HostTools) -> CcacheRemote:
    result = await Get(
        FallibleProcessResult,
        Process(
            argv=(tools.python.path, f"{SCRIPTS_DIR}/ccache_remote.py", "configure", CCACHE_REMOTE_DIR),
            env={"PATH": "/usr/bin:/bin", "ROCM_BUILD_CCACHE_REMOTE": settings.ccache_remote_storage},
            input_digest=await script_digest("ccache_remote.py"),
            append_only_caches={CCACHE_REMOTE_CACHE: CCACHE_REMOTE_DIR},
            description="Configuring ccache's remote storage",
            # Once per session, in memory only: it holds the address, and writes a named cache.
            cache_scope=ProcessCacheScope.PER_SESSION,
        ),
    )
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


def rules():
    return collect_rules()
