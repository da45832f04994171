"""checks/preflight.py: what the two stages decide from their checks' findings. An optional
component upstream does not build for is skipped (before any check or fetch) with the reason; the
quick checks all run and their problems add up in their list's order; the tree checks run in
order on the fetched tree, the gated ones only while there is no problem, and a check that stops
ends the stage; a tree that cannot be fetched is the component's one problem."""

from __future__ import annotations

from typing import Any, Dict

from pants.engine.addresses import Address
from pants.engine.fs import EMPTY_DIGEST
from pants.engine.unions import UnionMembership

from rocm_build.checks import archive_pin_check, build_lock_check, recipe_files, recipe_pairing, tools, upstream_steps
from rocm_build.checks.findings import ComponentStatus, Findings, QuickCheckRequest, TreeCheckRequest
from rocm_build.checks.preflight import (
    QUICK_CHECKS, TREE_CHECKS, EarlyLockWheels, EarlyLockWheelsRequest, QuickCheck, TreeCheck, early_lock_wheels, quick_check, tree_check,
)  # fmt: skip
from rocm_build.errors import RocmBuildError
from rocm_build.locks.build_requirements import LockWheels
from rocm_build.testutil.engine import drive
from rocm_build.testutil.specs import COMMIT, upstream_spec, wheel_spec
from rocm_build.toolchain.interpreters import BuildPython
from rocm_build.upstream.source_tree import SourceTree
from rocm_build.upstream.upstream_repo import ResolvedUpstream
from rocm_build.wheel.build_spec import WheelBuildSpec, WheelRequest

WHEEL = Address("tests/mini/torch", target_name="wheel")
MEMBERS = UnionMembership({QuickCheckRequest: list(QUICK_CHECKS), TreeCheckRequest: list(TREE_CHECKS)})
UNSUPPORTED = dict(gpu_targets=("gfx1151",), supported_gpu_targets=("gfx942",), supported_gpu_targets_source="https://example.invalid/list")
UPSTREAM = upstream_spec()
RESOLVED = ResolvedUpstream(UPSTREAM.address, "mini-torch", UPSTREAM.pin, (), SourceTree(EMPTY_DIGEST, EMPTY_DIGEST), "", 0)


def run(rule: Any, request: Any, spec: WheelBuildSpec, findings: Dict[type, Findings], **answers: Any):
    """The stage's rule for `spec`, each check answered from `findings` by its type (none: no finding)."""

    def answer(output_type: type, asked: Any) -> Any:
        if output_type is WheelBuildSpec:
            return spec
        if output_type is Findings:
            return findings.get(type(asked), Findings())
        return answers[output_type.__name__]

    return drive(rule(request, MEMBERS), answer)


def test_an_optional_component_upstream_does_not_build_is_skipped_unchecked() -> None:
    status, asked = run(quick_check, QuickCheck(WHEEL), wheel_spec(optional=True, **UNSUPPORTED), {})
    assert status.skipped == (
        "tests/mini/torch:wheel is asked for gfx1151 (gpu_targets: gfx1151), but its upstream builds only gfx942 "
        "(supported_gpu_targets, from https://example.invalid/list). It is optional: skipped, its dependents are built without it."
    )
    assert status.problems == () and [t for t, _ in asked] == [WheelBuildSpec]
    # Its tree is not fetched either: the quick stage said why.
    status, asked = run(tree_check, TreeCheck(WHEEL), wheel_spec(optional=True, **UNSUPPORTED), {})
    assert status == ComponentStatus("tests/mini/torch:wheel") and [t for t, _ in asked] == [WheelBuildSpec]


def test_the_quick_checks_all_run_and_their_problems_add_up_in_order() -> None:
    findings = {tools.ToolsCheck: Findings(("no clang",)), archive_pin_check.ArchivePinsCheck: Findings(("no sha256", "bad sha256"))}
    status, asked = run(quick_check, QuickCheck(WHEEL), wheel_spec(), findings)
    assert [type(r) for t, r in asked if t is Findings] == list(QUICK_CHECKS)
    assert status.problems == ("no clang", "no sha256", "bad sha256")


def tree_run(findings: Dict[type, Findings], **spec: Any):
    return run(tree_check, TreeCheck(WHEEL), wheel_spec(**spec), findings, ResolvedUpstream=RESOLVED, EarlyLockWheels=EarlyLockWheels())


def test_the_tree_checks_run_in_order_on_the_fetched_tree_and_add_their_summaries() -> None:
    findings = {recipe_pairing.PairingCheck: Findings(notes=("paired",)), build_lock_check.BuildLockCheck: Findings(summary=", 2 locked distribution(s)")}
    status, asked = tree_run(findings)
    checks = [r for t, r in asked if t is Findings]
    assert [type(r) for r in checks] == list(TREE_CHECKS)
    assert {r.tree.where for r in checks} == {f"mini-torch at {COMMIT}"}
    assert status == ComponentStatus("tests/mini/torch:wheel", notes=("paired",), summary=f"mini-torch {COMMIT[:12]}, 0 patch(es), 2 locked distribution(s)")


def test_a_problem_skips_the_gated_checks() -> None:
    status, asked = tree_run({recipe_files.RecipeFilesCheck: Findings(("missing file",))})
    assert [type(r) for t, r in asked if t is Findings] == [recipe_pairing.PairingCheck, recipe_files.RecipeFilesCheck]
    assert status.problems == ("missing file",)


def test_a_check_that_stops_ends_the_stage() -> None:
    status, asked = tree_run({build_lock_check.BuildLockCheck: Findings(summary=", 1 locked distribution(s)", stop=True)})
    assert upstream_steps.UpstreamStepsCheck not in [type(r) for t, r in asked if t is Findings]
    assert status.summary.endswith(", 1 locked distribution(s)")


def test_a_tree_that_cannot_be_fetched_is_the_one_problem() -> None:
    failed = RocmBuildError("mini-torch: the fetch failed")
    status, asked = run(tree_check, TreeCheck(WHEEL), wheel_spec(), {}, ResolvedUpstream=failed, EarlyLockWheels=EarlyLockWheels())
    assert status == ComponentStatus("tests/mini/torch:wheel", ("mini-torch: the fetch failed",))
    assert Findings not in [t for t, _ in asked]


def test_the_early_download_of_the_lock_wheels_never_fails() -> None:
    # Its failure is the lock check's to name, beside the tree's problems.
    spec = wheel_spec(lock_path="3rdparty/build/py3.11/mini-torch.lock")
    python = BuildPython("/usr/bin/python3", "CPython", "3.11.2")
    answers = {BuildPython: python, LockWheels: RocmBuildError("no index")}
    result, asked = drive(early_lock_wheels(EarlyLockWheelsRequest(spec)), lambda t, _: answers[t])
    assert result == EarlyLockWheels() and [t for t, _ in asked] == [BuildPython, LockWheels]
    result, asked = drive(early_lock_wheels(EarlyLockWheelsRequest(wheel_spec())), lambda t, _: answers[t])
    assert result == EarlyLockWheels() and asked == []
