"""The dependencies a BUILD file declares, without the inferred ones.

A `rocm_wheel`'s, `prebuilt_wheel`'s and `triton_kernel_test`'s `dependencies` say which wheels go
into a venv. Pants' `DependenciesRequest` also returns the edges graph/edges.py infers (source,
toolchain, locks, pin files), which are inputs of another kind: the rules that install wheels read
what the user wrote, with generators (`prebuilt_wheels`) standing for what they generate."""

from __future__ import annotations

from dataclasses import dataclass

from pants.engine.addresses import Addresses
from pants.engine.collection import Collection
from pants.engine.rules import Get, collect_rules, rule
from pants.engine.target import Dependencies, DependenciesRequest, ExplicitlyProvidedDependencies, Target, Targets


@dataclass(frozen=True)
class DeclaredDependenciesRequest:
    field: Dependencies


class DeclaredDependencies(Collection[Target]):
    pass


@rule(desc="Reading the declared dependencies of a target")
async def declared_dependencies(request: DeclaredDependenciesRequest) -> DeclaredDependencies:
    explicit = await Get(ExplicitlyProvidedDependencies, DependenciesRequest(request.field))
    kept = [a for a in explicit.includes if a not in explicit.ignores]
    return DeclaredDependencies(await Get(Targets, Addresses(kept)))


def rules():
    return collect_rules()
