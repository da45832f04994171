"""The install set at run time: the mini chain's env.sh and locked run-time requirement, installed
with real pip `--require-hashes` into a fresh venv; a runtime_env conflict stops `package` first.

tests/mini/flash_attention has `runtime_env={"FLASH_ATTENTION_TRITON_AMD_ENABLE": "TRUE"}` and
`runtime_requirements=["six"]`, locked in 3rdparty/run/py3.11/mini-flash_attention.lock from the
fixture wheels ./setup fetched.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import zipfile
from pathlib import Path

import pytest

from e2e.install_set import install_into_fresh_venv, python311, run_in_set
from e2e.workspace import FIXTURE_WHEELS, Workspace, borrowed, require_success

VLLM = "tests/mini/vllm:wheel"
INSTALL = "dist/tests.mini.vllm.install"
SIX = "six-1.16.0-py2.py3-none-any.whl"


@pytest.fixture(scope="module")
def ws(tmp_path_factory, batch_copy):
    with borrowed(batch_copy, tmp_path_factory.mktemp("runtime") / "upstreams") as workspace:
        yield workspace


def test_1_a_runtime_env_conflict_stops_package_before_any_build(ws: Workspace) -> None:
    original = ws.read("tests/mini/vllm/BUILD")
    ws.write("tests/mini/vllm/BUILD", original.replace('    kind="vllm",\n', '    kind="vllm",\n    runtime_env={"FLASH_ATTENTION_TRITON_AMD_ENABLE": "FALSE"},\n'))
    try:
        run = ws.package(VLLM)
    finally:
        ws.write("tests/mini/vllm/BUILD", original)
    assert run.returncode != 0
    assert (
        "tests/mini/vllm:wheel: its chain sets the run-time variable FLASH_ATTENTION_TRITON_AMD_ENABLE two ways: "
        "tests/mini/flash_attention:wheel has `runtime_env` FLASH_ATTENTION_TRITON_AMD_ENABLE='TRUE', "
        "tests/mini/vllm:wheel has FLASH_ATTENTION_TRITON_AMD_ENABLE='FALSE'."
    ) in run.stderr, run.stderr[-3000:]
    assert run.built == [] and not ws.path("dist").exists()


def test_2_the_install_set_installs_with_require_hashes_and_carries_its_environment(ws: Workspace, tmp_path: Path) -> None:
    require_success(ws.package(VLLM), "the mini chain")
    install = ws.path(INSTALL)
    requirements = (install / "requirements.txt").read_text()
    six = (install / "wheels" / SIX).read_bytes()
    assert six == (FIXTURE_WHEELS / SIX).read_bytes()
    assert f"six==1.16.0 --hash=sha256:{hashlib.sha256(six).hexdigest()}" in requirements.splitlines()
    assert "# then, before running Python: . ./env.sh  (the run-time environment: FLASH_ATTENTION_TRITON_AMD_ENABLE)" in requirements
    assert (install / "env.sh").read_text().splitlines()[2:] == [
        "export FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE  # tests/mini/flash_attention:wheel"
    ]
    # The set's check of the box beside requirements.txt, for the chain's gpu targets; this
    # machine has no GPU, so it says so and how to fix it, exit 1.
    assert requirements.splitlines()[1].startswith("# first, check this machine: python3 check_box.py")
    assert json.loads((install / "install_set.json").read_text()) == {"target": VLLM, "gpu_targets": ["gfx1151"]}
    box = subprocess.run([python311(), "check_box.py"], cwd=install, capture_output=True, text=True)
    assert (box.returncode, box.stdout.splitlines()[0]) == (1, (
        "FAIL  gpu-target: no GPU: /sys/class/kfd/kfd/topology/nodes has no node with a gfx_target_version (amdgpu's "
        "KFD is not loaded, or this is not the box)"
    )), box.stdout + box.stderr  # fmt: skip
    assert "      fix:    run this on the gfx1151 machine with amdgpu loaded" in box.stdout

    venv = tmp_path / "venv"
    install_into_fresh_venv(install, venv)
    # As a user runs it: env.sh sourced, then the chain's Python with its run-time requirement.
    code = "import os, six, mini_flash_attention, mini_vllm; print(os.environ['FLASH_ATTENTION_TRITON_AMD_ENABLE'], six.__version__)"
    out = run_in_set(install, venv, code)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "TRUE 1.16.0\n"


def index_wheel(directory: Path, name: str, version: str, requires: list) -> None:
    """A pure wheel holding only metadata, as an index would serve it."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(directory / f"{dist}-{version}-py3-none-any.whl", "w") as z:
        z.writestr(f"{info}/METADATA", metadata)
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")


def test_3_a_run_time_lock_leaves_the_chains_torch_to_the_chain(ws: Workspace, tmp_path: Path) -> None:
    # An index with a run-time requirement that needs torch, and a torch of its own that pulls in
    # a GPU runtime: the lock must take neither that torch nor its runtime.
    index = tmp_path / "index"
    index.mkdir()
    index_wheel(index, "peft-stand-in", "1.0", ["torch>=2.0", "six"])
    index_wheel(index, "torch", "2.14.0", ["nvidia-runtime-stand-in"])
    index_wheel(index, "nvidia-runtime-stand-in", "1.0", [])
    edits = {
        "tests/mini/torch/BUILD": ('    kind="torch",\n', '    kind="torch",\n    env={"PYTORCH_BUILD_VERSION": "2.13.0"},\n'),
        "tests/mini/flash_attention/BUILD": ('runtime_requirements=["six"]', 'runtime_requirements=["six", "peft-stand-in"]'),
    }
    lock = "3rdparty/run/py3.11/mini-flash_attention.lock"
    originals = {path: ws.read(path) for path in [*edits, lock]}
    for path, (old, new) in edits.items():
        assert old in originals[path]
        ws.write(path, originals[path].replace(old, new))
    try:
        run = ws.pants(
            "lock-runtime-requirements", "tests/mini/flash_attention:wheel",
            extra_options=[f"--rocm-build-find-links={[str(FIXTURE_WHEELS), str(index)]!r}"],
        )  # fmt: skip
        written = ws.read(lock)
    finally:
        for path, text in originals.items():
            ws.write(path, text)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Wrote 3rdparty/run/py3.11/mini-flash_attention.lock: 2 distribution(s) for tests/mini/flash_attention:wheel" in run.stdout
    locked = [line.split(" ")[0] for line in written.splitlines() if not line.startswith("#")]
    assert locked == ["peft-stand-in==1.0", "six==1.16.0"]
    assert "# left-out: torch==2.13.0+chain (provided by the chain: tests/mini/torch:wheel)" in written.splitlines()
