"""checks/chain.py: a chain's quick checks all run first, and their problems stop it before any
tree is fetched; then every tree's checks; every problem of the chain in one error naming the
root, each once. tests/e2e/preflight_test.py's "tests/mini/vllm:wheel: 1 problem(s) found before
any build" and "Fetching mini- not in the output" (test_a_required_component_asked_for_a_target_
upstream_does_not_build), and tests/e2e/prebuilt_test.py's test_1_an_unresolved_pin_stops_before_
any_build (with checks/prebuilt_dependencies_test.py for the text), at the rule."""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional

import pytest
from pants.engine.addresses import Address

from rocm_build.checks.chain import ChainRequest, CheckedChain, check_chain
from rocm_build.checks.findings import ComponentStatus
from rocm_build.checks.preflight import QuickCheck, TreeCheck
from rocm_build.errors import RocmBuildError
from rocm_build.testutil.engine import drive
from rocm_build.testutil.specs import wheel_spec
from rocm_build.wheel.chain_order import WheelChain, WheelChainRequest

TORCH = Address("tests/mini/torch", target_name="wheel")
VLLM = Address("tests/mini/vllm", target_name="wheel")
CHAIN = WheelChain((wheel_spec(address=TORCH), wheel_spec(address=VLLM)))


def run(quick: Dict[Address, ComponentStatus], tree: Dict[Address, ComponentStatus], asked: Optional[List[Any]] = None):
    """The chain torch -> vllm; a component not given a status passes. `asked` gets each check
    asked for, also when the rule raises."""

    def answer(output_type: type, request):
        if asked is not None:
            asked.append(request)
        if output_type is WheelChain:
            assert request == WheelChainRequest(VLLM)
            return CHAIN
        statuses = quick if isinstance(request, QuickCheck) else tree
        return statuses.get(request.address, ComponentStatus(request.address.spec))

    return drive(check_chain(ChainRequest(VLLM)), answer)


def test_a_chain_that_passes_names_itself_in_build_order() -> None:
    checked, asked = run({}, {})
    assert checked == CheckedChain(VLLM, (TORCH, VLLM))
    assert [r for _, r in asked[1:]] == [QuickCheck(TORCH), QuickCheck(VLLM), TreeCheck(TORCH), TreeCheck(VLLM)]


def test_quick_problems_stop_the_chain_before_any_tree_is_fetched() -> None:
    quick = {TORCH: ComponentStatus(TORCH.spec, ("no clang", "no python")), VLLM: ComponentStatus(VLLM.spec, ("no clang",))}
    with pytest.raises(RocmBuildError) as e:
        run(quick, {})
    # Each problem once, though both components have it.
    assert str(e.value) == (
        "tests/mini/vllm:wheel: 2 problem(s) found before any build (`pants rocm-plan --check tests/mini/vllm:wheel` "
        "lists them too):\n- no clang\n- no python"
    )


def test_an_unresolved_prebuilt_pin_stops_the_chain_before_any_tree_is_fetched() -> None:
    # The problem text is checks/prebuilt_dependencies.py's (its test asserts it is built so);
    # here: the e2e's unresolved pin stops `package` with it before any fetch or build.
    unresolved = (
        "prebuilt_wheel tests/mini/torch:prebuilt: pin `prebuilt-mini-torch` ([prebuilt.prebuilt-mini-torch] in "
        "tests/mini/pins) is not resolved: it has no version, file and sha256 yet. Run `pants run rules:update-pins "
        "-- --only prebuilt-mini-torch` where the index (http://127.0.0.1:1/simple/) is reachable; never write a "
        "sha256 you have not checked."
    )
    asked: List[Any] = []
    with pytest.raises(RocmBuildError) as e:
        run({VLLM: ComponentStatus(VLLM.spec, (unresolved,))}, {}, asked)
    assert str(e.value) == (
        "tests/mini/vllm:wheel: 1 problem(s) found before any build (`pants rocm-plan --check tests/mini/vllm:wheel` "
        f"lists them too):\n- {unresolved}"
    )
    assert asked == [WheelChainRequest(VLLM), QuickCheck(TORCH), QuickCheck(VLLM)]


def test_tree_problems_of_every_component_are_reported_together() -> None:
    tree = {TORCH: ComponentStatus(TORCH.spec, ("torch: missing file",)), VLLM: ComponentStatus(VLLM.spec, ("vllm: stale lock",))}
    with pytest.raises(RocmBuildError) as e:
        run({}, tree)
    assert str(e.value).startswith("tests/mini/vllm:wheel: 2 problem(s) found before any build")
    assert str(e.value).endswith(":\n- torch: missing file\n- vllm: stale lock")


def test_a_skipped_component_is_a_warning_not_a_problem(caplog: pytest.LogCaptureFixture) -> None:
    quick = {TORCH: ComponentStatus(TORCH.spec, skipped="tests/mini/torch:wheel is asked for gfx1151 ... skipped")}
    with caplog.at_level(logging.WARNING):
        checked, _ = run(quick, {})
    assert checked.addresses == (TORCH, VLLM)
    assert [r.getMessage() for r in caplog.records] == ["tests/mini/torch:wheel is asked for gfx1151 ... skipped"]
