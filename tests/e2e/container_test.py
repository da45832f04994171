"""Builds inside a container image: the miniature chain in the `mini-box` environment.

The image (localhost/rocm-pants/mini-box:bookworm, Debian 12 with clang-19 and Python 3.11)
is built by ./setup from tests/mini/box/build_image.sh; podman runs each build in a fresh
container. The host's Python for the chain is pyenv's 3.11, the image's is Debian's 3.11.2:
which one a wheel names tells where it was built.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
import zipfile
from pathlib import Path
from typing import Dict

import pytest

from e2e.http_server import serving
from e2e.wheels import code_object_archs
from e2e.workspace import Workspace, make_fixture_upstreams, require_success

VLLM = "tests/mini/vllm:wheel"
AOT = "tests/mini/aotriton:wheel"
CHAIN = ["tests/mini/aotriton:wheel", "tests/mini/torch:wheel", "tests/mini/flash_attention:wheel", VLLM]
IMAGE = "localhost/rocm-pants/mini-box:bookworm"
BOX = "tests/mini/BUILD"
IN_THE_BOX = '__defaults__({rocm_wheel: dict(python="3.11", environment="mini-box")})'


def podman(*args: str) -> str:
    return subprocess.run(["podman", *args], check=True, capture_output=True, text=True).stdout.strip()


def box_workspace(root: Path, upstreams, store: Path, named: Path) -> Workspace:
    ws = Workspace(root, upstreams, store, named)
    text = ws.read(BOX)
    default = '__defaults__({rocm_wheel: dict(python="3.11")})'
    assert default in text, "tests/mini/BUILD drifted"
    ws.write(BOX, text.replace(default, IN_THE_BOX))
    return ws


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    root = tmp_path_factory.mktemp("container")
    return root, make_fixture_upstreams(root / "upstreams")


@pytest.fixture(scope="module")
def ws(shared):
    root, upstreams = shared
    workspace = box_workspace(root / "checkout", upstreams, root / "store", root / "named")
    yield workspace
    workspace.stop()


def build_info(wheel: Path) -> dict:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/rocm_build_info.json")]
        return json.loads(zf.read(name))


def dist_files(ws: Workspace) -> Dict[str, bytes]:
    return {str(p.relative_to(ws.root)): p.read_bytes() for p in (ws.root / "dist").rglob("*") if p.is_file()}


def with_step(ws: Workspace, step: str):
    """Context: the mini aotriton's BUILD with one build step added, restored afterwards."""
    rel = "tests/mini/aotriton/BUILD"

    class Edit:
        def __enter__(self):
            self.text = ws.read(rel)
            assert '    kind="aotriton",\n' in self.text
            ws.write(rel, self.text.replace('    kind="aotriton",\n', f'    kind="aotriton",\n    build_command=[{json.dumps(step)}],\n'))

        def __exit__(self, *exc):
            ws.write(rel, self.text)

    return Edit()


def test_the_chain_builds_inside_the_image(ws) -> None:
    image_id = podman("image", "inspect", "--format", "{{.Id}}", IMAGE)
    image_python = podman("run", "--rm", "--network=none", IMAGE, "python3", "-c", "import platform; print(platform.python_version())")
    run = require_success(ws.package(VLLM), "the chain in mini-box")
    assert sorted(run.built) == sorted(CHAIN)
    wheels = ws.dist_wheels()
    assert len(wheels) == 4
    for wheel in wheels.values():
        info = build_info(wheel)
        assert info["environment"]["name"] == "mini-box"
        assert info["environment"]["image_id"] == f"sha256:{image_id}"
        assert info["network"] == "none (container, --network=none)"
        assert info["python"] == f"CPython {image_python}"  # the image's, not the host's pyenv one
        assert "Debian clang version 19" in info["toolchain"]["identity"]
        assert set(code_object_archs(wheel).values()) == {"gfx1151"}, wheel
        # auditwheel: the miniature extensions need nothing beyond glibc 2.5's symbols; mini torch's
        # and vllm's need the SDK's library (libmini_hip.so.1, outside any policy), as ROCm wheels do.
        linked = wheel.name.startswith(("mini_torch-", "mini_vllm-"))
        tag = "linux_x86_64" if linked else "manylinux_2_5_x86_64"
        assert info["platform"] == {"tag": tag, "by": "auditwheel show"}
        assert wheel.name.endswith(f"-cp311-cp311-{tag}.whl")
    # The plan says where it builds, by digest.
    plan = require_success(ws.pants("rocm-plan", AOT), "rocm-plan")
    assert f"  environment mini-box (tests/mini:box): {IMAGE} = sha256:{image_id}" in plan.stdout
    assert f"in_container.sh /usr/bin/podman sha256:{image_id} bash __rocm_build/build_wheel.sh" in plan.stdout
    # Nothing changed: nothing builds.
    assert require_success(ws.package(VLLM), "the repeat").built == []
    assert podman("ps", "-a", "--filter", f"ancestor={IMAGE}", "--format", "{{.ID}}") == ""  # every container removed


def test_a_build_step_cannot_write_on_the_host(ws) -> None:
    probe = f"rocm-pants-probe-{uuid.uuid4().hex[:8]}"
    home = Path.home()
    step = (
        f"echo x > /tmp/{probe} && test -f /tmp/{probe} && echo wrote-tmp; "
        f"mkdir -p {home}/{probe} 2>/dev/null && echo wrote-home || echo home-refused"
    )
    with with_step(ws, step):
        require_success(ws.package(AOT), "the probe build")
    log = ws.named_caches / "rocm_build_logs" / "tests.mini.aotriton@wheel.log"
    text = log.read_text()
    # The step ran: /tmp is the container's own (thrown away); the host's HOME is read-only
    # there, or, where HOME is under /tmp (CI's is), in that private /tmp.
    assert "wrote-tmp" in text and ("home-refused" in text or "wrote-home" in text), text[-2000:]
    assert not Path("/tmp", probe).exists()
    assert not (home / probe).exists()
    # The tree came as the pack, checked out on this side (the image has no git), not written by Pants.
    assert "== source tree: the fetched source checked out and the patched files copied before the container started" in text


@pytest.fixture
def server(tmp_path: Path):
    with serving(tmp_path) as served:
        yield served


def test_a_build_step_cannot_reach_a_server_on_this_machine(ws, server) -> None:
    url, seen = server
    require_success(ws.package(AOT), "the first wheel")
    before = dist_files(ws)
    step = f"python -c 'import urllib.request; urllib.request.urlopen(\"{url}/probe\", timeout=5)'"
    with with_step(ws, step):
        run = ws.package(AOT)
    assert run.returncode != 0
    assert "rocm_wheel tests/mini/aotriton:wheel: the build failed (exit 1).\nIt tried to reach the network. " in run.stderr
    assert "Connection refused" in run.stderr
    assert seen == []
    assert dist_files(ws) == before


@pytest.fixture
def variant_image():
    """The same image plus one file: another image id."""
    name = f"localhost/rocm-pants/mini-box-variant:{uuid.uuid4().hex[:8]}"
    container = podman("create", IMAGE, "true")
    podman("commit", "-q", "--change", "LABEL org.rocm-pants.test=variant", container, name)
    podman("rm", container)
    yield name
    podman("rmi", "-f", name)


def test_another_image_rebuilds_and_another_checkout_does_not(ws, shared, variant_image) -> None:
    require_success(ws.package(VLLM), "the chain")
    text = ws.read(BOX)
    ws.write(BOX, text.replace(f'image="{IMAGE}"', f'image="{variant_image}"'))
    try:
        # The mini aotriton, which depends on no rocm_wheel: it rebuilds for the image alone, not
        # for a dependency's new wheel (its dependents' builds would prove nothing more).
        run = require_success(ws.package(AOT), "the aotriton wheel in another image")
        assert run.built == [AOT]
        variant_id = podman("image", "inspect", "--format", "{{.Id}}", variant_image)
        assert build_info(ws.dist_wheels()["tests.mini.aotriton"])["environment"]["image_id"] == f"sha256:{variant_id}"
    finally:
        ws.write(BOX, text)
    # The same image from another checkout path, same store: nothing builds.
    root, upstreams = shared
    other = box_workspace(root / "elsewhere" / "checkout", upstreams, ws.store, ws.named_caches)
    try:
        run = require_success(other.package(VLLM), "the other checkout")
        assert run.built == []
    finally:
        other.stop()
        shutil.rmtree(root / "elsewhere", ignore_errors=True)


@pytest.mark.parametrize(
    "image, recipe, expected",
    [
        (
            "localhost/rocm-pants/no-such-box:1",
            True,
            "tests/mini:box: image localhost/rocm-pants/no-such-box:1 (environment mini-box) "
            "is not on this machine: build it with its recipe: `tests/mini/box/build_image.sh` (./setup runs it).",
        ),
        (
            "registry.example.com/rocm/box:2026.11",
            False,
            "tests/mini:box: image registry.example.com/rocm/box:2026.11 (environment mini-box) "
            "is not resolved: it is not pinned by digest. Run `pants run rules:update-pins -- --resolve --pins-file "
            "tests/mini/pins`: it pulls it by its tag (where its registry is reachable) and writes "
            "`registry.example.com/rocm/box:2026.11@sha256:<digest>` as the `image` of tests/mini:box. Never write a "
            "digest you have not pulled or built.",
        ),
    ],
)
def test_a_missing_or_unresolved_image_stops_before_any_build(ws, image, recipe, expected) -> None:
    require_success(ws.package(VLLM), "the chain")
    before = dist_files(ws)
    text = ws.read(BOX)
    edited = text.replace(f'image="{IMAGE}"', f'image="{image}"')
    if not recipe:
        edited = edited.replace('    image_recipe="tests/mini/box/build_image.sh",\n', "")
    ws.write(BOX, edited)
    try:
        run = ws.package(VLLM)
    finally:
        ws.write(BOX, text)
    assert run.returncode != 0
    assert expected in run.stderr
    assert run.built == []
    assert "Fetching" not in run.stderr
    assert dist_files(ws) == before
