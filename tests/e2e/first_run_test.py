"""The first run on a networked machine, as a user does it: `update-pins -- --resolve`, then
`package`, against stand-ins of each service the real chain reaches, each a real server on
127.0.0.1 started here:

- GitHub: git's own `git http-backend` over the miniature repositories (git_http_server.py),
  reached through `[rocm-build] mirrors` as the pins name https://github.com/... URLs;
- TheRock's package index: a PEP 503 tree of the mini SDK's host and device wheels;
- a container registry: Debian's docker-registry, holding the mini box image by tag;
- crates.io: its download API as a static tree, for the mini Rust upstream's Cargo.lock (whose
  git crate comes from the GitHub stand-in too).

A clone of the repository whose miniature chain has its prebuilt SDK pins unresolved and its
build image named by tag only: `--resolve` fills both (the SDK's wheels by file and sha256, the
image by the digest the registry reports), the chain builds in that image with no network, a
second `--resolve` changes nothing, and the wheels build again with every server stopped. A
registry that then serves another image under the tag is refused, naming both digests.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
import zipfile
from pathlib import Path
from typing import Iterator

import pytest

from e2e.git_http_server import serving_git
from e2e.http_server import serving
from e2e.registry_server import registry
from e2e.rust_upstream import RECIPE as RUST_RECIPE
from e2e.rust_upstream import TARGET as RUST
from e2e.rust_upstream import crates_io, make_rust_upstream
from e2e.workspace import Workspace, make_fixture_upstreams, require_success

VLLM = "tests/mini/vllm:wheel"
CHAIN = ["tests/mini/aotriton:wheel", "tests/mini/torch:wheel", "tests/mini/flash_attention:wheel", VLLM]
LOCAL_BOX = "localhost/rocm-pants/mini-box:bookworm"  # made by ./setup (tests/mini/box/build_image.sh)
GITHUB = "https://github.com/rocm-pants-mini/"
PINS_DIR = "tests/mini/pins"
PINS = "tests/mini/pins/mini-sdk.toml"
BOX_BUILD = "tests/mini/BUILD"
IN_THE_BOX = '__defaults__({rocm_wheel: dict(python="3.11", environment="mini-box")})'
RESOLVE = ("run", "rules:update-pins", "--", "--resolve", "--pins-file", PINS_DIR, "--archives-file", "tests/mini/archives.toml")


def podman(*args: str) -> str:
    return subprocess.run(["podman", *args], check=True, capture_output=True, text=True).stdout.strip()


def unresolved_clone(ws: Workspace, index_url: str, box: str) -> dict:
    """The clone as a networked user finds it: git pins on GitHub, the SDK and the image unresolved.
    Returns the SDK pins as the repository resolves them (byte-reproducible wheels)."""
    resolved = tomllib.loads(ws.read(PINS))["prebuilt"]
    for path in ws.path(PINS_DIR).glob("*.toml"):
        text = re.sub(r'url = "file://[^"]*/(\w+)"', lambda m: f'url = "{GITHUB}{m.group(1)}"', path.read_text())
        text = re.sub(r'index_url = "file://[^"]*"', f'index_url = "{index_url}/simple/"', text)
        path.write_text(re.sub(r'^(version|file|sha256|extra) = "[^"]*"', r'\1 = ""', text, flags=re.M))
    build = ws.read(BOX_BUILD)
    build = build.replace(f'image="{LOCAL_BOX}"', f'image="{box}"').replace('    image_recipe="tests/mini/box/build_image.sh",\n', "")
    ws.write(BOX_BUILD, build.replace('__defaults__({rocm_wheel: dict(python="3.11")})', IN_THE_BOX))
    return resolved


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Iterator[Workspace]:
    """The clone both cases start from, as made (`Workspace.restore` after each): one Pants start
    and one build of update-pins' program for the file. The first case needs its store new (it
    counts what the first `package` built)."""
    root = tmp_path_factory.mktemp("first-run")
    ws = Workspace(root / "checkout", make_fixture_upstreams(root / "upstreams"), root / "store", root / "named")
    yield ws
    ws.stop()


def test_a_first_run_resolves_every_pin_builds_in_the_pinned_image_then_needs_no_server(clone: Workspace, tmp_path: Path) -> None:
    ws, upstreams = clone, clone.upstreams
    rust = make_rust_upstream(upstreams.root, upstreams.root)  # mini-rust and greeting.git beside the others
    try:
        with serving_git(upstreams.root) as (git_url, fetched), serving(upstreams.root / "index") as (index_url, served), \
                registry(tmp_path / "registry") as host, serving(crates_io(tmp_path / "crates.io", rust.crate)) as (crates_url, crates):  # fmt: skip
            box = f"{host}/rocm-pants/mini-box:bookworm"
            podman("push", "--tls-verify=false", LOCAL_BOX, box)
            expected = unresolved_clone(ws, index_url, box)
            ws.write(f"{PINS_DIR}/mini-rust.toml", f'[mini-rust]\nurl = "{GITHUB}mini-rust"\ntrack = "main"\ncommit = "{rust.commit}"\n')
            ws.path("tests/mini/rust").mkdir()  # built on this machine: the box has no cargo
            ws.write("tests/mini/rust/BUILD", RUST_RECIPE.format(extra='    cargo_lock="Cargo.lock",\n    environment="__local__",\n'))
            mirrors = {GITHUB: f"{git_url}/", "https://example.invalid/": f"{git_url}/", "https://static.crates.io/crates/": f"{crates_url}/crates/"}
            ws.pants_env_extra = {"PANTS_ROCM_BUILD_MIRRORS": json.dumps(mirrors)}

            resolve = require_success(ws.pants(*RESOLVE), "update-pins --resolve")
            pins = tomllib.loads(ws.read(PINS))["prebuilt"]
            for name in ("mini-sdk", "mini-sdk-gfx1151"):
                got = {k: pins[name][k] for k in ("version", "file", "sha256")}
                assert got == {k: expected[name][k] for k in got}, (name, resolve.stdout)
            assert pins["mini-sdk-gfx1151"]["extra"] == "device-gfx1151"
            digest = re.search(r'image="[^"]+@(sha256:[0-9a-f]{64})"', ws.read(BOX_BUILD))
            assert digest, ws.read(BOX_BUILD)
            assert f"image tests/mini:box: {box}@{digest.group(1)} (pulled {box}; the registry reports {digest.group(1)})" in resolve.stdout
            assert f"{host}/rocm-pants/mini-box@{digest.group(1)}" in podman("image", "inspect", "--format", "{{.RepoDigests}}", box)

            package = require_success(ws.package(VLLM, RUST), "package after --resolve")
            assert sorted(package.built) == sorted([*CHAIN, RUST])
            # Through the stand-ins: every repository from the git server, the crate from crates.io's.
            assert sorted(set(fetched)) == ["/aotriton", "/flash_attention", "/greeting.git", "/mini-rust", "/torch", "/vllm"]
            assert any(p.endswith(".whl") for p in served)  # the SDK's wheels from the index stand-in
            assert crates == ["/crates/itoa/1.0.1/download"]
            for address, wheel in ws.dist_wheels().items():
                if "rust" in address:
                    continue
                info = json.loads(zip_read(wheel, "rocm_build_info.json"))
                assert info["environment"]["name"] == "mini-box" and info["network"].startswith("none")
                assert digest.group(1) in info["environment"]["repo_digests"]

            files = {p: ws.read(p) for p in (*(str(f.relative_to(ws.root)) for f in ws.path(PINS_DIR).glob("*.toml")), BOX_BUILD)}
            again = require_success(ws.pants(*RESOLVE), "a second --resolve")
            assert again.stdout.strip().endswith("every pin is resolved")
            assert {p: ws.read(p) for p in files} == files
        # Every server is gone: what was resolved and fetched is all a build needs.
        rebuilt = require_success(ws.package(VLLM, RUST), "package with no server")
        assert rebuilt.built == []
    finally:
        ws.restore()
        untag(tmp_path)


def test_a_registry_serving_another_image_for_the_tag_is_refused(clone: Workspace, tmp_path: Path) -> None:
    ws, upstreams = clone, clone.upstreams
    other = tmp_path / "other"
    other.mkdir()
    (other / "hello").write_text("not the box\n")
    try:
        with serving(upstreams.root / "index") as (index_url, _), registry(tmp_path / "registry") as host:
            box = f"{host}/rocm-pants/mini-box:bookworm"
            podman("push", "--tls-verify=false", LOCAL_BOX, box)
            unresolved_clone(ws, index_url, box)
            require_success(ws.pants(*RESOLVE), "update-pins --resolve")
            pinned = ws.read(BOX_BUILD)
            before = re.search(r"@(sha256:[0-9a-f]{64})", pinned).group(1)
            # The tag moves to another image in the registry.
            image = podman("import", "--change", "CMD=/hello", str(_tar(other, tmp_path / "other.tar")), "localhost/rocm-pants/first-run-other:1")
            podman("push", "--tls-verify=false", "localhost/rocm-pants/first-run-other:1", box)
            run = ws.pants(*RESOLVE)
            podman("rmi", "-f", image)
        assert run.returncode == 1
        now = re.search(rf"its tag {re.escape(box)} now names (sha256:[0-9a-f]{{64}})", run.stdout)
        assert now and now.group(1) != before, run.stdout
        assert (
            f"unresolved: image tests/mini:box: its tag {box} now names {now.group(1)}, but tests/mini/BUILD pins {before}; "
            "the pin was kept."
        ) in run.stdout
        assert ws.read(BOX_BUILD) == pinned
    finally:
        ws.restore()
        untag(tmp_path)


def untag(tmp_path: Path) -> None:
    """The names the test's registry gave the local mini box image (the image itself stays)."""
    names = podman("image", "inspect", "--format", "{{json .RepoTags}}", LOCAL_BOX)
    for name in json.loads(names or "[]"):
        if name.startswith(("127.0.0.1:", "localhost:")):
            subprocess.run(["podman", "untag", LOCAL_BOX, name], capture_output=True)


def _tar(directory: Path, out: Path) -> Path:
    subprocess.run(["tar", "-C", str(directory), "-cf", str(out), "."], check=True)
    return out


def zip_read(wheel: Path, name: str) -> bytes:
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(next(n for n in zf.namelist() if n.endswith(f".dist-info/{name}")))
