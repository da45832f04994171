"""`pants test` of a triton_kernel_test: what sets it apart from the other workload test.

Its script (scripts/kernel_test.sh) compiles every kernel the workload launches for each gpu
target, then its judge (scripts/kernel_verdict.py) holds the report (report.json) against the
target's expected failures and `fail_on_spills`. The sandbox and the process are sandbox.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict

from pants.core.goals.test import TestRequest, TestResult, TestSubsystem
from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.workloads.sandbox import WorkloadKind, WorkloadTestFieldSet, WorkloadTest, WorkloadTestRun, WorkloadTestSubsystem
from rocm_build.workloads.source import WorkloadSource
from rocm_build.workloads.target_types import ExpectedFailuresField, FailOnSpillsField, WorkloadField
from rocm_build.workloads import sandbox


class TritonKernelTestSubsystem(WorkloadTestSubsystem):
    options_scope = "triton-kernels"
    name = "triton-kernels"
    help = "Compiling upstream Triton kernels for each gpu target without a GPU (`triton_kernel_test` targets)."


@dataclass(frozen=True)
class TritonKernelTestFieldSet(WorkloadTestFieldSet):
    required_fields = (WorkloadField, ExpectedFailuresField)
    # A large upstream's cases (flash-attention's: 28, ~100 s on one core) over up to 4 processes
    # where cores are idle; each process imports torch, triton and the upstream (~1 GB).
    kind = WorkloadKind("kernel_test.sh", "kernel_verdict.py", "report.json", "Compiling the Triton kernels", processes=4)

    expected_failures: ExpectedFailuresField
    fail_on_spills: FailOnSpillsField

    def expectations(self, source: WorkloadSource) -> Dict[str, Any]:
        return {"expected_failures": dict(self.expected_failures.value or {}), "fail_on_spills": self.fail_on_spills.value}


class TritonKernelTestRequest(TestRequest):
    tool_subsystem = TritonKernelTestSubsystem
    field_set_type = TritonKernelTestFieldSet


@rule(desc="Running a triton_kernel_test", level=LogLevel.DEBUG)
async def run_kernel_test(batch: TritonKernelTestRequest.Batch, test: TestSubsystem) -> TestResult:
    field_set = batch.single_element
    run = await Get(WorkloadTestRun, WorkloadTest.of(field_set, test))
    return run.test_result(field_set, test)


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        *TritonKernelTestRequest.rules(),
        *sandbox.rules(),
    ])
