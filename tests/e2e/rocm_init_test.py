"""Our torch patch's torch/_rocm_init.py (patches/torch/0002-rocm-init-rtld-local.patch), applied
with `git apply` as the build applies it and run as torch/__init__.py runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PATCH = Path("patches/torch/0002-rocm-init-rtld-local.patch").resolve()
RUN = "import sys; sys.path.insert(0, 'torch'); import _rocm_init; _rocm_init.initialize(); print('initialized')"
# A test double for TheRock's `rocm_sdk` (no ROCm SDK exists here): it records what it is asked.
ROCM_SDK_DOUBLE = """\
calls = []
def initialize_process(preload_shortnames):
    calls.append(("initialize_process", tuple(preload_shortnames)))
def preload_libraries(*names, rtld_global=True):
    calls.append(("preload_libraries", names, rtld_global))
"""


def applied(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=tree, check=True)
    subprocess.run(["git", "apply", str(PATCH)], cwd=tree, check=True)
    return tree


def test_without_therocks_sdk_or_a_system_rocm_import_torch_fails_at_once(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-c", RUN], cwd=applied(tmp_path), env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1] == (
        "ImportError: this torch is built for ROCm and finds neither TheRock's ROCm SDK (the `rocm` package: install the "
        "rocm[libraries] version `pip show torch` lists under Requires) nor a system ROCm on the loader's path "
        "(libamdhip64.so: cannot open shared object file: No such file or directory)"
    )


def test_with_therocks_sdk_it_preloads_the_libraries_and_keeps_the_smi_ones_local(tmp_path: Path) -> None:
    tree = applied(tmp_path)
    (tree / "rocm_sdk.py").write_text(ROCM_SDK_DOUBLE)
    code = RUN + "; import rocm_sdk; print(rocm_sdk.calls[1])"
    run = subprocess.run([sys.executable, "-c", code], cwd=tree, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree)},
                         capture_output=True, text=True, check=True)  # fmt: skip
    assert run.stdout.splitlines() == ["initialized", "('preload_libraries', ('rocm_smi64', 'amd_smi'), False)"]
