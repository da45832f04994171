"""upstream_repo: pin + fetch + patch sets -> a patched tree; `package` writes it to dist/.

The same requests resolve an upstream_archive a rocm_wheel names as its `source` (a release
sdist): its tree packed as one commit (archive_source.py), then patched the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple, Union

from pants.core.goals.package import BuiltPackage, BuiltPackageArtifact, PackageFieldSet
from pants.core.util_rules.archive import CreateArchive
from pants.core.util_rules.system_binaries import ArchiveFormat
from pants.engine.addresses import Address
from pants.engine.fs import AddPrefix, Digest, RemovePrefix, Snapshot
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import WrappedTarget, WrappedTargetRequest
from pants.engine.unions import UnionMembership, UnionRule
from pants.core.util_rules import archive as pants_archive
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.errors import RocmBuildError
from rocm_build.upstream.patching import OrderedPatches, PatchedTree, PatchFile, PatchRequest, PatchSetsRequest
from rocm_build.upstream.pins import Pin, PinsError, lookup_pin
from rocm_build.upstream.pins_file import load_pins
from rocm_build.upstream.source_tree import MergedTree, MergedTreeRequest, SourceTree
from rocm_build.upstream.fetch import TREE_DIR, FetchedTree, FetchRequest
from rocm_build.upstream.archive_source import ArchivePackRequest, ArchiveSourcePin
from rocm_build.upstream.archives import ArchiveRequest, ArchiveSpec
from rocm_build.upstream.sources import TreeSourceRequest, UpstreamArchiveSource, UpstreamRepoSource, source_kind
from rocm_build.upstream.target_types import (
    ArchivePinField,
    ArchivePinsFileField,
    PatchSetsField,
    PinField,
    PinsFileField,
    UpstreamArchiveTarget,
    UpstreamRepoTarget,
)
from rocm_build.target_types_rules import TargetRequest, expect_target
from rocm_build.upstream import archive_source, fetch, patching, source_tree
from rocm_build.upstream import archives as upstream_archives


@dataclass(frozen=True)
class UpstreamRequest(TargetRequest):
    """An upstream_repo, or an upstream_archive as a source: its spec (`UpstreamSpec`), or its
    patched tree (`ResolvedUpstream`)."""


@dataclass(frozen=True)
class ResolvedUpstream:
    address: Address
    pin_name: str
    pin: Union[Pin, ArchiveSourcePin]
    patches: Tuple[PatchFile, ...]
    source: SourceTree  # the patched tree, as the fetched pack and the files the patches wrote
    patch_log: str
    commit_time: int  # of the pinned commit: the builds' SOURCE_DATE_EPOCH


@dataclass(frozen=True)
class UpstreamSpec:
    """What an upstream_repo asks for, before anything is fetched: pin and ordered patches."""

    address: Address
    pin_name: str
    pin: Union[Pin, ArchiveSourcePin]
    pins_file: str
    patches: Tuple[PatchFile, ...]  # in the order they apply
    patch_digest: Digest

    @property
    def is_archive(self) -> bool:
        return isinstance(self.pin, ArchiveSourcePin)


@rule
async def resolve_upstream_spec(request: UpstreamRequest, union_membership: UnionMembership) -> UpstreamSpec:
    """Any kind of source that is an upstream tree (sources.py), the same way."""
    wrapped = await Get(WrappedTarget, WrappedTargetRequest(request.address, request.description_of_origin))
    members = {m.field_set_type: m for m in union_membership.get(TreeSourceRequest)}
    kind = source_kind(members, wrapped.target, request.description_of_origin)
    return await Get(UpstreamSpec, TreeSourceRequest, members[type(kind)](request.address, request.description_of_origin))


class RepoSpecRequest(TreeSourceRequest):
    field_set_type = UpstreamRepoSource


class ArchiveSourceSpecRequest(TreeSourceRequest):
    field_set_type = UpstreamArchiveSource


@rule
async def upstream_repo_spec(request: RepoSpecRequest) -> UpstreamSpec:
    target = await expect_target(request.address, UpstreamRepoTarget, request.description_of_origin)
    owner = target.address.spec
    pins_file = target[PinsFileField].value
    loaded = await load_pins(pins_file, owner)
    pin_name = target[PinField].value
    try:
        pin = lookup_pin(dict(loaded.pins), pin_name, pins_file, owner)
    except PinsError as e:
        raise RocmBuildError(str(e)) from None

    patches = await Get(OrderedPatches, PatchSetsRequest(tuple(target[PatchSetsField].value or ()), target.address))
    return UpstreamSpec(
        address=target.address,
        pin_name=pin_name,
        pin=pin,
        pins_file=pins_file,
        patches=patches.files,
        patch_digest=patches.digest,
    )


@rule
async def upstream_archive_spec(request: ArchiveSourceSpecRequest) -> UpstreamSpec:
    """An upstream_archive as a source: its pin (URL and sha256) and its patch sets."""
    archive = await Get(ArchiveSpec, ArchiveRequest(request.address, request.description_of_origin))
    target = await expect_target(request.address, UpstreamArchiveTarget, request.description_of_origin)
    patches = await Get(OrderedPatches, PatchSetsRequest(tuple(target[PatchSetsField].value or ()), target.address))
    return UpstreamSpec(
        address=target.address,
        pin_name=target[ArchivePinField].value or target.address.target_name,
        pin=ArchiveSourcePin(archive.url, archive.sha256, version=archive.version),
        pins_file=target[ArchivePinsFileField].value if target[ArchivePinField].value else "",
        patches=patches.files,
        patch_digest=patches.digest,
    )


@dataclass(frozen=True)
class UnpatchedUpstream:
    """Any tree kind's source, unpatched, as a pack: the fetched commit, or the packed archive.
    (Its own type, not a FetchedTree: a rule whose request is in scope and that also returned a
    FetchedTree would make each Get of one below it ambiguous.)"""

    fetched: FetchedTree


@rule
async def fetch_upstream_source(request: UpstreamRequest) -> UnpatchedUpstream:
    spec = await Get(UpstreamSpec, UpstreamRequest, request)
    if spec.is_archive:
        return UnpatchedUpstream(await Get(FetchedTree, ArchivePackRequest(request.address, request.description_of_origin)))
    fetched = await Get(
        FetchedTree,
        FetchRequest(
            url=spec.pin.url,
            commit=spec.pin.commit,
            submodules=spec.pin.submodules,
            pin_name=spec.pin_name,
            pins_file=spec.pins_file,
            owner=spec.address.spec,
        ),
    )
    return UnpatchedUpstream(fetched)


@rule
async def resolve_upstream(request: UpstreamRequest) -> ResolvedUpstream:
    spec, unpatched = await MultiGet(Get(UpstreamSpec, UpstreamRequest, request), Get(UnpatchedUpstream, UpstreamRequest, request))
    fetched = unpatched.fetched
    owner = spec.address.spec
    patched = await Get(
        PatchedTree,
        PatchRequest(
            pack=fetched.pack,
            patch_files=tuple(p.path for p in spec.patches),
            patches=spec.patch_digest,
            owner=owner,
        ),
    )
    return ResolvedUpstream(
        address=spec.address,
        pin_name=spec.pin_name,
        pin=spec.pin,
        patches=spec.patches,
        source=patched.source,
        patch_log=patched.log,
        commit_time=fetched.commit_time,
    )


@dataclass(frozen=True)
class UpstreamRepoFieldSet(PackageFieldSet):
    required_fields = (PinField,)

    pin: PinField


@rule
async def package_upstream_repo(field_set: UpstreamRepoFieldSet) -> BuiltPackage:
    upstream = await Get(
        ResolvedUpstream, UpstreamRequest(field_set.address, "the `package` goal")
    )
    top = f"{upstream.pin_name}-{upstream.pin.commit[:12]}-patched"
    merged = await Get(MergedTree, MergedTreeRequest(upstream.source, field_set.address.spec))
    tree = await Get(Digest, RemovePrefix(merged.digest, TREE_DIR))
    snapshot = await Get(Snapshot, AddPrefix(tree, top))
    output = f"{field_set.address.spec_path.replace('/', '.') or 'root'}/{top}.tar.gz"
    archive = await Get(Digest, CreateArchive(snapshot, output, ArchiveFormat.TGZ))
    return BuiltPackage(archive, (BuiltPackageArtifact(output),))


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        UnionRule(PackageFieldSet, UpstreamRepoFieldSet),
        UnionRule(TreeSourceRequest, RepoSpecRequest),
        UnionRule(TreeSourceRequest, ArchiveSourceSpecRequest),
        *pants_archive.rules(),
        *archive_source.rules(),
        *upstream_archives.rules(),
        *fetch.rules(),
        *patching.rules(),
        *source_tree.rules(),
    ])
