"""checks/gpu_targets.py: a gpu target outside the upstream's list is a problem naming the target,
the list's source and the three fixes (tests/e2e/preflight_test.py's
test_a_required_component_asked_for_a_target_upstream_does_not_build, at the rule)."""

from __future__ import annotations

from pants.testutil.rule_runner import run_rule_with_mocks

from rocm_build.checks.findings import Findings
from rocm_build.checks.gpu_targets import GpuTargetsCheck, check_gpu_targets
from rocm_build.testutil.specs import wheel_spec

SOURCE = "https://github.com/ROCm/aiter/blob/e4048607/aiter/jit/utils/build_targets.py#L39"


def check(**spec) -> Findings:
    return run_rule_with_mocks(check_gpu_targets, rule_args=[GpuTargetsCheck(wheel_spec(**spec))])


def test_a_target_upstream_does_not_build_names_it_the_list_and_the_fixes() -> None:
    found = check(gpu_targets=("gfx1151", "gfx942"), supported_gpu_targets=("gfx942", "gfx950"), supported_gpu_targets_source=SOURCE)
    assert found.problems == (
        "tests/mini/torch:wheel is asked for gfx1151 (gpu_targets: gfx1151, gfx942), but its upstream builds only "
        f"gfx942, gfx950 (supported_gpu_targets, from {SOURCE}). Drop the target from `gpu_targets`, make the "
        "component `optional=True`, or move its pin to a commit whose upstream builds it (and update "
        "`supported_gpu_targets`).",
    )
    assert not found.stop  # the other checks still run: every problem in one report


def test_targets_upstream_builds_and_an_unknown_list_pass() -> None:
    assert check(gpu_targets=("gfx942",), supported_gpu_targets=("gfx942", "gfx950")) == Findings()
    # No `supported_gpu_targets`: the upstream's list is not known, nothing to hold it to.
    assert check(gpu_targets=("gfx1151",), supported_gpu_targets=()) == Findings()
