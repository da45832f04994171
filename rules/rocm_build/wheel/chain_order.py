"""A rocm_wheel chain in build order: the rocm_wheels a target needs, itself last."""

from __future__ import annotations

from typing import Tuple

from pants.engine.addresses import Address
from pants.engine.rules import Get

from rocm_build.errors import RocmBuildError
from rocm_build.wheel.build_spec import WheelBuildSpec, WheelRequest


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
