"""The dependencies a BUILD file declares, without the inferred ones.

A `rocm_wheel`'s, `prebuilt_wheel`'s and `triton_kernel_test`'s `dependencies` say which wheels go
into a venv. Pants' `DependenciesRequest` also returns the edges graph/edges.py infers (source,
toolchain, locks, pin files), which are inputs of another kind: the rules that install wheels read
what the user wrote, with generators (`prebuilt_wheels`) standing for what they generate."""

from __future__ import annotations

from dataclasses import dataclass

from pants.engine.collection import Collection
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import Dependencies, DependenciesRequest, ExplicitlyProvidedDependencies, Target, Targets


@dataclass(frozen=True)
class DeclaredDependenciesRequest:
    field: Dependencies


class DeclaredDependencies(Collection[Target]):
    pass


@rule(desc="Reading the declared dependencies of a target")
async def declared_dependencies(request: DeclaredDependenciesRequest) -> DeclaredDependencies:
    explicit, resolved = await MultiGet(
        Get(ExplicitlyProvidedDependencies, DependenciesRequest(request.field)),
        Get(Targets, DependenciesRequest(request.field)),
    )
    # What Pants resolved (a parametrized sibling's variant, a generator's generated targets),
    # kept where the BUILD file named it: by address without parameters and generated names.
    # A `!address` the BUILD file wrote leaves that target out, also one a generator it names
    # generates (`!components/kernels:venv#kernels-setuptools`).
    named = {(a.spec_path, a.target_name) for a in explicit.includes if a not in explicit.ignores}
    return DeclaredDependencies(
        t for t in resolved if (t.address.spec_path, t.address.target_name) in named and t.address not in explicit.ignores
    )


def rules():
    return collect_rules()
