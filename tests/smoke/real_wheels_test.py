"""Smoke tests of the real wheels, for a person on the gfx1151 machine that built them.

    ./pants package components/vllm:wheel
    ROCM_PANTS_WHEELS=$PWD/dist ./pants test tests/smoke:

First the install set's own check of the machine (its check_box.py: the GPU's gfx target,
HSA_OVERRIDE_GFX_VERSION, /dev/kfd, GTT and TTM, kernel and firmware; docs/checks.md): a
failure stops every test here with its findings and fix lines. Then they install the install
set into a fresh venv as its requirements.txt says (the wheels by sha256, then the SDK's
modules, amdsmi, from the SDK in the venv), source its env.sh, and check on the GPU: imports,
the arch of the code objects, that torch's SDPA runs AOTriton's flash attention, and that
nothing fell back silently (runtime_checks.py: vLLM's platform is ROCm, torch carries gfx1151
code, flash-attention runs its AMD Triton backend; it prints which SDPA backend torch chose).
Those fail, not skip, on a gfx1151 machine. Where no ROCm GPU is present (every CI machine
here) they are skipped, saying why.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from smoke import runtime_checks

KFD = Path("/dev/kfd")
TARGET = "gfx1151"
# The install set's check of the machine, beside requirements.txt (rules/rocm_build/install/box_check.py).
CHECK_BOX = "check_box.py"
# requirements.txt's lines with a command that installs an SDK module (rules/rocm_build/install/runtime_set.py).
SDK_STEP = "# then, from the SDK: "


def gpu_archs(nodes: Path = Path("/sys/class/kfd/kfd/topology/nodes")) -> list:
    """gfx names of the GPUs ROCm's kernel driver exposes (empty without one)."""
    archs = []
    for props in nodes.glob("*/properties") if nodes.exists() else []:
        for line in props.read_text().splitlines():
            if line.startswith("gfx_target_version"):
                version = int(line.split()[1])
                if version:
                    major, minor, step = version // 10000, (version // 100) % 100, version % 100
                    archs.append(f"gfx{major}{minor:x}{step:x}")
    return archs


def sdk_steps(requirements: str) -> list:
    """The commands requirements.txt's header gives for modules that come from the SDK."""
    return [line[len(SDK_STEP) :] for line in requirements.splitlines() if line.startswith(SDK_STEP)]


def wheels_dir() -> Path:
    # Tests run in a sandbox, so the build root's dist/ must be named explicitly.
    return Path(os.environ.get("ROCM_PANTS_WHEELS", "<set ROCM_PANTS_WHEELS to your dist/>"))


requires_gfx1151 = pytest.mark.skipif(
    not KFD.exists() or "gfx1151" not in gpu_archs(),
    reason="needs a ROCm gfx1151 GPU (/dev/kfd and a gfx1151 KFD node); this machine has "
    f"{gpu_archs() or 'none'}",
)


def install_dir() -> Path:
    return wheels_dir() / "components.vllm.install"


def check_box(install: Path) -> subprocess.CompletedProcess:
    """The set's check of this machine, as its requirements.txt says to run it (with no venv yet)."""
    return subprocess.run([sys.executable, CHECK_BOX], cwd=install, capture_output=True, text=True)


@pytest.fixture(scope="module")
def box_checked() -> str:
    # First, before anything is installed: what the box lacks is said here, not as a HIP error later.
    install = install_dir()
    if not (install / "requirements.txt").exists():
        pytest.fail(f"no {install}/requirements.txt: run ./pants package components/vllm:wheel")
    checked = check_box(install)
    if checked.returncode != 0:
        pytest.fail(f"{install}/{CHECK_BOX} found what stops the set on this machine:\n{checked.stdout}{checked.stderr}")
    return checked.stdout


@pytest.fixture(scope="module")
def venv(tmp_path_factory, box_checked: str) -> Path:
    # Installed as docs/checks.md says: the chain's install set, every wheel by version and sha256
    # (--no-deps: the upstreams' own runtime requirements, numpy and the like, are not ours).
    install = install_dir()
    root = tmp_path_factory.mktemp("smoke") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    subprocess.run(
        [str(root / "bin/pip"), "install", "--no-index", "--no-deps", "--require-hashes", "--find-links", "wheels",
         "-r", "requirements.txt"],
        cwd=install, check=True,
    )  # fmt: skip
    # Then what comes from the SDK in the venv (amdsmi, from rocm-sdk-core), with its python.
    path = f"{root / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    for step in sdk_steps((install / "requirements.txt").read_text()):
        done = subprocess.run(["bash", "-c", step], cwd=install, env={**os.environ, "PATH": path}, capture_output=True, text=True)
        assert done.returncode == 0, f"{step}\n{done.stderr}"
    return root


def in_install_env(venv: Path, *argv: str) -> subprocess.CompletedProcess:
    """The venv's python with the install set's env.sh sourced first, as a user runs it."""
    script = '. ./env.sh && exec "$0" "$@"'
    return subprocess.run(["bash", "-c", script, str(venv / "bin/python"), *argv], cwd=install_dir(), capture_output=True, text=True)


def run(venv: Path, code: str) -> str:
    out = in_install_env(venv, "-c", code)
    assert out.returncode == 0, out.stderr
    return out.stdout


@requires_gfx1151
def test_the_box_passes_the_sets_check(box_checked: str) -> None:
    print(box_checked)  # its warnings (GTT at the default, an old kernel) stay in the test's output
    assert box_checked.splitlines()[-1].startswith("check_box: 0 failure(s)")


@requires_gfx1151
def test_imports(venv: Path) -> None:
    out = run(venv, "import torch, triton, flash_attn, vllm; print(torch.__version__, torch.version.hip)")
    assert "gfx1151" in out.split()[0]  # our local label, e.g. 2.13.0+rocm7.14gfx1151


@requires_gfx1151
def test_torch_runs_on_gfx1151(venv: Path) -> None:
    out = run(venv, "import torch; print(torch.cuda.get_device_properties(0).gcnArchName)")
    assert out.strip().startswith("gfx1151")
    archs = run(venv, "import torch; print(' '.join(torch.cuda.get_arch_list()))").split()
    assert "gfx1151" in archs  # the code objects torch was compiled for


@requires_gfx1151
def test_sdpa_uses_aotriton_flash_attention(venv: Path) -> None:
    code = """
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
q = torch.randn(1, 8, 256, 64, device="cuda", dtype=torch.float16)
with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):  # raises if flash attention is unavailable
    out = torch.nn.functional.scaled_dot_product_attention(q, q, q)
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        torch.nn.functional.scaled_dot_product_attention(q, q, q)
    torch.cuda.synchronize()
print(" ".join(e.name for e in prof.events()))
"""
    assert "attn_fwd" in run(venv, code)  # AOTriton's flash forward kernel


@requires_gfx1151
def test_nothing_falls_back_silently(venv: Path) -> None:
    # vLLM's platform, torch's arch list, flash-attention's backend; prints torch's SDPA choice.
    out = in_install_env(venv, str(Path(runtime_checks.__file__).resolve()), TARGET)
    print(out.stdout)
    assert out.returncode == 0, out.stdout + out.stderr


def test_sdk_steps_are_read_from_the_header() -> None:
    requirements = "# pip install ...\n# then, from the SDK: python -m pip install x\n# then, before ...\nsix==1 --hash=sha256:0\n"
    assert sdk_steps(requirements) == ["python -m pip install x"]


def test_gpu_detection_decodes_kfd_topology(tmp_path: Path) -> None:
    # Runs everywhere: the skip decision above is only as good as this decoding.
    for node, version in (("0", 0), ("1", 110501), ("2", 90010)):  # CPU, gfx1151, gfx90a
        (tmp_path / node).mkdir()
        (tmp_path / node / "properties").write_text(f"cpu_cores_count 0\ngfx_target_version {version}\n")
    assert sorted(gpu_archs(tmp_path)) == ["gfx1151", "gfx90a"]
