"""Host tools the rules run (git, bash, python3), found at fixed system locations.

The tool's path is part of every cache key that uses it, so we only look in the standard
system directories, which are the same on every machine of a kind; `--version` output
goes into the key too, so a different git or python gives a different key.

bash is Pants' own `BashBinary` (the same directories, fingerprinted by `bash --version`).
git and python3 are looked up here, because Pants' lookups do not fit:
- `GitBinary` (Pants 2.17 to 2.31) is found without a test, so its fingerprint is the same for
  every git; the keys of fetches and patches carry `git --version` (ROCM_BUILD_GIT).
- `PythonBinary` is deprecated in 2.17 and gone from 2.18; it searched
  `[python-bootstrap].search_path`, here `<PYENV>` and `<PATH>`: a home directory in the keys.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from pants.core.util_rules.system_binaries import (
    BashBinary,
    BinaryPath,
    BinaryPathRequest,
    BinaryPaths,
    BinaryPathTest,
)
from pants.engine.process import Process, ProcessCacheScope
from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel
from pants.core.util_rules import system_binaries
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.errors import RocmBuildError

SYSTEM_DIRS = ("/usr/bin", "/bin", "/usr/local/bin")

# For processes whose inputs or work are large (fetching an upstream, patching or building
# from a whole tree, downloading wheels): with a remote cache, wait this long for its answer
# before starting the same work locally. Pants otherwise starts local work at once, in
# parallel, and materializing that sandbox pulls the whole input tree from the cache even
# when the lookup then hits. A server that is down answers at once, so nothing waits then.
REMOTE_CACHE_FIRST_MILLIS = 10_000


@dataclass(frozen=True)
class HostTools:
    git: BinaryPath
    bash: BashBinary
    python: BinaryPath


async def _find(name: str, why: str, install: str) -> BinaryPath:
    paths = await Get(
        BinaryPaths,
        BinaryPathRequest(
            binary_name=name, search_path=SYSTEM_DIRS, test=BinaryPathTest(["--version"])
        ),
    )
    if not paths.first_path:
        raise RocmBuildError(
            f"`{name}` was not found in {', '.join(SYSTEM_DIRS)}; it is needed {why}. "
            f"Install it: {install}"
        )
    return paths.first_path


@rule
async def find_host_tools(bash: BashBinary) -> HostTools:
    git = await _find("git", "to fetch upstream sources and apply patches", "apt-get install git")
    python = await _find(
        "python3", "to apply anchored edits and build wheels", "apt-get install python3 python3-venv"
    )
    return HostTools(git=git, bash=bash, python=python)


def cache_suffix(text: str) -> str:
    """A named cache's name part for `text`: Pants 2.17 accepts only [a-z_] there, so the
    hash is spelled in letters."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return "".join(chr(ord("a") + int(c, 16)) for c in digest)


# Points a link inside a named cache at a directory of this machine, atomically. $1: the
# link, $2: its target.
# The new link gets a name of its own process ($$): two builds linking the same named cache at
# once (parallel components of one chain) must not move each other's link away.
_LINK_SCRIPT = 'ln -sfn "$2" "$1.new.$$" && mv -T "$1.new.$$" "$1"'


def link_process(tools: HostTools, cache_name: str, mount: str, target: str, description: str) -> Process:
    """Makes `<mount>/root` in the named cache `cache_name` point at `target`: how builds reach
    a toolchain or an interpreter without its location entering any key (the cache is named
    by the identity of what it points at). Machine state: redone by each new pantsd."""
    return Process(
        argv=(tools.bash.path, "-c", _LINK_SCRIPT, "link", f"{mount}/root", target),
        env={"PATH": "/usr/bin:/bin"},
        append_only_caches={cache_name: mount},
        description=description,
        level=LogLevel.DEBUG,
        cache_scope=ProcessCacheScope.PER_RESTART_SUCCESSFUL,
    )


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *system_binaries.rules()])
