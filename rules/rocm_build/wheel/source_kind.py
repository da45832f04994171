"""A rocm_wheel as a source (upstream/sources.py): a workload test imports its built wheel and
the wheels below it."""

from __future__ import annotations

from dataclasses import dataclass

from pants.engine.rules import collect_rules, rule
from pants.engine.unions import UnionRule

from rocm_build.upstream.sources import BUILT_WHEEL, SourceDescription, SourceFieldSet
from rocm_build.wheel.target_types import RocmWheelTarget, WheelSourceField, WheelToolchainField


@dataclass(frozen=True)
class RocmWheelSource(SourceFieldSet):
    alias = RocmWheelTarget.alias
    as_dependency = BUILT_WHEEL
    required_fields = (WheelSourceField, WheelToolchainField)


@rule
async def describe_rocm_wheel(fs: RocmWheelSource) -> SourceDescription:
    return SourceDescription(fs.address, fs.alias, tree=False)


def rules():
    return [*collect_rules(), UnionRule(SourceFieldSet, RocmWheelSource)]
