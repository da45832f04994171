"""Building on prebuilt wheels: the mini vllm on a mini torch from a package index.

A first checkout (standing in for TheRock's CI) builds mini aotriton and torch; their wheels
are put on a PEP 503 index served on 127.0.0.1. The checkout under test never builds torch:
its `tests/mini/torch:prebuilt` is a `prebuilt_wheel` pinned (by update-pins) to the index's
file and sha256, and flash-attention and vllm variants build on it.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import zipfile
from pathlib import Path
from typing import Dict

import pytest

from e2e.http_server import serving
from e2e.workspace import Workspace, make_fixture_upstreams, require_success

PINS = "tests/mini/pins.toml"
PIN = "prebuilt-mini-torch"
VLLM = "tests/mini/vllm:wheel-on-prebuilt"
FLASH = "tests/mini/flash_attention:wheel-on-prebuilt"
INSTALL = "dist/tests.mini.vllm.wheel-on-prebuilt.install"


def add_variants(ws: Workspace) -> None:
    """The prebuilt torch, and flash-attention and vllm variants that depend on it."""
    with open(ws.path("tests/mini/torch/BUILD"), "a") as f:
        f.write(f'\nprebuilt_wheel(name="prebuilt", pin="{PIN}", pins_file="{PINS}")\n')
    for rel, deps in (
        ("tests/mini/flash_attention/BUILD", '["tests/mini/torch:prebuilt"]'),
        ("tests/mini/vllm/BUILD", f'["tests/mini/torch:prebuilt", "{FLASH}"]'),
    ):
        text = ws.read(rel)
        block = text[text.index("rocm_wheel(") :]
        variant = re.sub(r"dependencies=\[[^\]]*\]", f"dependencies={deps}", block).replace('name="wheel"', 'name="wheel-on-prebuilt"')
        ws.write(rel, f"{text}\n{variant}")


def prebuilt_table(index_url: str, track: str = ">=1,<2", **resolved: str) -> str:
    fields = {"version": "", "file": "", "sha256": "", **resolved}
    lines = [f"[prebuilt.{PIN}]", f'index_url = "{index_url}"', 'project = "mini-torch"', f'track = "{track}"', 'python = "3.11"']
    return "\n" + "\n".join([*lines, *(f'{k} = "{v}"' for k, v in fields.items())]) + "\n"


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """A PEP 503 index on 127.0.0.1 with the mini torch and aotriton wheels a first checkout built."""
    root = tmp_path_factory.mktemp("index")
    builder = Workspace(root / "builder", make_fixture_upstreams(root / "upstreams"), root / "store", root / "named")
    try:
        require_success(builder.package("tests/mini/torch:wheel"), "the wheels for the index")
    finally:
        builder.stop()
    files = root / "serve" / "files"
    files.mkdir(parents=True)
    wheels = {}
    for wheel in builder.dist_wheels().values():
        (files / wheel.name).write_bytes(wheel.read_bytes())
        project = wheel.name.split("-")[0].replace("_", "-")
        wheels.setdefault(project, []).append(wheel.name)
    torch = wheels["mini-torch"][0]
    # Two more files the pin must not take: a version outside `track`, and one for another Python.
    for other in (torch.replace("-1.0.0+", "-2.0.0+"), re.sub(r"cp311-cp311", "cp312-cp312", torch.replace("-1.0.0+", "-1.5.0+"))):
        (files / other).write_bytes((files / torch).read_bytes())
        wheels["mini-torch"].append(other)
    for project, names in wheels.items():
        page = root / "serve" / "simple" / project
        page.mkdir(parents=True)
        links = [f'<a href="../../files/{n}#sha256={hashlib.sha256((files / n).read_bytes()).hexdigest()}">{n}</a>' for n in names]
        (page / "index.html").write_text("<html><body>\n" + "\n".join(links) + "\n</body></html>\n")
    with serving(root / "serve") as (url, seen):
        yield f"{url}/simple/", files, torch, seen


@pytest.fixture(scope="module")
def ws(tmp_path_factory, index):
    index_url = index[0]
    root = tmp_path_factory.mktemp("prebuilt")
    workspace = Workspace(root / "checkout", make_fixture_upstreams(root / "upstreams"), root / "store", root / "named")
    add_variants(workspace)
    workspace.write(PINS, workspace.read(PINS) + prebuilt_table(index_url))
    yield workspace
    workspace.stop()


def dist_files(ws: Workspace) -> Dict[str, bytes]:
    return {str(p.relative_to(ws.root)): p.read_bytes() for p in (ws.root / "dist").rglob("*") if p.is_file()}


def test_1_an_unresolved_pin_stops_before_any_build(ws) -> None:
    run = ws.package(VLLM)
    assert run.returncode != 0
    assert (
        f"prebuilt_wheel tests/mini/torch:prebuilt: pin `{PIN}` ([prebuilt.{PIN}] in {PINS}) is not resolved: it has "
        f"no version, file and sha256 yet. Run `pants run rules:update-pins -- --only {PIN}` where the index"
    ) in run.stderr
    assert run.built == [] and not (ws.root / "dist").exists()


def test_2_update_pins_resolves_track_against_the_index(ws, index) -> None:
    _, files, torch, _ = index
    before = ws.read(PINS)
    run = ws.pants("run", "rules:update-pins", "--", "--pins-file", PINS, "--only", PIN, "--no-patch-check")
    require_success(run, "update-pins")
    after = ws.read(PINS)
    sha = hashlib.sha256((files / torch).read_bytes()).hexdigest()
    # Only the prebuilt table changed: the newest 1.x for CPython 3.11, with its sha256.
    assert after.split(f"[prebuilt.{PIN}]")[0] == before.split(f"[prebuilt.{PIN}]")[0]
    assert prebuilt_table(index[0], version="1.0.0+llvm19gfx1151", file=torch, sha256=sha).strip() in after
    assert not list(ws.path("tests/mini").glob(".pins.toml.tmp"))


def test_3_a_wrong_sha256_and_a_missing_file_stop_before_any_build(ws, index) -> None:
    text = ws.read(PINS)
    sha = re.search(r'sha256 = "([0-9a-f]{64})"', text.split(f"[prebuilt.{PIN}]")[1]).group(1)
    cases = {
        "the index says": (sha, "0" * 64, "has sha256 " + sha + ", but the pin `prebuilt-mini-torch`"),
        "no longer lists": (index[2], index[2].replace("1.0.0", "1.0.1"), "no longer lists mini_torch-1.0.1+"),
    }
    for old, new, expected in cases.values():
        ws.write(PINS, text.replace(old, new))
        try:
            run = ws.package(VLLM)
        finally:
            ws.write(PINS, text)
        assert run.returncode != 0
        assert expected in run.stderr, run.stderr[-3000:]
        assert "tests/mini/torch:prebuilt" in run.stderr
        assert run.built == [] and not (ws.root / "dist").exists()


def test_4_the_chain_builds_on_the_prebuilt_torch_and_installs(ws, index, tmp_path) -> None:
    _, files, torch, seen = index
    run = require_success(ws.package(VLLM), "the chain on the prebuilt torch")
    assert sorted(run.built) == [FLASH, VLLM]  # no torch, no aotriton
    shipped = ws.path("dist/tests.mini.torch.prebuilt") / torch
    assert shipped.read_bytes() == (files / torch).read_bytes()
    (vllm,) = ws.path("dist/tests.mini.vllm.wheel-on-prebuilt").glob("*.whl")
    with zipfile.ZipFile(vllm) as zf:
        info = next(zf.read(n).decode() for n in zf.namelist() if n.endswith("rocm_build_info.json"))
    assert f'"prebuilt": "{PIN}"' in info and f'"file": "{torch}"' in info
    requirements = ws.path(f"{INSTALL}/requirements.txt").read_text()
    assert f"mini_torch==1.0.0+llvm19gfx1151 --hash=sha256:{hashlib.sha256(shipped.read_bytes()).hexdigest()}" in requirements
    # As on a box with TheRock's torch: the prebuilt wheel (and what it requires) from its
    # index first, as requirements.txt's header says; then exactly the chain, by hash.
    assert f"# first, the prebuilt mini_torch and what it requires: pip install --index-url {index[0]} mini_torch==1.0.0+llvm19gfx1151" in requirements
    venv = tmp_path / "venv"
    python = sorted(Path(p) for p in Path.home().glob(".pyenv/versions/3.11*/bin/python3.11"))
    subprocess.run([str(python[0]) if python else "python3.11", "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin/python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    env = {"PIP_CONFIG_FILE": "/dev/null", "PATH": "/usr/bin:/bin"}
    subprocess.run([*pip, "--index-url", index[0], "mini_torch==1.0.0+llvm19gfx1151"], check=True, env=env)
    install = ws.path(INSTALL)
    subprocess.run([*pip, "--no-index", "--find-links", str(install / "wheels"), "-r", str(install / "requirements.txt")], check=True, env=env)
    out = subprocess.run([str(venv / "bin/python"), "-c", "import mini_vllm; print(mini_vllm.answer())"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    # A repeat builds nothing and downloads nothing.
    before = len(seen)
    assert require_success(ws.package(VLLM), "the repeat").built == []
    assert len(seen) == before
