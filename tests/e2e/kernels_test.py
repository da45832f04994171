"""triton_kernel_test as a user runs it: `pants test` of tests/kernels:lds in a copy of the
repository, the pinned wheels served from this machine's mirror (./setup) and nothing else.

A tile that needs 128 KiB of LDS fails on gfx1151 with Triton's own OutOfResources, named
with kernel, specialization, target, required and limit, and compiles for gfx950; with the
failure listed the test passes; run again unchanged it is Pants' cache hit, not a compile.
"""

from __future__ import annotations

import json
import time

import pytest

from e2e.workspace import CACHE_ROOT, Workspace, make_fixture_upstreams
from kernels import make_mirror

LDS = "tests/kernels:lds"
BUILD = "tests/kernels/BUILD"


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("kernels")
    workspace = Workspace(root / "checkout", make_fixture_upstreams(root / "upstreams"), root / "store", root / "named")
    # The files ./setup mirrored, checked again by sha256 (nothing is downloaded twice).
    table = make_mirror.mirror(CACHE_ROOT / "kernel-mirror")
    workspace.pants_env_extra["PANTS_ROCM_BUILD_MIRRORS"] = repr(table)
    yield workspace
    workspace.stop()


def test_a_tile_over_gfx1151_lds_fails_there_and_compiles_for_gfx950(ws: Workspace) -> None:
    listed = ws.read(BUILD)
    ws.write(BUILD, listed.split("    expected_failures={")[0] + ")\n")
    try:
        run = ws.pants("test", LDS)
    finally:
        ws.write(BUILD, listed)
    assert run.returncode != 0, run.stdout[-3000:]
    out = run.stdout + run.stderr
    # Named with kernel, specialization, target, required and limit, as the verdict prints it.
    (problem,) = [line for line in out.splitlines() if line.startswith("  - needs_128k@gfx1151: ")]
    assert problem.startswith("  - needs_128k@gfx1151: tiled_matmul [BLOCK_M=256 BLOCK_N=256 BLOCK_K=128 | warps=8 stages=2 | sig#"), out[-4000:]
    assert problem.endswith(
        "]: OutOfResources (required 131072, limit 65536, shared memory): out of resource: shared memory, Required: "
        "131072, Hardware limit: 65536. Reducing block sizes or `num_stages` may help."
    )
    assert "tests/kernels:lds: 1 problem(s):" in out
    # gfx950 (160 KiB a workgroup) compiled both tiles, read back from each code object.
    report = json.loads(ws.path("dist/test/tests.kernels.lds/report.json").read_text())
    gfx950 = report["targets"]["gfx950"]
    assert gfx950["failures"] == [] and sorted(k["arch"] for k in gfx950["kernels"]) == ["gfx950", "gfx950"]
    assert [f["case"] for f in report["targets"]["gfx1151"]["failures"]] == ["needs_128k"]


def test_with_the_failure_listed_it_passes_and_is_cached_until_an_input_changes(ws: Workspace) -> None:
    first = ws.pants("test", LDS)
    assert first.returncode == 0, first.stdout[-3000:]
    assert "expected failure needs_128k@gfx1151: tiled_matmul" in first.stdout + first.stderr
    start = time.monotonic()
    again = ws.pants("test", LDS)
    assert again.returncode == 0 and "Compiling the Triton kernels of tests/kernels:lds" not in again.stderr
    assert time.monotonic() - start < 30  # Pants' start included; the compile itself took ~20 s
    # The workload is an input: a changed one compiles again.
    workload = ws.read("tests/kernels/lds_workload.py")
    ws.write("tests/kernels/lds_workload.py", workload + "\n# changed\n")
    changed = ws.pants("test", LDS)
    assert changed.returncode == 0 and "Completed: Compiling the Triton kernels of tests/kernels:lds" in changed.stderr
