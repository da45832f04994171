"""The wheels of a workload test's venv: what its `dependencies` (and a wheel `source`) name.

They name `rocm_wheel` targets (the wheel and the wheels below it), `prebuilt_wheel` targets,
`target`s that group them and `prebuilt_wheels` that generate them (components/kernels:venv).
One request stands for one address; the rule asks for its own product for every address below
it in one MultiGet, so the engine gathers the branches concurrently and memoizes each branch (a
group that several tests' venvs share is gathered once). The engine refuses a cycle only when a
request asks for itself, which a BUILD file cannot write: Pants refuses cyclic dependencies first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List

from pants.core.target_types import GenericTarget
from pants.engine.addresses import Addresses
from pants.engine.fs import Digest, MergeDigests
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import Dependencies, DependenciesRequest, Targets
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.errors import RocmBuildError
from rocm_build.target_types_rules import TargetRequest
from rocm_build.upstream.prebuilt import FetchedPrebuilt, PrebuiltRequest
from rocm_build.upstream.target_types import PrebuiltWheelTarget
from rocm_build.prepare.inputs import BuiltRocmWheel
from rocm_build.wheel.build_spec import WheelRequest
from rocm_build.wheel.target_types import RocmWheelTarget
from rocm_build.build import build as wheel_build
from rocm_build.upstream import prebuilt as upstream_prebuilt
from rocm_build import declared


class VenvWheelsRequest(TargetRequest):
    """The wheel files one address stands for in a test's venv; `description_of_origin` says
    what named it (errors name it)."""


@dataclass(frozen=True)
class VenvWheels:
    digest: Digest  # the wheel files, at the root


@rule(desc="Gathering the wheels of a test's venv", level=LogLevel.DEBUG)
async def venv_wheels(request: VenvWheelsRequest) -> VenvWheels:
    what = request.description_of_origin
    # `Targets` stands a generator (prebuilt_wheels) in for what it generates.
    targets = await Get(Targets, Addresses([request.address]))
    below: List[VenvWheelsRequest] = []
    files: List[Digest] = []
    if [t.address for t in targets] != [request.address]:
        below = [VenvWheelsRequest(t.address, what) for t in targets]
    elif isinstance(targets[0], GenericTarget):
        group = targets[0]
        members = await Get(Targets, DependenciesRequest(group[Dependencies]))
        below = [VenvWheelsRequest(t.address, f"the `dependencies` of {group.address.spec}") for t in members]
    elif isinstance(targets[0], PrebuiltWheelTarget):
        files = [(await Get(FetchedPrebuilt, PrebuiltRequest(request.address, what))).wheel]
    elif isinstance(targets[0], RocmWheelTarget):
        built = await Get(BuiltRocmWheel, WheelRequest(request.address))
        if built.error:
            raise RocmBuildError(f"{what} names the wheel {request.address.spec}, which did not build: {built.error}")
        files = [w.wheel for w in built.closure]
    else:
        raise RocmBuildError(
            f"{what} names {request.address.spec}, a `{targets[0].alias}`; the test's venv takes wheels: "
            f"`{RocmWheelTarget.alias}` or `{PrebuiltWheelTarget.alias}` targets (or a `target` grouping them)"
        )
    gathered = await MultiGet(Get(VenvWheels, VenvWheelsRequest, each) for each in below)
    return VenvWheels(await Get(Digest, MergeDigests([*files, *(g.digest for g in gathered)])))


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        *wheel_build.rules(),
        *upstream_prebuilt.rules(),
        *declared.rules(),
    ])
