"""Quick check: every gpu target is one the upstream builds (the recipe's `supported_gpu_targets`).
An optional component with such a target is skipped instead, by the preflight itself."""

from __future__ import annotations

from pants.engine.rules import collect_rules, rule
from pants.util.logging import LogLevel

from rocm_build.checks.findings import QuickCheckRequest, Findings


class GpuTargetsCheck(QuickCheckRequest):
    pass


@rule(desc="Checking a rocm_wheel's gpu targets against its upstream's", level=LogLevel.DEBUG)
async def check_gpu_targets(request: GpuTargetsCheck) -> Findings:
    spec = request.spec
    unsupported = spec.unsupported_gpu_targets()
    if not unsupported:
        return Findings()
    return Findings(
        (
            f"{unsupported}. Drop the target from `gpu_targets`, make the component `optional=True`, or "
            "move its pin to a commit whose upstream builds it (and update `supported_gpu_targets`).",
        )
    )


def rules():
    return collect_rules()
