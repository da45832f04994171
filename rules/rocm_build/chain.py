"""A rocm_wheel chain in build order, and the checks that need no compile, run before any build.

A torch build takes hours: whatever can be known without compiling (a missing toolchain,
an archive nobody resolved, a lock that is missing or no longer matches its pin, Python
or requirement files, a wheelhouse that cannot be downloaded) stops `package` before the
first build of the chain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from pants.engine.addresses import Address
from pants.engine.rules import Get, MultiGet, collect_rules, rule

from rocm_build.archives import ArchiveRequest, ArchiveSpec, pin_problem
from rocm_build.build_request import WheelBuildSpec, WheelRequest
from rocm_build.build_requirements import LockedRequirements, LockedRequirementsRequest
from rocm_build.errors import RocmBuildError
from rocm_build.toolchain import ResolvedToolchain, ToolchainRequest
from rocm_build.upstream import ResolvedUpstream, UpstreamRequest


async def wheel_chain(root: Address) -> Tuple[WheelBuildSpec, ...]:
    """The rocm_wheel builds `root` needs, itself last, in build order.

    Raises on a cycle with a message that names the rocm_wheel chain (Pants' own cycle
    message talks about Python imports).
    """
    path: list = []
    order: list = []

    async def visit(address: Address) -> None:
        if address in path:
            cycle = " -> ".join(a.spec for a in [*path[path.index(address):], address])
            raise RocmBuildError(
                f"{root.spec}: rocm_wheel dependencies form a cycle: {cycle}. A wheel cannot be "
                "built from itself; remove one of these `dependencies` edges."
            )
        if any(s.address == address for s in order):
            return
        path.append(address)
        spec = await Get(WheelBuildSpec, WheelRequest(address))
        for dep in spec.dependencies:
            await visit(dep)
        order.append(spec)
        path.pop()

    await visit(root)
    return tuple(order)


@dataclass(frozen=True)
class ChainRequest:
    root: Address


@dataclass(frozen=True)
class CheckedChain:
    specs: Tuple[WheelBuildSpec, ...]  # in build order, the root last


@rule(desc="Checking a rocm_wheel chain before any work")
async def check_chain(request: ChainRequest) -> CheckedChain:
    chain = await wheel_chain(request.root)
    # Toolchains first: a machine without ROCm stops here, naming the missing toolchain.
    toolchains = {spec.toolchain: spec.owner for spec in chain}
    await MultiGet(
        Get(ResolvedToolchain, ToolchainRequest(a, f"the `toolchain` field of {owner}"))
        for a, owner in toolchains.items()
    )
    archives = await MultiGet(
        Get(ArchiveSpec, ArchiveRequest(a, f"the `archives` field of {spec.owner}"))
        for spec in chain
        for _, a in spec.archives
    )
    problems = [p for a in archives for p in [pin_problem(a)] if p]
    if problems:
        raise RocmBuildError("\n".join(problems))
    # Locked components: fetch and patch their trees, check the locks against them and
    # download the wheelhouses, all before the first compile of the chain.
    locked = [spec for spec in chain if spec.lock_path]
    upstreams = await MultiGet(
        Get(ResolvedUpstream, UpstreamRequest(s.upstream.address, f"the `source` field of {s.owner}")) for s in locked
    )
    await MultiGet(
        Get(
            LockedRequirements,
            LockedRequirementsRequest(s.owner, s.lock_path or "", u.pin_name, u.pin.commit, s.requirements, u.tree),
        )
        for s, u in zip(locked, upstreams)
    )
    return CheckedChain(chain)


def rules():
    return collect_rules()
