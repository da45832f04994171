"""A rocm_wheel chain in build order: the rocm_wheels a target needs, itself last.

One rule, memoized per root and shared by everything that walks a chain (the checks before a
build, the install set, the run-time lock, the goals). It gathers the specs a level at a time,
each level in one MultiGet, as Pants' own `transitive_targets` does, then orders them here: a
cycle is then our error, naming the rocm_wheel chain, not the engine's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Tuple

from pants.engine.addresses import Address
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.errors import RocmBuildError
from rocm_build.wheel.build_spec import WheelBuildSpec, WheelRequest
from rocm_build.wheel import build_spec


@dataclass(frozen=True)
class WheelChainRequest:
    root: Address


@dataclass(frozen=True)
class WheelChain:
    specs: Tuple[WheelBuildSpec, ...]  # in build order, the root last

    @property
    def addresses(self) -> Tuple[Address, ...]:
        return tuple(s.address for s in self.specs)


@rule(desc="Ordering a rocm_wheel chain", level=LogLevel.DEBUG)
async def order_wheel_chain(request: WheelChainRequest) -> WheelChain:
    specs: Dict[Address, WheelBuildSpec] = {}
    level = [request.root]
    while level:
        found = await MultiGet(Get(WheelBuildSpec, WheelRequest(a)) for a in level)
        specs.update(zip(level, found))
        level = list(dict.fromkeys(d for s in found for d in s.dependencies if d not in specs))
    return WheelChain(build_order(request.root, specs))


def build_order(root: Address, specs: Dict[Address, WheelBuildSpec]) -> Tuple[WheelBuildSpec, ...]:
    """Depth first, dependencies in the order their BUILD file names them, each wheel after
    what it needs. Raises on a cycle with a message that names the rocm_wheel chain (Pants'
    own cycle message talks about Python imports)."""
    order: List[WheelBuildSpec] = []
    done = set()
    path: List[Address] = []
    # (address, whether its dependencies are in `order` already): a stack, so a deep chain
    # cannot reach Python's recursion limit.
    stack: List[Tuple[Address, bool]] = [(root, False)]
    while stack:
        address, expanded = stack.pop()
        if expanded:
            path.pop()
            order.append(specs[address])
            done.add(address)
            continue
        if address in done:
            continue
        if address in path:
            cycle = " -> ".join(a.spec for a in [*path[path.index(address):], address])
            raise RocmBuildError(
                f"{root.spec}: rocm_wheel dependencies form a cycle: {cycle}. A wheel cannot be "
                "built from itself; remove one of these `dependencies` edges."
            )
        path.append(address)
        stack.append((address, True))
        stack += [(d, False) for d in reversed(specs[address].dependencies)]
    return tuple(order)


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *build_spec.rules()])
