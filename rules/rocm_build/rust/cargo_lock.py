"""A Cargo.lock read as a pin list (as nixpkgs' importCargoLock and Bazel's crate_universe read
it): each crates.io crate by name, version and the sha256 of its `.crate` file (the lock's
`checksum`), each git crate by repository and commit (the `#<sha>` of its `source`).

Workspace members (no `source`) are the tree itself. Anything else a build cannot fetch by
content is a problem naming the lock, the crate and the fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, List, Tuple

try:  # Python 3.11+ has tomllib; the plugin and its benches run in Pants' Python 3.9
    import tomllib

    _loads: Callable[[str], dict] = tomllib.loads
    _TOML_ERRORS: Tuple[type, ...] = (tomllib.TOMLDecodeError,)
except ImportError:  # the plugin, inside Pants' Python 3.9
    import toml

    _loads = toml.loads
    _TOML_ERRORS = (toml.TomlDecodeError, IndexError, OverflowError)  # toml 0.10's, as pins/tables.py catches them

# crates.io as a Cargo.lock names it: the git index, or the sparse one.
CRATES_IO = ("registry+https://github.com/rust-lang/crates.io-index", "sparse+https://index.crates.io/")
# Where cargo downloads crates.io's crates: the index's config.json `dl`, plus /{name}/{version}/download.
CRATES_IO_DOWNLOAD = "https://static.crates.io/crates"
FULL_SHA = re.compile(r"^[0-9a-f]{40}$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class RegistryCrate:
    name: str
    version: str
    checksum: str  # sha256 of the .crate file

    @property
    def url(self) -> str:
        return f"{CRATES_IO_DOWNLOAD}/{self.name}/{self.version}/download"


@dataclass(frozen=True)
class GitCrate:
    name: str
    version: str
    source: str  # as the lock writes it: git+URL?rev=...#<sha>
    url: str  # the repository
    commit: str


@dataclass(frozen=True)
class LockedCrates:
    path: str
    registry: Tuple[RegistryCrate, ...]
    git: Tuple[GitCrate, ...]
    problems: Tuple[str, ...]


def read_lock(path: str, text: str, owner: str) -> LockedCrates:
    try:
        packages = _loads(text).get("package", [])
    except _TOML_ERRORS as e:
        return LockedCrates(path, (), (), (f"{owner}: {path} is not a Cargo.lock cargo could read ({e})",))
    registry: List[RegistryCrate] = []
    git: List[GitCrate] = []
    problems: List[str] = []
    for package in packages:
        name, version, source = package.get("name", "?"), package.get("version", "?"), package.get("source")
        crate = f"crate {name} {version} in {path}"
        if source is None:
            continue  # a member of the tree's own workspace
        if source in CRATES_IO:
            checksum = package.get("checksum", "")
            if SHA256.match(checksum):
                registry.append(RegistryCrate(name, version, checksum))
            else:
                problems.append(
                    f"{owner}: {crate} has no sha256 `checksum` ({checksum!r}), so it cannot be fetched by content. "
                    "Fix: regenerate the lock with a cargo that writes checksums (`cargo update -p NAME`) in a patch"
                )
        elif source.startswith("git+"):
            url, _, commit = source[len("git+") :].partition("#")
            if FULL_SHA.match(commit):
                git.append(GitCrate(name, version, source, url.partition("?")[0], commit))
            else:
                problems.append(f"{owner}: {crate} comes from {source!r}, which names no full commit after `#`; fix the lock")
        else:
            problems.append(
                f"{owner}: {crate} comes from {source!r}: only crates.io crates and git sources are fetched from a "
                "lock. Fix: vendor that registry's crates into the tree with a patch, or ask for its support"
            )
    return LockedCrates(path, tuple(registry), tuple(git), tuple(problems))

