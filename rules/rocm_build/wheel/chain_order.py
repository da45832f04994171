"""A rocm_wheel chain in build order: the rocm_wheels a target needs, itself last."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, List, Tuple

from pants.engine.addresses import Address
from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel

from rocm_build.errors import RocmBuildError
from rocm_build.wheel.build_spec import WheelBuildSpec, WheelRequest


@dataclass(frozen=True)
class WheelChainRequest:
    root: Address


@dataclass(frozen=True)
class WheelChain:
    specs: Tuple[WheelBuildSpec, ...]  # in build order, the root last

    @property
    def addresses(self) -> Tuple[Address, ...]:
        return tuple(spec.address for spec in self.specs)


@rule(desc="Ordering a rocm_wheel chain", level=LogLevel.DEBUG)
async def order_wheel_chain(request: WheelChainRequest) -> WheelChain:
    """The rocm_wheel builds `root` needs, itself last, in build order: depth first, each
    dependency before its dependent (a stack, not recursion: every engine call stays in the rule).

    Raises on a cycle with a message that names the rocm_wheel chain (Pants' own cycle
    message talks about Python imports).
    """
    root = request.root
    order: List[WheelBuildSpec] = []
    spec = await Get(WheelBuildSpec, WheelRequest(root))
    path: List[Tuple[WheelBuildSpec, Iterator[Address]]] = [(spec, iter(spec.dependencies))]
    while path:
        spec, dependencies = path[-1]
        address = next(dependencies, None)
        if address is None:  # every dependency is ordered: the wheel follows them
            order.append(spec)
            path.pop()
            continue
        on_path = [s.address for s, _ in path]
        if address in on_path:
            cycle = " -> ".join(a.spec for a in [*on_path[on_path.index(address):], address])
            raise RocmBuildError(
                f"{root.spec}: rocm_wheel dependencies form a cycle: {cycle}. A wheel cannot be "
                "built from itself; remove one of these `dependencies` edges."
            )
        if any(s.address == address for s in order):
            continue
        dependency = await Get(WheelBuildSpec, WheelRequest(address))
        path.append((dependency, iter(dependency.dependencies)))
    return WheelChain(tuple(order))


def rules():
    return collect_rules()
