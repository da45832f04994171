"""Bit-for-bit reproducible wheels, early cutoff along dependency edges, and verify-reproducible."""

from __future__ import annotations

import json
import re
import zipfile

import pytest

from e2e.workspace import Workspace, make_fixture_upstreams, require_success

VLLM = "tests/mini/vllm:wheel"
AOT = "tests/mini/aotriton:wheel"
AOT_BUILD = "tests/mini/aotriton/BUILD"
# A patch that adds a file outside the package: the tree changes, what the wheel ships does not.
NOTES_PATCH = """\
--- /dev/null
+++ b/NOTES.md
@@ -0,0 +1 @@
+Built for gfx1151 by rocm-pants.
"""


@pytest.fixture(scope="module")
def upstreams(tmp_path_factory):
    return make_fixture_upstreams(tmp_path_factory.mktemp("upstreams"))


def machine(tmp_path, upstreams, name: str) -> Workspace:
    # Its own checkout path, local store and named caches (ccache included): another machine.
    return Workspace(tmp_path / name / "checkout-at-some-path", upstreams, tmp_path / name / "store", tmp_path / name / "named")


@pytest.fixture(scope="module")
def machine_a(tmp_path_factory, upstreams):
    """Machine `a` after its cold build of the chain: that build and its wheels, as the first
    case compares them; the copy, its pantsd and warm store then serve the cutoff and verify
    cases (a fresh copy and a cold store prove nothing more for them)."""
    a = machine(tmp_path_factory.mktemp("reproducible"), upstreams, "a")
    try:
        first = a.package(VLLM)
        yield a, first, {k: w.read_bytes() for k, w in a.dist_wheels().items()}
    finally:
        a.stop()


@pytest.fixture
def ws(machine_a):
    yield machine_a[0]
    machine_a[0].reset()


def test_two_machines_build_byte_identical_wheels(tmp_path, upstreams, machine_a) -> None:
    _, first, wheels_a = machine_a
    b = machine(tmp_path, upstreams, "b-elsewhere")
    try:
        assert len(require_success(first, "machine a").built) == 4
        assert len(require_success(b.package(VLLM), "machine b").built) == 4
        wheels_b = b.dist_wheels()
        assert len(wheels_a) == 4
        for name, wheel in wheels_a.items():
            assert wheel == wheels_b[name].read_bytes(), name
    finally:
        b.stop()


def test_unchanged_output_stops_the_rebuild_cascade(ws: Workspace) -> None:
    # Machine a, which built the chain: this package (cache hits) puts its wheels in dist/ again.
    require_success(ws.package(VLLM), "the chain")
    ws.write(AOT_BUILD, ws.read(AOT_BUILD).replace('pins_file="tests/mini/pins")',
             'pins_file="tests/mini/pins", patches=["tests/mini/patches/aotriton:notes"])'))  # fmt: skip
    ws.path("tests/mini/patches/aotriton").mkdir(parents=True)
    ws.write("tests/mini/patches/aotriton/BUILD", 'patch_set(name="notes")\n')
    ws.write("tests/mini/patches/aotriton/0001-notes.patch", NOTES_PATCH)
    before = {k: w.read_bytes() for k, w in ws.dist_wheels().items()}
    run = require_success(ws.package(VLLM), "after a patch that changes nothing shipped")
    # aotriton rebuilt with the same payload: its dependents are cache hits.
    assert run.built == [AOT]
    after = ws.dist_wheels()
    info = json.loads(zipfile.ZipFile(after["tests.mini.aotriton"]).read(
        after["tests.mini.aotriton"].name.split("-cp")[0] + ".dist-info/rocm_build_info.json"))  # fmt: skip
    # Build info still tells the truth about each wheel: the new patch is recorded.
    assert [p["path"] for p in info["source"]["patches"]] == ["tests/mini/patches/aotriton/0001-notes.patch"]
    assert after["tests.mini.aotriton"].read_bytes() != before["tests.mini.aotriton"]


def test_verify_reproducible_passes_and_names_an_injected_difference(ws: Workspace) -> None:
    # Machine a: its wheel of aotriton is the cached build that verify-reproducible rebuilds.
    require_success(ws.package(AOT), "the first build")
    ok = require_success(ws.pants("verify-reproducible", AOT), "verify on a clean build")
    assert f"ok {AOT}: the rebuild is byte-identical to the cached build of {AOT}" in ok.stdout
    assert "Rebuilding rocm_wheel tests/mini/aotriton:wheel to verify it" in ok.stderr

    stamp = 'build_command=["date +%s%N | sed \\"s/.*/BUILT = \'&\'/\\" > mini_aotriton/stamp.py"]'
    ws.write(AOT_BUILD, ws.read(AOT_BUILD).replace('    kind="aotriton",\n', f'    kind="aotriton",\n    {stamp},\n'))
    require_success(ws.package(AOT), "a build that writes the date into the package")
    bad = ws.pants("verify-reproducible", AOT)
    assert bad.returncode == 1
    assert f"DIFFERENT {AOT}: the rebuild differs from the cached build of {AOT}:" in bad.stdout
    # Both wheels by digest: the cache entry to distrust, and what the rebuild made.
    digests = re.search(rf"\n  sha256 ([0-9a-f]{{64}}) \(the cached build of {AOT}\)\n  sha256 ([0-9a-f]{{64}}) \(the rebuild\)\n", bad.stdout)
    assert digests and digests.group(1) != digests.group(2), bad.stdout
    assert "  differs: mini_aotriton/stamp.py (" in bad.stdout
    assert "  differs: mini_aotriton-1.0.0+llvm19gfx1151.dist-info/RECORD" in bad.stdout
