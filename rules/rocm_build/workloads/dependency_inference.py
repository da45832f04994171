"""The edges of a workload test that Pants infers from fields users already write.

- its `source`: the upstream it reads (or the wheel it installs);
- its `workload_modules`: the targets that own them. Pants reads a target's first sources field
  only (the `workload`), so a module is no source of the test that imports it; as Pants' own
  import inference does, the test depends on the module's owner (its nearest, as graph/edges.py
  finds a build input's: the `triton_kernel_test` whose `workload` it is, not the repository-wide
  `files` target that globs it too). An edit of the module then selects the test
  (`--changed-since --changed-dependents=transitive`), and `filedeps --transitive` reaches it.
  A module that no target owns is no edge, with graph/edges.py's warning naming the BUILD file.

(The kernels and choices tests' `dependencies` are the wheels of their venv; these inferred
edges are not: venv.py reads the declared ones only.)
"""

from __future__ import annotations

from dataclasses import dataclass

from pants.engine.addresses import Addresses, UnparsedAddressInputs
from pants.engine.rules import Get, collect_rules, rule
from pants.engine.target import (
    FieldSet,
    InferDependenciesRequest,
    InferredDependencies,
    SourcesPaths,
    SourcesPathsRequest,
)
from pants.engine.unions import UnionRule

from rocm_build.graph.edges import InputFilesRequest
from rocm_build.workloads.target_types import WorkloadModulesField, WorkloadSourceField


@dataclass(frozen=True)
class WorkloadSourceFieldSet(FieldSet):
    required_fields = (WorkloadSourceField,)

    source: WorkloadSourceField


class InferWorkloadSource(InferDependenciesRequest):
    infer_from = WorkloadSourceFieldSet


@rule(desc="Inferring the source of a workload test")
async def infer_workload_source(request: InferWorkloadSource) -> InferredDependencies:
    field = request.field_set.source
    if not field.value:
        return InferredDependencies([])
    what = f"the `{field.alias}` field of {field.address.spec}"
    return InferredDependencies(
        await Get(Addresses, UnparsedAddressInputs([field.value], owning_address=field.address, description_of_origin=what))
    )


@dataclass(frozen=True)
class WorkloadModulesFieldSet(FieldSet):
    required_fields = (WorkloadModulesField,)

    workload_modules: WorkloadModulesField


class InferWorkloadModules(InferDependenciesRequest):
    infer_from = WorkloadModulesFieldSet


@rule(desc="Inferring the owners of a workload's modules")
async def infer_workload_modules(request: InferWorkloadModules) -> InferredDependencies:
    test = request.field_set.address
    paths = await Get(SourcesPaths, SourcesPathsRequest(request.field_set.workload_modules))
    # Each module's nearest owner (a repository-wide `files` glob holding it too is farther).
    owners = await Get(Addresses, InputFilesRequest(test, tuple(paths.files)))
    return InferredDependencies(a for a in owners if a != test)


def rules():
    return [
        *collect_rules(),
        UnionRule(InferDependenciesRequest, InferWorkloadSource),
        UnionRule(InferDependenciesRequest, InferWorkloadModules),
    ]
