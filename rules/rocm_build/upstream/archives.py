"""upstream_archive: a pinned archive, downloaded once, verified by sha256, unpacked, patched.

The download is the only step that touches the network. Its result is a tree digest, so
whatever uses it is keyed by the archive's content, never by the URL it came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Tuple

from pants.engine.addresses import Address
from pants.engine.fs import (
    EMPTY_DIGEST,
    Digest,
    DigestContents,
    DigestSubset,
    PathGlobs,
    RemovePrefix,
)
from pants.engine.process import FallibleProcessResult, Process
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.errors import RocmBuildError, indent, tail
from rocm_build.pins.archive_pins import parse_archive_pins
from rocm_build.scripts import fetch_archive as FETCH_ARCHIVE  # its exit codes say why a download failed; it unpacks into OUT
from rocm_build.upstream.target_types import (
    ArchiveMirrorsField,
    ArchivePinField,
    ArchivePinsFileField,
    ArchiveSha256Field,
    ArchiveStripPrefixField,
    ArchiveUrlField,
    PatchSetsField,
    UpstreamArchiveTarget,
)
from rocm_build.pins.load import load_pins
from rocm_build.pins.tables import SHA256
from rocm_build.target_types_rules import TargetRequest, expect_target
from rocm_build.upstream import download, patching
from rocm_build.upstream.download import DownloadProcess
from rocm_build.upstream.patching import OrderedPatches, PatchedDigest, PatchFile, PatchSetsRequest, TreePatchRequest


@dataclass(frozen=True)
class ArchiveRequest(TargetRequest):
    """An upstream_archive: what it pins (`ArchiveSpec`), its unpacked tree as downloaded
    (`UnpackedArchive`), or patched (`FetchedArchive`)."""


@dataclass(frozen=True)
class FetchedArchive:
    address: Address
    url: str
    sha256: str
    tree: Digest  # the unpacked archive with its patches applied, at the digest root
    patches: Tuple[PatchFile, ...] = ()
    patch_log: str = ""


@dataclass(frozen=True)
class ArchiveSpec:
    """What an upstream_archive pins, from its fields or its table in the archive pins file."""

    address: Address
    url: str
    mirrors: Tuple[str, ...]
    sha256: str
    strip_prefix: str
    pinned_in: str  # where to change it: "the target" or "[name] in <file>"
    version: Optional[str] = None  # the release it is, where its pins table says (an sdist's)


@rule(desc="Reading an upstream_archive")
async def archive_spec(request: ArchiveRequest) -> ArchiveSpec:
    target = await expect_target(request.address, UpstreamArchiveTarget, request.description_of_origin)
    owner, mirrors = target.address.spec, tuple(target[ArchiveMirrorsField].value or ())
    pin, path = target[ArchivePinField].value, target[ArchivePinsFileField].value
    if not pin:
        if not target[ArchiveUrlField].value:
            raise RocmBuildError(f"upstream_archive {owner}: set `url` and `sha256`, or `pin`")
        return ArchiveSpec(
            target.address, target[ArchiveUrlField].value, mirrors, (target[ArchiveSha256Field].value or "").strip(),
            target[ArchiveStripPrefixField].value or "", f"the `sha256` field of {owner}",
        )  # fmt: skip
    tables = dict((await load_pins(path, owner, parse_archive_pins)).pins)
    if pin not in tables:
        raise RocmBuildError(f"upstream_archive {owner}: no table [{pin}] in {path}")
    table = tables[pin]
    return ArchiveSpec(target.address, table.url, mirrors, table.sha256, table.strip_prefix, f"[{pin}] in {path}", table.version)


def pin_problem(spec: ArchiveSpec) -> Optional[str]:
    """Why the archive cannot be fetched as pinned, without downloading anything."""
    owner = spec.address.spec
    if not spec.sha256:
        where = f"Where {spec.url} is reachable, check" if spec.url else "Find its URL and check"
        return (
            f"upstream_archive {owner} is not resolved: it has no sha256 ({spec.pinned_in}). {where} "
            f"the archive and put its `sha256sum` there (never guess one); for an archive pin, "
            f"`pants run rules:update-pins` does it where the upstreams are reachable."
        )
    if not SHA256.match(spec.sha256):
        return f"upstream_archive {owner}: `sha256` {spec.sha256!r} ({spec.pinned_in}) is not 64 lowercase hex digits"
    return None


@dataclass(frozen=True)
class UnpackRequest:
    """scripts/fetch_archive.py as a download process: the first URL that gives the bytes of
    `sha256`, unpacked below `strip_prefix` (upstream archives, and the crates of a Cargo.lock)."""

    sha256: str
    strip_prefix: str
    urls: Tuple[str, ...]
    description: str


@dataclass(frozen=True)
class Unpacked:
    exit_code: int  # fetch_archive.py's: 0, or why it failed (EXIT_MISMATCH, EXIT_DOWNLOAD, EXIT_UNPACK)
    said: str
    tree: Digest
    newest_mtime: int = 0  # of the members unpacked: the archive's date


@rule
async def fetch_and_unpack(request: UnpackRequest) -> Unpacked:
    process = await Get(
        Process,
        DownloadProcess(
            "fetch_archive.py",
            (request.sha256, request.strip_prefix, *request.urls),
            request.description,
            output_directories=(FETCH_ARCHIVE.OUT,),
            output_files=(FETCH_ARCHIVE.NEWEST,),
        ),
    )
    result = await Get(FallibleProcessResult, Process, process)
    said = result.stderr.decode(errors="replace")
    if result.exit_code != 0:
        return Unpacked(result.exit_code, said, EMPTY_DIGEST)
    unpacked, newest = await MultiGet(
        Get(Digest, DigestSubset(result.output_digest, PathGlobs([f"{FETCH_ARCHIVE.OUT}/**"]))),
        Get(DigestContents, DigestSubset(result.output_digest, PathGlobs([FETCH_ARCHIVE.NEWEST]))),
    )
    tree = await Get(Digest, RemovePrefix(unpacked, FETCH_ARCHIVE.OUT))
    return Unpacked(result.exit_code, said, tree, int(newest[0].content))


@dataclass(frozen=True)
class UnpackedArchive:
    spec: ArchiveSpec
    tree: Digest  # as downloaded: no patch applied
    newest_mtime: int


@rule(desc="Fetching an upstream_archive")
async def unpack_archive(request: ArchiveRequest) -> UnpackedArchive:
    spec = await Get(ArchiveSpec, ArchiveRequest, request)
    problem = pin_problem(spec)
    if problem:
        raise RocmBuildError(problem)
    fetched = await Get(
        Unpacked,
        UnpackRequest(spec.sha256, spec.strip_prefix, (spec.url, *spec.mirrors), f"Fetching upstream_archive {spec.address.spec} ({spec.url})"),
    )
    if fetched.exit_code != 0:
        raise RocmBuildError(explain_archive_failure(spec, fetched.exit_code, fetched.said))
    return UnpackedArchive(spec, fetched.tree, fetched.newest_mtime)


@rule(desc="Patching an upstream_archive")
async def fetch_archive(request: ArchiveRequest) -> FetchedArchive:
    unpacked = await Get(UnpackedArchive, ArchiveRequest, request)
    target = await expect_target(request.address, UpstreamArchiveTarget, request.description_of_origin)
    patches = await Get(OrderedPatches, PatchSetsRequest(tuple(target[PatchSetsField].value or ()), target.address))
    patched = await Get(
        PatchedDigest,
        TreePatchRequest(unpacked.tree, tuple(p.path for p in patches.files), patches.digest, target.address.spec),
    )
    spec = unpacked.spec
    return FetchedArchive(spec.address, spec.url, spec.sha256, patched.tree, patches.files, patched.log)


def other_bytes(said: str, url: str) -> Tuple[str, str]:
    """(the URL, the sha256 it gave) when fetch_archive.py found other bytes than the pin's."""
    got = re.search(r"got sha256:(\w+) from (\S+)", said)
    return (got.group(2), got.group(1)) if got else (url, "?")


def explain_archive_failure(spec: ArchiveSpec, exit_code: int, said: str) -> str:
    owner, url, sha256 = spec.address.spec, spec.url, spec.sha256
    if exit_code == FETCH_ARCHIVE.EXIT_MISMATCH:
        where, got = other_bytes(said, url)
        return (
            f"upstream_archive {owner}: the file at {where} has sha256 "
            f"{got}, but the target pins {sha256}. Nothing was "
            f"unpacked. If the new bytes are expected, check them and update {spec.pinned_in}."
        )
    if exit_code == FETCH_ARCHIVE.EXIT_UNPACK and said.startswith("refused member"):
        return (
            f"upstream_archive {owner}: the archive at {url} (pinned by {spec.pinned_in}) was not unpacked: "
            f"{said.strip()}. Nothing from it was used. These are the pinned bytes (sha256 {sha256}): "
            "have its publisher fix the archive, or pin one whose members all stay inside it."
        )
    what = "could not be downloaded" if exit_code == FETCH_ARCHIVE.EXIT_DOWNLOAD else "could not be unpacked"
    return f"upstream_archive {owner}: {url} (pinned by {spec.pinned_in}) {what}.\n{indent(tail(said, 8))}"


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *download.rules(), *patching.rules()])
