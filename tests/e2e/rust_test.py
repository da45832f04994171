"""An upstream with a Rust extension (issue 35, vLLM 0.31.0's front end in small): setuptools-rust
runs cargo, which would fetch the crates its Cargo.lock names. The preflight reports the lock
before any compile; with `cargo_lock` naming it, the build fetches each crate the lock pins (a
crates.io crate by its sha256 `checksum`, a git crate by its commit), lays them out as a vendor
directory and compiles the extension with the system's cargo, offline, in its network namespace.

Stand-ins, each real: crates.io's download API is a static tree served on 127.0.0.1 (its itoa
1.0.1 is Debian's librust-itoa-dev files packed as a .crate), the git host is a git repository
reached through `[rocm-build] mirrors`, a workspace whose member inherits its version and edition
(made standalone as `cargo vendor` does)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from e2e.http_server import serving
from e2e.rust_upstream import GREETING_URL, RECIPE, crates_io, make_rust_upstream
from e2e.workspace import Workspace, make_fixture_upstreams
from mini import make_upstreams

TARGET = "tests/mini/rust:wheel"


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    """One copy for both cases (a Pants start fewer). Its store keeps a crate fetched by its
    checksum, so the case whose crate's bytes differ runs first: after the good one it would find
    the good bytes there and fetch nothing."""
    root = tmp_path_factory.mktemp("rust")
    workspace = Workspace(root / "checkout", make_fixture_upstreams(root / "upstreams"), root / "store", root / "named")
    rust = make_rust_upstream(root, root / "git")
    workspace.pin_extra("mini-rust", rust.repo, rust.commit)
    workspace.path("tests/mini/rust").mkdir()
    workspace.crate, workspace.git_host, workspace.rust_repo = rust.crate, root / "git", rust.repo
    yield workspace
    workspace.stop()


def mirrors(ws: Workspace, crates_url: str) -> None:
    table = {"https://static.crates.io/crates/": f"{crates_url}/crates/", "https://example.invalid/": f"file://{ws.git_host}/"}
    ws.pants_env_extra = {"PANTS_ROCM_BUILD_MIRRORS": json.dumps(table)}


def test_a_crate_whose_bytes_differ_from_the_lock_stops_the_build_naming_it(ws: Workspace, tmp_path: Path) -> None:
    ws.write("tests/mini/rust/BUILD", RECIPE.format(extra='    cargo_lock="Cargo.lock",\n'))
    tampered = ws.crate[:-1] + bytes([ws.crate[-1] ^ 1])  # the same name and version, other bytes
    with serving(crates_io(tmp_path / "crates.io", tampered)) as (url, _):
        mirrors(ws, url)
        package = ws.package(TARGET)
    assert package.returncode != 0
    expected = (
        f"tests/mini/rust:wheel: crate itoa 1.0.1 (Cargo.lock): the file at {url}/crates/itoa/1.0.1/download has sha256 "
        f"{hashlib.sha256(tampered).hexdigest()}, but the lock's checksum is {hashlib.sha256(ws.crate).hexdigest()}. "
        "Nothing of it was used. A crates.io crate never changes: the server or a mirror ([rocm-build] mirrors) serves "
        "other bytes under its name."
    )
    assert expected in package.stderr, package.stderr[-3000:]
    assert not ws.path("dist/tests.mini.rust").exists()


def test_a_rust_extension_builds_offline_from_the_crates_its_lock_pins(ws: Workspace, tmp_path: Path) -> None:
    ws.write("tests/mini/rust/BUILD", RECIPE.format(extra=""))
    run = ws.pants("rocm-plan", "--check", TARGET)
    assert run.returncode == 1, run.stdout + run.stderr[-3000:]
    sha = make_upstreams.git(ws.rust_repo, "rev-parse", "HEAD")
    greeting = make_upstreams.git(ws.git_host / "greeting.git", "rev-parse", "HEAD")
    problem = (
        f"tests/mini/rust:wheel: Cargo.lock (mini-rust at {sha}) has cargo fetch 1 registry crate(s) and 1 git source(s) "
        f"at build time, which a build cannot (no network); line 8 `git+{GREETING_URL}?tag=v1.0.0#{greeting}`. Fix: name "
        "it in `cargo_lock` in tests/mini/rust/BUILD (each crate is then fetched by the checksum or commit the lock "
        'gives) (or `"not run: <why>"` for the file in `downloads_covered` where this build never runs cargo).'
    )
    assert f"      - {problem}\n" in run.stdout, run.stdout
    assert "Building rocm_wheel" not in run.stderr

    ws.write("tests/mini/rust/BUILD", RECIPE.format(extra='    cargo_lock="Cargo.lock",\n'))
    with serving(crates_io(tmp_path / "crates.io", ws.crate)) as (url, seen):
        mirrors(ws, url)
        package = ws.package(TARGET)
    assert package.returncode == 0, package.stderr[-4000:]
    assert package.built == [TARGET]
    assert seen == ["/crates/itoa/1.0.1/download"]  # once, by the lock's name and version
    (wheel,) = ws.path("dist/tests.mini.rust").glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        info = json.loads(zf.read(f"{'-'.join(wheel.name.split('-')[:2])}.dist-info/rocm_build_info.json"))
        zf.extractall(tmp_path / "installed")
    assert "mini_rust/_fmt.cpython-311-x86_64-linux-gnu.so" in names, names
    rust = "; ".join(subprocess.run(["/usr/bin/" + tool, "-V"], capture_output=True, text=True, check=True).stdout.strip()
                     for tool in ("rustc", "cargo"))  # fmt: skip
    assert info["cargo_crates"] == {"lock": "Cargo.lock", "registry_crates": 1, "git_crates": 1, "rust": rust}
    assert info["network"].startswith("none")
    # The compiled extension runs: its text comes from the crates.io crate and the git one.
    python311 = shutil.which("python3.11") or next(Path.home().glob(".pyenv/versions/3.11.*/bin/python3.11"))
    answer = subprocess.run([str(python311), "-c", "import mini_rust; print(mini_rust.answer())"],
                            cwd=tmp_path / "installed", capture_output=True, text=True)  # fmt: skip
    assert answer.stdout == "42 offline\n", answer.stderr
    log = next(ws.path("dist/tests.mini.rust").glob("*.build.log")).read_text()
    assert "== rocm_build: tests/mini/rust:wheel for gfx1151 (network: none)" in log
