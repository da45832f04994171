"""The kinds of `source`: what a rocm_wheel builds from and what a workload test imports.

Two unions, one member per kind of target that can be a source, in the shape of
pants-backend-oci's image bundles (each kind a member, the consumer blind to which):

- `SourceFieldSet`: every kind (`upstream_repo`, `upstream_archive`, `prebuilt_wheel`, and
  `rocm_wheel`, whose member is in wheel/source_kind.py), each saying what it is before anything is
  read or fetched (`SourceDescription`): an upstream tree or wheels, the pin its locks are named
  by, the file its pin is read from. The graph (graph/edges.py) and the workload tests ask it;
  its `as_dependency` says how a rocm_wheel's `dependencies` take it (wheel/build_spec.py).
- `TreeSourceRequest`: the kinds that are an upstream tree to patch and build, each giving its
  `UpstreamSpec` (pin, ordered patches, how it is named) and its `UnpatchedUpstream` (the tree
  as a pack) by its own rules; upstream_repo.py resolves any of them the same way.

A new kind of source is a target type and its members here; no consumer changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Iterable, Type

from pants.engine.addresses import Address
from pants.engine.environment import EnvironmentName
from pants.engine.rules import Get, collect_rules, rule
from pants.engine.target import FieldSet, Target, WrappedTarget, WrappedTargetRequest
from pants.engine.unions import UnionMembership, UnionRule, union

from rocm_build.errors import RocmBuildError
from rocm_build.pins.tables import PREBUILT
from rocm_build.target_types_rules import TargetRequest
from rocm_build.upstream.target_types import (
    ArchivePinField,
    ArchivePinsFileField,
    ArchiveSha256Field,
    PinField,
    PinsFileField,
    PrebuiltPinField,
    PrebuiltWheelTarget,
    UpstreamArchiveTarget,
    UpstreamRepoTarget,
)


# What a kind is among a rocm_wheel's `dependencies` (wheel/build_spec.py): a wheel the chain
# builds (with the build's Python), prebuilt wheels (with those they pull in), or neither.
BUILT_WHEEL, PINNED_WHEELS, NOT_A_DEPENDENCY = "built", "pinned", ""


@union
@dataclass(frozen=True)
class SourceFieldSet(FieldSet):
    """A kind of source; `alias` is the target type it serves, for messages; `as_dependency`
    what it is in a rocm_wheel's `dependencies`."""

    alias: ClassVar[str]
    as_dependency: ClassVar[str] = NOT_A_DEPENDENCY


# Its members ask the engine for targets and files, which needs the environment in scope.
@union(in_scope_types=[EnvironmentName])
@dataclass(frozen=True)
class TreeSourceRequest(TargetRequest):
    """A kind of source that is an upstream tree, to patch and build: a member asks for its
    `UpstreamSpec`, which names the field it came from in its errors."""

    field_set_type: ClassVar[Type[SourceFieldSet]]


@dataclass(frozen=True)
class SourceDescription:
    """What a source is, from its fields alone (never an error: what is wrong in its pin is the
    build's to say, naming the field)."""

    address: Address
    alias: str  # its target type
    tree: bool  # an upstream tree (patched, built, importable at its root); else wheels to install
    pin: str = ""  # the name its locks are named by (`3rdparty/build/py3.12/<pin>.lock`)
    pins_file: str = ""  # where its pin is read, "" where its BUILD file holds it
    pin_table: str = ""  # the pin's table there


class SourceRequest(TargetRequest):
    """The source a field names, and which field (for messages)."""


def source_kind(kinds: Iterable[Type[SourceFieldSet]], target: Target, description_of_origin: str) -> SourceFieldSet:
    """The kind of source that serves `target`, made from it; else an error naming the kinds
    that are a source where it was named."""
    kinds = list(kinds)
    for kind in kinds:
        if kind.is_applicable(target):
            return kind.create(target)
    names = " or ".join(f"{'an' if k.alias[0] in 'aeiou' else 'a'} `{k.alias}`" for k in kinds)
    raise RocmBuildError(f"{description_of_origin} names {target.address.spec}, a `{target.alias}`; it must be {names} target")


def as_dependency(kinds: Iterable[Type[SourceFieldSet]], target: Target) -> str:
    """What `target` is in a rocm_wheel's `dependencies`, by its kind; other targets are none."""
    return next((k.as_dependency for k in kinds if k.is_applicable(target)), NOT_A_DEPENDENCY)


@rule(desc="Reading what kind of source a target is")
async def describe_source(request: SourceRequest, union_membership: UnionMembership) -> SourceDescription:
    wrapped = await Get(WrappedTarget, WrappedTargetRequest(request.address, request.description_of_origin))
    kind = source_kind(union_membership.get(SourceFieldSet), wrapped.target, request.description_of_origin)
    return await Get(SourceDescription, SourceFieldSet, kind)


# ------------------------------------------------------------------------------ the kinds here


@dataclass(frozen=True)
class UpstreamRepoSource(SourceFieldSet):
    alias = UpstreamRepoTarget.alias
    required_fields = (PinField, PinsFileField)

    pin: PinField
    pins_file: PinsFileField


@dataclass(frozen=True)
class UpstreamArchiveSource(SourceFieldSet):
    alias = UpstreamArchiveTarget.alias
    required_fields = (ArchiveSha256Field, ArchivePinField, ArchivePinsFileField)

    pin: ArchivePinField
    pins_file: ArchivePinsFileField


@dataclass(frozen=True)
class PrebuiltWheelSource(SourceFieldSet):
    alias = PrebuiltWheelTarget.alias
    as_dependency = PINNED_WHEELS
    required_fields = (PrebuiltPinField, PinsFileField)

    pin: PrebuiltPinField
    pins_file: PinsFileField


@rule
async def describe_upstream_repo(fs: UpstreamRepoSource) -> SourceDescription:
    return SourceDescription(fs.address, fs.alias, True, fs.pin.value, fs.pins_file.value, fs.pin.value)


@rule
async def describe_upstream_archive(fs: UpstreamArchiveSource) -> SourceDescription:
    # Named by its `pin` where a pins file holds it, else by the target (url and sha256 in BUILD).
    pin = fs.pin.value
    return SourceDescription(fs.address, fs.alias, True, pin or fs.address.target_name, fs.pins_file.value if pin else "", pin or "")


@rule
async def describe_prebuilt_wheel(fs: PrebuiltWheelSource) -> SourceDescription:
    return SourceDescription(fs.address, fs.alias, False, "", fs.pins_file.value, f"{PREBUILT}.{fs.pin.value}")


def rules():
    return [
        *collect_rules(),
        UnionRule(SourceFieldSet, UpstreamRepoSource),
        UnionRule(SourceFieldSet, UpstreamArchiveSource),
        UnionRule(SourceFieldSet, PrebuiltWheelSource),
    ]
