"""`pants check <rocm_wheel>...`: the preflight, where Pants users look for checks.

A member of Pants' `CheckRequest` union (`pants check --only=rocm-preflight` runs it alone):
the components' report `pants rocm-plan --check` prints too (preflight_report.py), for the
chains of every rocm_wheel given, each component once. It judges sources, pins, locks and
recipes, never what an earlier run left in dist/. Pants prints it under `rocm-preflight
failed` or `succeeded`; any problem fails the goal.
"""

from __future__ import annotations

from dataclasses import dataclass

from pants.core.goals.check import CheckRequest, CheckResult, CheckResults
from pants.engine.rules import collect_rules, rule
from pants.engine.target import FieldSet
from pants.engine.unions import UnionRule
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.goals.preflight_report import chain_specs, component_report
from rocm_build.wheel.target_types import WheelSourceField, WheelToolchainField
from rocm_build.checks import preflight
from rocm_build.wheel import chain_order

TOOL = "rocm-preflight"


@dataclass(frozen=True)
class RocmPreflightFieldSet(FieldSet):
    # The fields only a rocm_wheel has. Not its `environment`: as under `rocm-plan --check`,
    # the checks run here and look into the build image themselves.
    required_fields = (WheelSourceField, WheelToolchainField)

    source: WheelSourceField
    toolchain: WheelToolchainField


class RocmPreflightRequest(CheckRequest):
    field_set_type = RocmPreflightFieldSet
    tool_name = TOOL


# Its result, Pants' CheckResults, is never cached (it is shown in every run), as the checks'
# statuses it reports (checks/preflight.py); what those ask for is memoized as usual.
@rule(desc="Running the rocm_wheel preflight")
async def rocm_preflight(request: RocmPreflightRequest) -> CheckResults:
    roots = sorted(fs.address for fs in request.field_sets)
    report = await component_report(await chain_specs(roots, "check"))
    result = CheckResult(1 if report.problems else 0, report.text, "", partition_description=", ".join(r.spec for r in roots))
    return CheckResults([result], checker_name=TOOL)


@memoized
def rules():
    return FrozenOrderedSet(
        [
            *collect_rules(),
            UnionRule(CheckRequest,
            RocmPreflightRequest),
            *preflight.rules(),
            *chain_order.rules(),
        ]
    )
