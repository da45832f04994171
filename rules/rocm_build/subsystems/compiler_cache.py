"""`[compiler-cache]` options: what launches the builds' compiles (ccache or sccache) and the
Redis server ccache shares objects through. The sccache binary itself is `[sccache]`."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

from pants.option.option_types import EnumOption, StrOption
from pants.option.subsystem import Subsystem
from pants.util.strutil import softwrap

from rocm_build.subsystems.moved_options import moved_value

if TYPE_CHECKING:  # [rocm-build] declares its deprecated keys with this module's enum
    from rocm_build.subsystems.rocm_build import RocmBuildSubsystem

# Named in messages: it may hold a password, so it is set from the environment.
REMOTE_STORAGE_OPTION = "[compiler-cache] ccache_remote_storage (PANTS_COMPILER_CACHE_CCACHE_REMOTE_STORAGE)"


class CompilerLauncher(Enum):
    ccache = "ccache"
    sccache = "sccache"


class CompilerCacheSubsystem(Subsystem):
    options_scope = "compiler-cache"
    help = "What launches the compiles of rocm_wheel builds, and the remote storage ccache shares objects through."

    launcher = EnumOption(
        default=CompilerLauncher.ccache,
        help=softwrap(
            """
            What launches the builds' C, C++ and HIP compiles: `ccache` (the host's or the
            image's, as it is found on PATH; nothing if there is none) or `sccache` (Mozilla's,
            pinned by `[sccache]`: its server lives inside each build, on a Unix socket in the
            sandbox, and stops with it). Either keeps its store in a named cache per component
            and arch. The sccache binary is an input of the build, so its digest is in every
            build's key: wheels built with one launcher are not cache hits for the other.
            """
        ),
    )
    ccache_remote_storage = StrOption(
        default="",
        advanced=True,
        help=softwrap(
            """
            A Redis server that builds share their compiler cache (ccache) through, so a
            machine whose own cache is empty still reuses the objects another machine
            compiled: `redis://[[USER:]PASSWORD@]HOST[:PORT][/DB]` or
            `redis+unix:/PATH/TO/SOCKET`, optionally followed by ccache attributes after `|`
            (`|read-only=true`). Set it from the environment,
            `PANTS_COMPILER_CACHE_CCACHE_REMOTE_STORAGE=redis://...`, not in a committed file:
            it may hold credentials. It is in no cache key (builds have no network; a forwarder
            outside the build relays ccache's requests through a socket in its sandbox), and
            a server that does not answer costs a warning, not a failed build.
            """
        ),
    )

    # Each read takes `[rocm-build]` too: its deprecated keys still count.
    def launcher_name(self, old: "RocmBuildSubsystem") -> str:
        # Pants refuses any other value than the enum's, naming the choices.
        return str(moved_value(self, old, "compiler_launcher", "launcher").value)

    def remote_storage(self, old: "RocmBuildSubsystem") -> str:
        return str(moved_value(self, old, "ccache_remote_storage"))
