"""`pants test` of an upstream_choices_test: what sets it apart from the other workload test.

Its script (scripts/choices_test.sh) runs the workload, and the modules it imports, for each gpu
target; its judge (scripts/upstream_choices.py) holds each choice against `expected_choices` and
writes the report (choices.json), which names the patches the tree carries. The sandbox and the
process are sandbox.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Tuple

from pants.core.goals.test import TestRequest, TestResult, TestSubsystem
from pants.engine.rules import Get, collect_rules, rule
from pants.engine.target import SourcesField
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.workloads.sandbox import WorkloadKind, WorkloadTestFieldSet, WorkloadTest, WorkloadTestRun, WorkloadTestSubsystem
from rocm_build.workloads.source import WorkloadSource
from rocm_build.workloads.target_types import ExpectedChoicesField, WorkloadField, WorkloadModulesField
from rocm_build.workloads import sandbox


class UpstreamChoicesTestSubsystem(WorkloadTestSubsystem):
    options_scope = "upstream-choices"
    name = "upstream-choices"
    help = "Reading an upstream's run-time choices for each gpu target without a GPU (`upstream_choices_test` targets)."


@dataclass(frozen=True)
class UpstreamChoicesTestFieldSet(WorkloadTestFieldSet):
    required_fields = (WorkloadField, ExpectedChoicesField)
    kind = WorkloadKind("choices_test.sh", "upstream_choices.py", "choices.json", "Reading the run-time choices")

    workload_modules: WorkloadModulesField
    expected_choices: ExpectedChoicesField

    def modules(self) -> Tuple[SourcesField, ...]:
        return (self.workload_modules,)

    def expectations(self, source: WorkloadSource) -> Dict[str, Any]:
        return {"patches": list(source.patch_files), "expected_choices": dict(self.expected_choices.value or {})}


class UpstreamChoicesTestRequest(TestRequest):
    tool_subsystem = UpstreamChoicesTestSubsystem
    field_set_type = UpstreamChoicesTestFieldSet


@rule(desc="Running an upstream_choices_test", level=LogLevel.DEBUG)
async def run_choices_test(batch: UpstreamChoicesTestRequest.Batch, test: TestSubsystem) -> TestResult:
    field_set = batch.single_element
    run = await Get(WorkloadTestRun, WorkloadTest.of(field_set, test))
    return run.test_result(field_set, test)


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        *UpstreamChoicesTestRequest.rules(),
        *sandbox.rules(),
    ])
