"""No network inside a build: each build runs in a new network namespace (`unshare --net`).

Only the processes that must download (git fetch, wheelhouse, archives, the TheRock SDK
install) have the network. Whether this machine permits namespaces is checked once per
pantsd; where it does not, builds stop unless `[build-isolation] network_isolation = false`,
which each wheel's rocm_build_info.json then records.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pants.engine.process import FallibleProcessResult, Process, ProcessCacheScope
from pants.engine.rules import Get, collect_rules, rule
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.errors import RocmBuildError, indent, tail
from rocm_build.subsystems.build_isolation import BuildIsolationSubsystem
from rocm_build.subsystems.rocm_build import RocmBuildSubsystem
from rocm_build.subsystems.host_tools import HostTools
from rocm_build.subsystems import host_tools

# build_wheel.sh: exit 44 when the namespace cannot be made.
EXIT_NO_NAMESPACE = 44
# The namespaces build_wheel.sh makes (a user namespace only when not root).
PROBE = (
    'if [ "$(id -u)" = 0 ]; then unshare --net --mount --uts true; '
    "else unshare --net --mount --uts --map-root-user true; fi"
)
NO_NETWORK_SIGNS = re.compile(
    r"Network is unreachable|Temporary failure in name resolution|Name or service not known|"
    r"Could not resolve host|No route to host|nodename nor servname|getaddrinfo failed|"
    r"Failed to establish a new connection|Failed to connect to|"
    # In a container without network only loopback exists, and it is up: nothing answers.
    r"Connection refused",
    re.I,
)
HOW_TO_ALLOW = (
    "Allow them (e.g. `sysctl -w kernel.unprivileged_userns_clone=1`, or run as root), or "
    "let builds use the host's network with `[build-isolation] network_isolation = false` in "
    "pants.toml (rocm_build_info.json records it)"
)


@dataclass(frozen=True)
class NetworkIsolation:
    enabled: bool

    def describe(self, in_image: bool = False) -> str:
        if in_image:
            return "none (container, --network=none)"
        return "none (own network namespace)" if self.enabled else "host (network_isolation = false)"

    def isolated(self, in_image: bool) -> bool:
        """A container has no network whatever the setting says."""
        return self.enabled or in_image


@rule
async def network_isolation(
    isolation: BuildIsolationSubsystem, settings: RocmBuildSubsystem, tools: HostTools
) -> NetworkIsolation:
    if not isolation.network(settings):
        return NetworkIsolation(False)
    probe = await Get(
        FallibleProcessResult,
        Process(
            argv=(tools.bash.path, "-c", PROBE),
            env={"PATH": "/usr/bin:/bin"},
            description="Checking that builds can run isolated (unshare --net --mount --uts)",
            cache_scope=ProcessCacheScope.PER_RESTART_SUCCESSFUL,
        ),
    )
    if probe.exit_code != 0:
        raise RocmBuildError(
            "Builds run without network and at a fixed path, in new network, mount and UTS "
            f"namespaces (`unshare --net --mount --uts`), and this machine does not permit them:\n{indent(tail(probe.stderr.decode(errors='replace'), 4))}\n"
            f"{HOW_TO_ALLOW}."
        )
    return NetworkIsolation(True)


def explain_build_failure(owner: str, timeout: int, exit_code: int, output: str, log_path: str) -> str:
    if "Exceeded timeout" in output:
        why = f"exceeded its timeout of {timeout} s (raise `timeout` on the target if the build needs longer)"
    elif exit_code == EXIT_NO_NAMESPACE:
        why = f"could not start: no network namespace could be made for it. {HOW_TO_ALLOW}"
    else:
        why = f"failed (exit {exit_code})"
    message = f"rocm_wheel {owner}: the build {why}."
    if NO_NETWORK_SIGNS.search(output):
        message += (
            "\nIt tried to reach the network. Builds have no network: everything a build "
            "reads must be a declared input. Add what it downloads as a build requirement "
            f"(`build_requirements` on {owner}, then `pants lock-build-requirements {owner}`) "
            "or as an `upstream_archive` named in its `archives` field."
        )
    return f"{message}\nLast lines of the log:\n{indent(tail(output, 25))}\nFull log: {log_path}"


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *host_tools.rules()])
