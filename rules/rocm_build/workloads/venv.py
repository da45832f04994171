"""The wheels of a workload test's venv: what its `dependencies` (and a wheel `source`) name.

They name `rocm_wheel` targets (the wheel and the wheels below it), `prebuilt_wheel` targets,
`target`s that group them and `prebuilt_wheels` that generate them (components/kernels:venv).
Each kind is a member of `VenvWheelsKind` with its rule, so a new kind is a member and the
gathering rule does not change.
One request stands for one address; the rule asks for its own product for every address below
it in one MultiGet, so the engine gathers the branches concurrently and memoizes each branch (a
group that several tests' venvs share is gathered once). The engine refuses a cycle only when a
request asks for itself, which a BUILD file cannot write: Pants refuses cyclic dependencies first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pants.core.target_types import GenericTarget
from pants.engine.addresses import Addresses
from pants.engine.environment import EnvironmentName
from pants.engine.fs import Digest, MergeDigests
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import Dependencies, DependenciesRequest, Target, Targets, WrappedTarget, WrappedTargetRequest
from pants.engine.unions import UnionMembership, UnionRule, union
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build import declared
from rocm_build.build import build as wheel_build
from rocm_build.errors import RocmBuildError
from rocm_build.prebuilt import wheel_rules as prebuilt_rules
from rocm_build.prebuilt.wheel_rules import FetchedPrebuilt, PrebuiltRequest
from rocm_build.prepare.inputs import BuiltRocmWheel
from rocm_build.target_types_rules import TargetRequest
from rocm_build.upstream.sources import PrebuiltWheelSource
from rocm_build.upstream.target_types import PrebuiltWheelTarget
from rocm_build.wheel.build_spec import WheelRequest
from rocm_build.wheel.source_kind import RocmWheelSource
from rocm_build.wheel.target_types import RocmWheelTarget


class VenvWheelsRequest(TargetRequest):
    """The wheel files one address stands for in a test's venv; `description_of_origin` says
    what named it (errors name it)."""


@dataclass(frozen=True)
class VenvWheels:
    digest: Digest  # the wheel files, at the root


# Its members ask for targets, built wheels and fetched files, which needs the environment in scope.
@union(in_scope_types=[EnvironmentName])
class VenvWheelsKind(TargetRequest):
    """A kind of target a test's venv takes, a member each: its rule gives the target's `VenvWheels`.
    `alias` names the kind in messages; `takes` says whether a target is of this kind."""

    alias: ClassVar[str]
    groups: ClassVar[bool] = False  # it stands for other targets, not wheels (messages say so)

    @classmethod
    def takes(cls, target: Target) -> bool:
        raise NotImplementedError


@rule(desc="Gathering the wheels of a test's venv", level=LogLevel.DEBUG)
async def venv_wheels(request: VenvWheelsRequest, union_membership: UnionMembership) -> VenvWheels:
    what = request.description_of_origin
    # `Targets` stands a generator (prebuilt_wheels) in for what it generates.
    targets = await Get(Targets, Addresses([request.address]))
    if [t.address for t in targets] != [request.address]:
        gathered = await MultiGet(Get(VenvWheels, VenvWheelsRequest(t.address, what)) for t in targets)
        return VenvWheels(await Get(Digest, MergeDigests(g.digest for g in gathered)))
    kinds = union_membership.get(VenvWheelsKind)
    kind = next((k for k in kinds if k.takes(targets[0])), None)
    if kind is None:
        wheels = " or ".join(f"`{k.alias}`" for k in kinds if not k.groups)
        groups = " or ".join(f"`{k.alias}`" for k in kinds if k.groups)
        raise RocmBuildError(
            f"{what} names {request.address.spec}, a `{targets[0].alias}`; the test's venv takes wheels: "
            f"{wheels} targets (or a {groups} grouping them)"
        )
    return await Get(VenvWheels, VenvWheelsKind, kind(request.address, what))


# ------------------------------------------------------------------------------ the kinds here


class WheelGroup(VenvWheelsKind):
    alias = GenericTarget.alias
    groups = True

    @classmethod
    def takes(cls, target: Target) -> bool:
        return isinstance(target, GenericTarget)


class PrebuiltVenvWheel(VenvWheelsKind):
    alias = PrebuiltWheelTarget.alias

    @classmethod
    def takes(cls, target: Target) -> bool:
        return PrebuiltWheelSource.is_applicable(target)


class BuiltVenvWheel(VenvWheelsKind):
    alias = RocmWheelTarget.alias

    @classmethod
    def takes(cls, target: Target) -> bool:
        return RocmWheelSource.is_applicable(target)


@rule(desc="Gathering the wheels of a group", level=LogLevel.DEBUG)
async def group_venv_wheels(request: WheelGroup) -> VenvWheels:
    group = await Get(WrappedTarget, WrappedTargetRequest(request.address, request.description_of_origin))
    members = await Get(Targets, DependenciesRequest(group.target[Dependencies]))
    what = f"the `dependencies` of {request.address.spec}"
    gathered = await MultiGet(Get(VenvWheels, VenvWheelsRequest(t.address, what)) for t in members)
    return VenvWheels(await Get(Digest, MergeDigests(g.digest for g in gathered)))


@rule(desc="Fetching a prebuilt wheel for a test's venv", level=LogLevel.DEBUG)
async def prebuilt_venv_wheel(request: PrebuiltVenvWheel) -> VenvWheels:
    fetched = await Get(FetchedPrebuilt, PrebuiltRequest(request.address, request.description_of_origin))
    return VenvWheels(fetched.wheel)


@rule(desc="Building a wheel for a test's venv", level=LogLevel.DEBUG)
async def built_venv_wheels(request: BuiltVenvWheel) -> VenvWheels:
    built = await Get(BuiltRocmWheel, WheelRequest(request.address))
    if built.error:
        raise RocmBuildError(f"{request.description_of_origin} names the wheel {request.address.spec}, which did not build: {built.error}")
    # The wheel with the wheels below it.
    return VenvWheels(await Get(Digest, MergeDigests(w.wheel for w in built.closure)))


def kinds():
    """The kinds above as members (in the order messages name them)."""
    return [UnionRule(VenvWheelsKind, BuiltVenvWheel), UnionRule(VenvWheelsKind, PrebuiltVenvWheel), UnionRule(VenvWheelsKind, WheelGroup)]


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        *kinds(),
        *wheel_build.rules(),
        *prebuilt_rules.rules(),
        *declared.rules(),
    ])
