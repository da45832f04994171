"""`pants rocm-plan --check`: every problem found in seconds, before any compile; `package`
stops the same way. Each case starts from an empty store, so "nothing was built" is real."""

from __future__ import annotations

import json
import subprocess
import time
import zipfile

import pytest

from e2e.workspace import Workspace, make_fixture_upstreams

VLLM = "tests/mini/vllm:wheel"
TORCH_BUILD = "tests/mini/torch/BUILD"
AOT_BUILD = "tests/mini/aotriton/BUILD"
SYSTEM_CMAKE = subprocess.run(["cmake", "--version"], capture_output=True, text=True).stdout.splitlines()[0]


@pytest.fixture(scope="module")
def upstreams(tmp_path_factory):
    return make_fixture_upstreams(tmp_path_factory.mktemp("preflight-upstreams"))


@pytest.fixture
def ws(tmp_path, upstreams):
    workspace = Workspace(tmp_path / "checkout", upstreams, tmp_path / "store", tmp_path / "named")
    yield workspace
    workspace.stop()


def check(ws: Workspace):
    return ws.pants("rocm-plan", "--check", VLLM)


def assert_nothing_built(ws: Workspace, run) -> None:
    assert "Building rocm_wheel" not in run.stderr, run.stderr[-3000:]
    assert not ws.path("dist").exists()


def test_the_mini_chain_passes_in_seconds_and_names_the_cmake_builds_use(ws: Workspace) -> None:
    ws.pants("--version")  # pantsd up: what is timed below is the preflight
    started = time.monotonic()
    run = check(ws)
    elapsed = time.monotonic() - started
    assert run.returncode == 0, run.stderr[-3000:]
    commit = ws.upstreams.commits
    assert run.stdout.splitlines() == [
        f"ok    tests/mini/aotriton:wheel  (mini-aotriton {commit['aotriton'][:12]}, 0 patch(es))",
        f"ok    tests/mini/torch:wheel  (mini-torch {commit['torch'][:12]}, 1 patch(es))",
        f"ok    tests/mini/flash_attention:wheel  (mini-flash_attention {commit['flash_attention'][:12]}, 0 patch(es))",
        f"ok    tests/mini/vllm:wheel  (mini-vllm {commit['vllm'][:12]}, 1 patch(es), 2 locked distribution(s))",
        # requirements/build.txt lists cmake, as vLLM's does: left to the system.
        f"      note: 3rdparty/build/py3.11/mini-vllm.lock left out pip's cmake==3.31.6: builds use the system cmake ({SYSTEM_CMAKE})",
        "all 4 component(s) ok.",
    ]
    assert elapsed < 60, f"the preflight took {elapsed:.0f} s"
    assert_nothing_built(ws, run)


def test_a_file_the_recipe_names_but_the_pin_lacks(ws: Workspace) -> None:
    ws.write(TORCH_BUILD, ws.read(TORCH_BUILD).replace(
        'kind="torch",', 'kind="torch",\n    build_command=["python tools/amd_build/build_amd.py"],'
    ))  # fmt: skip
    expected = (
        f"tests/mini/torch:wheel: tools/amd_build/build_amd.py is not in the tree of mini-torch at "
        f"{ws.upstreams.commits['torch']} (patched), but its build_command `python tools/amd_build/build_amd.py` "
        "needs it. Fix the recipe in tests/mini/torch/BUILD (upstream may have moved the file), or move the "
        "pin to a commit that has it."
    )
    run = check(ws)
    assert run.returncode == 1
    assert "FAIL  tests/mini/torch:wheel" in run.stdout and expected in run.stdout
    assert run.stdout.splitlines()[-1] == "1 problem(s): fix them before building."
    package = ws.package(VLLM)
    assert package.returncode != 0
    assert "tests/mini/vllm:wheel: 1 problem(s) found before any build" in package.stderr
    assert expected in package.stderr and "Traceback" not in package.stderr
    assert_nothing_built(ws, package)


SUPPORTED = (
    '    supported_gpu_targets=["gfx942", "gfx950"],\n'
    '    supported_gpu_targets_source="https://github.com/ROCm/aiter/blob/e4048607/aiter/jit/utils/build_targets.py#L39",\n'
)


def test_a_required_component_asked_for_a_target_upstream_does_not_build(ws: Workspace) -> None:
    ws.write(AOT_BUILD, ws.read(AOT_BUILD).replace('    kind="aotriton",\n', '    kind="aotriton",\n' + SUPPORTED))
    expected = (
        "tests/mini/aotriton:wheel is asked for gfx1151 (gpu_targets: gfx1151), but its upstream builds only "
        "gfx942, gfx950 (supported_gpu_targets, from https://github.com/ROCm/aiter/blob/e4048607/aiter/jit/utils/build_targets.py#L39). "
        "Drop the target from `gpu_targets`, make the component `optional=True`"
    )
    run = check(ws)
    assert run.returncode == 1 and expected in run.stdout
    plan = ws.pants("rocm-plan", "tests/mini/aotriton:wheel")
    assert "  WARNING   the build stops: upstream does not build these targets" in plan.stdout
    package = ws.package(VLLM)
    assert package.returncode != 0 and expected in package.stderr
    # Stopped before any fetch, too: the quick checks come first.
    assert "Fetching mini-" not in package.stderr
    assert_nothing_built(ws, package)


def test_an_optional_component_asked_for_a_target_upstream_does_not_build_is_skipped(ws: Workspace) -> None:
    # An AITER stand-in, optional, whose upstream list lacks gfx1151.
    ws.path("tests/mini/aiter").mkdir()
    ws.write("tests/mini/aiter/BUILD", (
        'rocm_wheel(\n    name="wheel",\n    source="tests/mini/aotriton:src",\n    toolchain="tests/mini:llvm",\n'
        '    gpu_targets=["gfx1151"],\n    kind="aiter",\n    optional=True,\n' + SUPPORTED + ")\n"
    ))  # fmt: skip
    ws.write("tests/mini/vllm/BUILD", ws.read("tests/mini/vllm/BUILD").replace(
        '"tests/mini/flash_attention:wheel"]', '"tests/mini/flash_attention:wheel", "tests/mini/aiter:wheel"]'
    ))  # fmt: skip
    why = "tests/mini/aiter:wheel is asked for gfx1151 (gpu_targets: gfx1151), but its upstream builds only gfx942, gfx950"
    run = check(ws)
    assert run.returncode == 0, run.stdout
    skip = [line for line in run.stdout.splitlines() if line.startswith("skip  tests/mini/aiter:wheel: ")]
    assert len(skip) == 1 and why in skip[0] and skip[0].endswith("It is optional: skipped, its dependents are built without it.")
    assert run.stdout.splitlines()[-1] == "4 component(s) ok, 1 skipped."
    package = ws.package(VLLM)
    assert package.returncode == 0, package.stderr[-3000:]
    assert f"tests/mini/vllm:wheel: building without optional tests/mini/aiter:wheel: {why}" in package.stderr
    assert package.built == ["tests/mini/aotriton:wheel", "tests/mini/torch:wheel", "tests/mini/flash_attention:wheel", VLLM]
    assert sorted(p.name for p in ws.path("dist").iterdir()) == [
        "tests.mini.aotriton", "tests.mini.flash_attention", "tests.mini.torch", "tests.mini.vllm", "tests.mini.vllm.install"
    ]
    # The install set has no aiter either.
    assert "aiter" not in ws.read("dist/tests.mini.vllm.install/requirements.txt")


def test_an_accepted_missing_target_is_recorded_with_the_arches_found(ws: Workspace) -> None:
    ws.write(AOT_BUILD, ws.read(AOT_BUILD).replace('    kind="aotriton",\n', (
        '    kind="aotriton",\n    env={"PYTORCH_ROCM_ARCH": "gfx1100"},\n    allow_missing_gpu_targets=["gfx1151"],\n'
    )))  # fmt: skip
    run = ws.package("tests/mini/aotriton:wheel")
    assert run.returncode == 0, run.stderr[-3000:]
    (wheel,) = ws.path("dist").glob("tests.mini.aotriton/*.whl")
    info = json.loads(zipfile.ZipFile(wheel).read(f"{'-'.join(wheel.name.split('-')[:2])}.dist-info/rocm_build_info.json"))
    assert info["gpu_code"] == {"mini_aotriton/kernels/scale-gfx1100.co": ["gfx1100"]}
    assert info["allow_missing_gpu_targets"] == ["gfx1151"]
