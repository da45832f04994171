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

from rocm_build.errors import RocmBuildError


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
    named = {(a.spec_path, a.target_name) for a in explicit.includes if a not in explicit.ignores}
    # Pants drops a `!address` from what the field names, but not from what a named generator
    # generates: it would list `!components/kernels:venv#kernels-setuptools` in `dependencies`,
    # `peek` and `--changed-dependents` all the same, so the build would not be what Pants shows.
    for ignored in explicit.ignores:
        if ignored.is_generated_target and (ignored.spec_path, ignored.target_name) in named:
            generator = ignored.maybe_convert_to_target_generator().spec
            raise RocmBuildError(
                f"{request.field.address.spec}: `{request.field.alias}` names {generator} and leaves out "
                f"`!{ignored.spec}`, which {generator} generates: Pants still lists it as a dependency "
                f"(`pants dependencies`, `peek`, `--changed-dependents`). Depend on a generator of just the "
                f"wanted targets instead, e.g. beside {generator}: `prebuilt_wheels(name=\"...\", "
                f"pins=[\"<glob>\", \"!{ignored.generated_name}\"])` (components/kernels:build-venv)."
            )
    return DeclaredDependencies(t for t in resolved if (t.address.spec_path, t.address.target_name) in named)


def rules():
    return collect_rules()
