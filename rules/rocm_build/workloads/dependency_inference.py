"""The edges of a workload test that Pants infers from fields users already write.

- its `source`: the upstream it reads (or the wheel it installs);
- what the plugin puts into its process and key (graph/edges.py's `PluginInputs`): the sandbox
  scripts and the config files that set its options;
- its `workload_modules`: the targets that own them. Pants reads a target's first sources field
  only (the `workload`), so a module is no source of the test that imports it; as Pants' own
  import inference does, the test depends on the module's owner (its nearest, as graph/edges.py
  finds a build input's: the `triton_kernel_test` whose `workload` it is, not the repository-wide
  `files` target that globs it too). An edit of the module then selects the test
  (`--changed-since --changed-dependents=transitive`), and `filedeps --transitive` reaches it.
  A module that no target owns is no edge, with graph/edges.py's warning naming the BUILD file.

(The kernels and choices tests' `dependencies` are the wheels of their venv; these inferred
edges are not: sandbox.py reads the declared ones only, declared.py.)
"""

from __future__ import annotations

from dataclasses import dataclass

from pants.engine.addresses import Addresses, UnparsedAddressInputs
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import (
    FieldSet,
    InferDependenciesRequest,
    InferredDependencies,
    SourcesPaths,
    SourcesPathsRequest,
)
from pants.engine.unions import UnionRule
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.graph.edges import InputFilesRequest, PluginInputs
from rocm_build.workloads.target_types import WorkloadField, WorkloadModulesField, WorkloadSourceField
from rocm_build.graph import edges


@dataclass(frozen=True)
class WorkloadEdgesFieldSet(FieldSet):
    required_fields = (WorkloadField,)

    source: WorkloadSourceField
    workload_modules: WorkloadModulesField  # a kernel test has none: the field's default, empty


class InferWorkloadEdges(InferDependenciesRequest):
    infer_from = WorkloadEdgesFieldSet


@rule(desc="Inferring the edges of a workload test")
async def infer_workload_edges(request: InferWorkloadEdges, plugin: PluginInputs) -> InferredDependencies:
    test = request.field_set.address
    source = request.field_set.source
    what = f"the `{source.alias}` field of {test.spec}"
    named, modules = await MultiGet(
        Get(Addresses, UnparsedAddressInputs([source.value] if source.value else [], owning_address=test, description_of_origin=what)),
        Get(SourcesPaths, SourcesPathsRequest(request.field_set.workload_modules)),
    )
    # Each module's nearest owner (a repository-wide `files` glob holding it too is farther).
    owners = await Get(Addresses, InputFilesRequest(test.spec, tuple(modules.files)))
    # And what the plugin puts into its process and key: the sandbox scripts, the config files.
    return InferredDependencies([*named, *(a for a in owners if a != test), *plugin.addresses])


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        UnionRule(InferDependenciesRequest, InferWorkloadEdges),
        *edges.rules(),
    ])
