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
from rocm_build.pins.load import load_pins
from rocm_build.pins.tables import Pin, PinsError, lookup_pin
from rocm_build.upstream.archive_source import ArchivePackRequest, ArchiveSourcePin
from rocm_build.upstream.archives import ArchiveRequest, ArchiveSpec
from rocm_build.upstream.fetch import TREE_DIR, FetchedTree, FetchRequest
from rocm_build.upstream.patching import OrderedPatches, PatchedTree, PatchFile, PatchRequest, PatchSetsRequest
from rocm_build.upstream.source_tree import MergedTree, MergedTreeRequest, SourceTree
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
    identity_key: str = "commit"  # UpstreamSpec's: "sha256" for an archive


@dataclass(frozen=True)
class UpstreamSpec:
    """What an upstream_repo asks for, before anything is fetched: pin and ordered patches."""

    address: Address
    pin_name: str
    pin: Union[Pin, ArchiveSourcePin]
    pins_file: str
    patches: Tuple[PatchFile, ...]  # in the order they apply
    patch_digest: Digest
    # Said by its kind, so no reader asks which kind it is: how messages name what is pinned
    # ("vllm @ 0e60e39473e8", an archive's URL and sha256), and the key a build info records
    # the pin's identity under ("commit"; "sha256" for an archive).
    pinned: str = ""
    identity_key: str = "commit"


async def tree_source_request(request: UpstreamRequest, union_membership: UnionMembership) -> TreeSourceRequest:
    """The member of `TreeSourceRequest` for the kind of the target `request` names."""
    wrapped = await Get(WrappedTarget, WrappedTargetRequest(request.address, request.description_of_origin))
    members = union_membership.get(TreeSourceRequest)
    source_kind([m.field_set_type for m in members], wrapped.target, request.description_of_origin)  # else it says what fits
    member = next(m for m in members if m.field_set_type.is_applicable(wrapped.target))
    return member(request.address, request.description_of_origin)


@rule
async def resolve_upstream_spec(request: UpstreamRequest, union_membership: UnionMembership) -> UpstreamSpec:
    """Any kind of source that is an upstream tree (sources.py), the same way."""
    return await Get(UpstreamSpec, TreeSourceRequest, await tree_source_request(request, union_membership))

@dataclass(frozen=True)
class UnpatchedUpstream:
    """Any tree kind's source, unpatched, as a pack: the fetched commit, or the packed archive.
    (Its own type, not a FetchedTree: a rule whose request is in scope and that also returned a
    FetchedTree would make each Get of one below it ambiguous.)"""

    fetched: FetchedTree


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
        pinned=f"{pin_name} @ {pin.commit[:12]}",
    )


@rule
async def upstream_repo_source(request: RepoSpecRequest) -> UnpatchedUpstream:
    spec = await Get(UpstreamSpec, RepoSpecRequest, request)
    fetch_request = FetchRequest(
        url=spec.pin.url,
        commit=spec.pin.commit,
        submodules=spec.pin.submodules,
        pin_name=spec.pin_name,
        pins_file=spec.pins_file,
        owner=spec.address.spec,
    )
    return UnpatchedUpstream(await Get(FetchedTree, FetchRequest, fetch_request))


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
        pinned=f"{archive.url} sha256 {archive.sha256[:12]}",
        identity_key="sha256",
    )


@rule
async def upstream_archive_source(request: ArchiveSourceSpecRequest) -> UnpatchedUpstream:
    return UnpatchedUpstream(await Get(FetchedTree, ArchivePackRequest(request.address, request.description_of_origin)))



@rule
async def fetch_upstream_source(request: UpstreamRequest, union_membership: UnionMembership) -> UnpatchedUpstream:
    """Any tree kind's source, unpatched, by its kind's own rule (a fetched commit, a packed archive)."""
    return await Get(UnpatchedUpstream, TreeSourceRequest, await tree_source_request(request, union_membership))


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
        identity_key=spec.identity_key,
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
