"""The order of a rocm_wheel chain, and the cycle it refuses, from specs alone."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Dict

import pytest
from pants.engine.addresses import Address

from rocm_build.errors import RocmBuildError
from rocm_build.wheel.chain_order import build_order


def specs(graph: Dict[str, tuple]) -> dict:
    address = {name: Address("c", target_name=name) for name in graph}
    return {address[n]: SimpleNamespace(address=address[n], dependencies=tuple(address[d] for d in deps)) for n, deps in graph.items()}


def names(order) -> list:
    return [s.address.target_name for s in order]


def test_dependencies_come_first_in_the_order_their_build_file_names_them_each_once() -> None:
    graph = specs({"vllm": ("torch", "fa"), "fa": ("torch",), "torch": ("aotriton",), "aotriton": ()})
    assert names(build_order(Address("c", target_name="vllm"), graph)) == ["aotriton", "torch", "fa", "vllm"]


def test_a_deep_chain_is_no_recursion() -> None:
    graph = specs({f"w{i}": ((f"w{i + 1}",) if i < 5000 else ()) for i in range(5001)})
    assert names(build_order(Address("c", target_name="w0"), graph))[:2] == ["w5000", "w4999"]


def test_a_cycle_is_refused_naming_the_chain() -> None:
    graph = specs({"vllm": ("torch",), "torch": ("aotriton",), "aotriton": ("vllm",)})
    with pytest.raises(RocmBuildError) as e:
        build_order(Address("c", target_name="vllm"), graph)
    assert str(e.value) == (
        "c:vllm: rocm_wheel dependencies form a cycle: c:vllm -> c:torch -> c:aotriton -> c:vllm. A wheel cannot be "
        "built from itself; remove one of these `dependencies` edges."
    )
