"""`[build-isolation]` options: what a rocm_wheel build is kept apart from — the network, the
machine (a container engine for builds in images), the roots a remote worker is searched at."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Optional, Tuple

from pants.option.option_types import BoolOption, EnumOption, StrListOption
from pants.option.subsystem import Subsystem
from pants.util.strutil import softwrap

from rocm_build.subsystems.moved_options import moved_value

if TYPE_CHECKING:  # [rocm-build] declares its deprecated keys with this module's enum
    from rocm_build.subsystems.rocm_build import RocmBuildSubsystem


class ContainerEngineName(Enum):
    podman = "podman"
    docker = "docker"


class BuildIsolationSubsystem(Subsystem):
    options_scope = "build-isolation"
    help = "What rocm_wheel builds are isolated from: the network, the host (containers), a worker's other roots."

    network_isolation = BoolOption(
        default=True,
        help=softwrap(
            """
            Run every build step in a new network namespace (`unshare --net`, with
            `--map-root-user` when not root), so a build cannot download anything it did not
            declare. Turn off only where namespaces are not permitted; each wheel's
            `rocm_build_info.json` then records that it was built with the host's network.
            """
        ),
    )
    container_engine = EnumOption(
        default=None,
        enum_type=ContainerEngineName,
        help=softwrap(
            """
            The container engine that runs builds whose `environment` is a
            `docker_environment`: `podman` or `docker` (its CLI, found in /usr/bin, /bin or
            /usr/local/bin). Unset: podman if installed, else docker.
            """
        ),
    )
    worker_search_path = StrListOption(
        default=["/usr", "/usr/local", "/opt/rocm"],
        advanced=True,
        help=softwrap(
            """
            Where a build looks for its Python and its toolchain when the links to them are
            missing in its sandbox's named caches: on a remote-execution worker, where the
            process that located them may have run on another machine. Each entry is a root
            (a Python prefix with `bin/python3.X`, a ROCm root, an LLVM root); llvm toolchains
            are also looked for at `/usr/lib/llvm-<major>`, ROCm ones at `/opt/rocm-<version>`.
            A root is used only if its interpreter or compiler says exactly the version in the
            build's key. Part of every build's key (it is in the build's environment).
            """
        ),
    )

    # Each read takes `[rocm-build]` too: its deprecated keys of the same names still count.
    def network(self, old: "RocmBuildSubsystem") -> bool:
        return bool(moved_value(self, old, "network_isolation"))

    def engine(self, old: "RocmBuildSubsystem") -> Optional[str]:
        value = moved_value(self, old, "container_engine")
        return value.value if value else None

    def worker_roots(self, old: "RocmBuildSubsystem") -> Tuple[str, ...]:
        return tuple(moved_value(self, old, "worker_search_path"))
