"""`pants test` of a triton_kernel_test: what sets it apart from the other workload test.

Its script (scripts/kernel_test.sh) compiles every kernel the workload launches for each gpu
target, then its judge (scripts/kernel_verdict.py) holds the report (report.json) against the
target's expected failures and `fail_on_spills`. The sandbox and the process are sandbox.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict

from pants.core.goals.test import TestRequest, TestResult, TestSubsystem
from pants.engine.rules import collect_rules, rule
from pants.option.option_types import SkipOption
from pants.option.subsystem import Subsystem
from pants.util.logging import LogLevel

from rocm_build.workloads.sandbox import WorkloadTestFieldSet, run_workload_test
from rocm_build.workloads.source import WorkloadSource
from rocm_build.workloads.target_types import ExpectedFailuresField, FailOnSpillsField, WorkloadField


class TritonKernelTestSubsystem(Subsystem):
    options_scope = "triton-kernels"
    name = "triton-kernels"
    help = "Compiling upstream Triton kernels for each gpu target without a GPU (`triton_kernel_test` targets)."

    skip = SkipOption("test")


@dataclass(frozen=True)
class TritonKernelTestFieldSet(WorkloadTestFieldSet):
    required_fields = (WorkloadField, ExpectedFailuresField)

    expected_failures: ExpectedFailuresField
    fail_on_spills: FailOnSpillsField

    script = "kernel_test.sh"
    judge = "kernel_verdict.py"
    report = "report.json"
    doing = "Compiling the Triton kernels"

    def expectations(self, source: WorkloadSource) -> Dict[str, Any]:
        return {"expected_failures": dict(self.expected_failures.value or {}), "fail_on_spills": self.fail_on_spills.value}


class TritonKernelTestRequest(TestRequest):
    tool_subsystem = TritonKernelTestSubsystem
    field_set_type = TritonKernelTestFieldSet


@rule(desc="Running a triton_kernel_test", level=LogLevel.DEBUG)
async def run_kernel_test(batch: TritonKernelTestRequest.Batch, test: TestSubsystem) -> TestResult:
    return await run_workload_test(batch.single_element, test)


def rules():
    return [*collect_rules(), *TritonKernelTestRequest.rules()]
