"""A rocm_wheel's Rust build, offline: its crates in the sandbox (fetched from its `cargo_lock`
by cargo_crates.py), an empty CARGO_HOME whose
config.toml sends every source the tree's Cargo.lock files name to them, and the Rust
toolchain's identity in the key.

The config is made here, from the preflight's scan of the same tree (scripts/tree_scan.py
reads the locks), so it is an input of the build and part of its key. Cargo resolves a
relative `directory` in `$CARGO_HOME/config.toml` against the parent of CARGO_HOME: the
sandbox root.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable, List, Optional
from urllib.parse import parse_qsl

from pants.engine.fs import AddPrefix, CreateDigest, Digest, FileContent, MergeDigests
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.util.frozendict import FrozenDict
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.rust import cargo_crates
from rocm_build.rust.cargo_crates import VendoredCrates, VendoredCratesRequest
from rocm_build.rust.cargo_lock import CRATES_IO
from rocm_build.toolchain import rust as rust_toolchain
from rocm_build.toolchain.container import BuildImage
from rocm_build.toolchain.rust import RustToolchain, RustToolchainRequest
from rocm_build.upstream import tree_scan_rules
from rocm_build.upstream.source_tree import SourceTree
from rocm_build.upstream.tree_scan_rules import TreeScan, TreeScanRequest
from rocm_build.wheel.build_process import CARGO_HOME_DIR, CARGO_VENDOR_DIR
from rocm_build.wheel.build_spec import WheelBuildSpec

VENDORED = "vendored-sources"
GIT_REFS = ("rev", "tag", "branch")


@dataclass(frozen=True)
class CargoBuildRequest:
    spec: WheelBuildSpec  # a Rust build: `cargo_lock` set
    source: SourceTree
    image: Optional[BuildImage]


@dataclass(frozen=True)
class CargoBuild:
    inputs: Digest  # CARGO_VENDOR_DIR/ (the crates) and CARGO_HOME_DIR/config.toml
    rust: RustToolchain
    config: str
    info: FrozenDict[str, object]  # where the crates came from, for rocm_build_info.json


def toml_string(text: str) -> str:
    return json.dumps(text)  # a TOML basic string: the same escapes as JSON's for these URLs


def cargo_config(locks: Iterable[dict]) -> str:
    """$CARGO_HOME/config.toml replacing each source of the locks (scripts/tree_scan.py's `cargo.locks`)."""
    locks = list(locks)
    registries = sorted({r for lock in locks for r in lock["registries"]} - set(CRATES_IO))
    gits = sorted({g["source"].split("#", 1)[0] for lock in locks for g in lock["git"]})
    lines: List[str] = [
        "# Written by rocm_build (rust/cargo.py) from the tree's Cargo.lock files: every source they",
        "# name comes from the vendored crates beside CARGO_HOME; cargo never goes online.",
        "[source.crates-io]",
        f'replace-with = "{VENDORED}"',
    ]
    for registry in registries:
        kind, _, url = registry.partition("+")
        lines += ["", f"[source.{toml_string(registry)}]", f"registry = {toml_string(url if kind == 'registry' else registry)}",
                  f'replace-with = "{VENDORED}"']  # fmt: skip
    for source in gits:
        url, _, query = source[len("git+") :].partition("?")
        refs = [(k, v) for k, v in parse_qsl(query) if k in GIT_REFS]
        lines += ["", f"[source.{toml_string(source)}]", f"git = {toml_string(url)}",
                  *(f"{k} = {toml_string(v)}" for k, v in refs), f'replace-with = "{VENDORED}"']  # fmt: skip
    lines += ["", f"[source.{VENDORED}]", f"directory = {toml_string(CARGO_VENDOR_DIR)}", "", "[net]", "offline = true", ""]
    return "\n".join(lines)


@rule(desc="Preparing a rocm_wheel's offline cargo")
async def prepare_cargo_build(request: CargoBuildRequest) -> CargoBuild:
    spec = request.spec
    owner = spec.owner
    # The crates download while the Rust toolchain is looked for and the tree scanned.
    rust, vendored, scanned = await MultiGet(
        Get(RustToolchain, RustToolchainRequest(owner, request.image)),
        Get(VendoredCrates, VendoredCratesRequest(request.source, spec.cargo_lock, owner)),
        Get(TreeScan, TreeScanRequest(request.source, owner)),
    )
    scan = json.loads(scanned.result)
    config = cargo_config(scan["cargo"]["locks"])
    inputs = await Get(
        Digest,
        MergeDigests(
            [
                await Get(Digest, AddPrefix(vendored.digest, CARGO_VENDOR_DIR)),
                await Get(Digest, CreateDigest([FileContent(f"{CARGO_HOME_DIR}/config.toml", config.encode())])),
            ]
        ),
    )
    info = {"lock": vendored.lock, "registry_crates": vendored.registry, "git_crates": vendored.git, "rust": rust.identity}
    return CargoBuild(inputs, rust, config, FrozenDict(info))


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *cargo_crates.rules(), *rust_toolchain.rules(), *tree_scan_rules.rules()])
