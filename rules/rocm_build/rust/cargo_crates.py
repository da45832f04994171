"""A tree's Cargo.lock as pinned downloads: the vendor directory a Rust build reads, made in
Pants from the lock itself (no hand-made `cargo vendor` archive).

Each crates.io crate is one download of its `.crate` from crates.io's download API, checked
against the lock's sha256 and unpacked by scripts/fetch_archive.py (mirrors honoured, cached by
content, shared through the remote cache like any archive). Each git crate is its repository's
commit, fetched as a pin is (upstream/fetch.py), with its package cut out of the tree and its
manifest made standalone (crate_manifest.py). Both get the `.cargo-checksum.json` cargo's
directory sources expect: the lock's checksum for a registry crate, none for a git crate.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass
from typing import Tuple

from pants.engine.fs import (
    AddPrefix,
    CreateDigest,
    Digest,
    DigestContents,
    DigestSubset,
    FileContent,
    MergeDigests,
    PathGlobs,
    RemovePrefix,
)
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.errors import RocmBuildError, indent, tail
from rocm_build.upstream.archives import FETCH_ARCHIVE, Unpacked, UnpackRequest, other_bytes
from rocm_build.upstream.fetch import TREE_DIR, FetchedTree, FetchRequest
from rocm_build.upstream.source_tree import CheckedOut, CheckoutRequest, SourceTree, source_files
from rocm_build.rust.cargo_lock import GitCrate, LockedCrates, RegistryCrate, read_lock
from rocm_build.rust.crate_manifest import ManifestError, find_package, standalone_manifest, workspace_root
from rocm_build.upstream import archives as upstream_archives
from rocm_build.upstream import fetch, source_tree

CHECKSUM_FILE = ".cargo-checksum.json"


@dataclass(frozen=True)
class RegistryCrateRequest:
    crate: RegistryCrate
    lock: str  # for messages only: the lock in the tree, and the target
    owner: str


@dataclass(frozen=True)
class GitCrateRequest:
    crate: GitCrate
    lock: str
    owner: str


@dataclass(frozen=True)
class VendoredCrate:
    digest: Digest  # <name>-<version>/, as `cargo vendor --versioned-dirs` lays it out


@dataclass(frozen=True)
class VendoredCratesRequest:
    source: SourceTree
    lock: str  # the Cargo.lock in the tree (the rocm_wheel's `cargo_lock`)
    owner: str


@dataclass(frozen=True)
class VendoredCrates:
    digest: Digest  # one directory per crate
    lock: str
    registry: int
    git: int


def checksum_file(package: object) -> FileContent:
    # Cargo checks `package` against the lock; no file list: the crate's bytes were checked whole.
    return FileContent(CHECKSUM_FILE, json.dumps({"files": {}, "package": package}, sort_keys=True).encode())


@rule(desc="Fetching a crate of a Cargo.lock")
async def fetch_registry_crate(request: RegistryCrateRequest) -> VendoredCrate:
    crate = request.crate
    directory = f"{crate.name}-{crate.version}"
    fetched = await Get(Unpacked, UnpackRequest(crate.checksum, directory, (crate.url,), f"Fetching crate {crate.name} {crate.version} for {request.owner}"))
    if fetched.exit_code != 0:
        raise RocmBuildError(explain_crate_failure(request, fetched.exit_code, fetched.said))
    files = fetched.tree
    checksum = await Get(Digest, CreateDigest([checksum_file(crate.checksum)]))
    return VendoredCrate(await Get(Digest, AddPrefix(await Get(Digest, MergeDigests([files, checksum])), directory)))


def explain_crate_failure(request: RegistryCrateRequest, exit_code: int, said: str) -> str:
    crate, where = request.crate, f"{request.owner}: crate {request.crate.name} {request.crate.version} ({request.lock})"
    if exit_code == FETCH_ARCHIVE.EXIT_MISMATCH:
        url, got = other_bytes(said, crate.url)
        return (
            f"{where}: the file at {url} has sha256 {got}, but "
            f"the lock's checksum is {crate.checksum}. Nothing of it was used. A crates.io crate never changes: "
            "the server or a mirror ([rocm-build] mirrors) serves other bytes under its name."
        )
    what = "could not be downloaded" if exit_code == FETCH_ARCHIVE.EXIT_DOWNLOAD else "could not be unpacked"
    return f"{where}: {crate.url} {what}.\n{indent(tail(said, 8))}"


@rule(desc="Fetching a git crate of a Cargo.lock")
async def fetch_git_crate(request: GitCrateRequest) -> VendoredCrate:
    crate = request.crate
    fetched = await Get(FetchedTree, FetchRequest(crate.url, crate.commit, False, f"crate {crate.name}", request.lock, request.owner))
    tree = await Get(CheckedOut, CheckoutRequest(fetched.pack, request.owner))
    manifests = {
        fc.path[len(TREE_DIR) + 1 :]: fc.content.decode(errors="replace")
        for fc in await Get(DigestContents, DigestSubset(tree.digest, PathGlobs([f"{TREE_DIR}/**/Cargo.toml"])))
    }
    where = f"{request.owner}: git crate {crate.name} {crate.version} ({request.lock}, {crate.url} at {crate.commit[:12]})"
    path = find_package(manifests, crate.name)
    if path is None:
        raise RocmBuildError(f"{where}: no Cargo.toml in that commit has [package] name = {crate.name!r}")
    try:
        manifest = standalone_manifest(manifests[path], workspace_root(manifests, path))
    except ManifestError as e:
        raise RocmBuildError(f"{where}: {path} cannot be vendored: {e}") from None
    package_dir = posixpath.join(TREE_DIR, posixpath.dirname(path)).rstrip("/")
    replaced = [f"!{package_dir}/Cargo.toml"] if manifest is not None else []
    files = await Get(Digest, DigestSubset(tree.digest, PathGlobs([f"{package_dir}/**", *replaced])))
    written = [checksum_file(None), *([FileContent("Cargo.toml", manifest.encode())] if manifest is not None else [])]
    merged = await Get(Digest, MergeDigests([await Get(Digest, RemovePrefix(files, package_dir)), await Get(Digest, CreateDigest(written))]))
    return VendoredCrate(await Get(Digest, AddPrefix(merged, f"{crate.name}-{crate.version}")))


@rule(desc="Vendoring the crates of a Cargo.lock")
async def vendor_crates(request: VendoredCratesRequest) -> VendoredCrates:
    text = (await source_files(request.source, [request.lock], request.owner))[request.lock]
    if text is None:
        raise RocmBuildError(f"{request.owner}: its `cargo_lock` {request.lock!r} is not a file of the patched tree")
    locked: LockedCrates = read_lock(request.lock, text.decode(errors="replace"), request.owner)
    if locked.problems:
        raise RocmBuildError("\n".join(locked.problems))
    crates: Tuple[VendoredCrate, ...] = await MultiGet(
        *(Get(VendoredCrate, RegistryCrateRequest(c, request.lock, request.owner)) for c in locked.registry),
        *(Get(VendoredCrate, GitCrateRequest(c, request.lock, request.owner)) for c in locked.git),
    )
    digest = await Get(Digest, MergeDigests(c.digest for c in crates))
    return VendoredCrates(digest, request.lock, len(locked.registry), len(locked.git))


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *upstream_archives.rules(), *fetch.rules(), *source_tree.rules()])
