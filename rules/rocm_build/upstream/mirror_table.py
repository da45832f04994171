"""`[rocm-build] mirrors`: where upstream URLs are fetched from instead, kept out of every key.

Each Pants session writes the table into a named cache that the fetch processes have (named
caches are not part of a process's key; scripts/mirrors.py), so moving to a mirror or off it
rebuilds nothing and a remote cache entry made through a mirror serves machines without it.
What a fetch gets is still checked against its pin (commit, sha256).

The named cache holds one table per named caches directory, the latest session's: a Pants with
another table (or none) that shares the directory replaces it under a running session. Hence each
unit test's own named caches (testutil/isolated_rule_runner.py), and the end-to-end copies' as
variables their programs' own Pants inherit (tests/e2e/workspace.py); two checkouts with
different tables run at once need `[GLOBAL] named_caches_dir` apart (docs/pins-and-patches.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Dict, Tuple

from pants.engine.fs import Digest
from pants.engine.process import FallibleProcessResult, Process, ProcessCacheScope
from pants.engine.rules import Get, collect_rules, rule
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet
from pants.util.logging import LogLevel

from rocm_build.errors import RocmBuildError
from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_files
from rocm_build.subsystems import host_tools
from rocm_build.subsystems.host_tools import HostTools
from rocm_build.subsystems.rocm_build import RocmBuildSubsystem

MIRRORS_CACHE = "rocm_build_mirrors"
MIRRORS_DIR = ".mirrors"
OPTION = "[rocm-build] mirrors (PANTS_ROCM_BUILD_MIRRORS)"


@dataclass(frozen=True)
class Mirrors:
    """The table, for messages; fetch processes read it from the named cache."""

    table: Tuple[Tuple[str, str], ...]

    @property
    def caches(self) -> Dict[str, str]:
        """The named cache a fetch process mounts to see the table."""
        return {MIRRORS_CACHE: MIRRORS_DIR}


@rule(desc="Configuring mirrors")
async def configure_mirrors(settings: RocmBuildSubsystem, tools: HostTools) -> Mirrors:
    table = dict(settings.mirrors)
    result = await Get(
        FallibleProcessResult,
        Process(
            argv=(tools.python.path, f"{SCRIPTS_DIR}/mirrors.py", "configure", MIRRORS_DIR),
            env={"PATH": "/usr/bin:/bin", "ROCM_BUILD_MIRRORS": json.dumps(table, sort_keys=True)},
            input_digest=await Get(Digest, script_files("mirrors.py", "git_urls.py")),
            append_only_caches={MIRRORS_CACHE: MIRRORS_DIR},
            description="Configuring mirrors",
            # Once per session, in memory only: it writes a named cache. Its line only under
            # -ldebug: it is the same every run (a bad table is an error).
            cache_scope=ProcessCacheScope.PER_SESSION,
            level=LogLevel.DEBUG,
        ),
    )
    if result.exit_code != 0:
        raise RocmBuildError(f"{OPTION}: {result.stderr.decode().strip()}")
    return Mirrors(tuple(sorted(table.items())))


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *host_tools.rules()])
