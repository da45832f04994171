"""triton_kernel_test as a user runs it: `pants test` of tests/kernels:lds in a copy of the
repository, the pinned wheels served from this machine's mirror (./setup) and nothing else.

A tile that needs 128 KiB of LDS fails on gfx1151 with Triton's own OutOfResources, named
with kernel, specialization, target, required and limit, and compiles for gfx950; with the
failure listed the test passes; run again unchanged it is Pants' cache hit, not a compile.

Every kind of `source` is importable by the workload, each by a test of its own: an upstream
`zzk` with its package `zzk/` at its root, as a git repository (`upstream_repo`), an archive
with a patch (`upstream_archive`), a wheel built from the repository (`rocm_wheel`) and a
wheel of it on a package index (`prebuilt_wheel`); the workload imports `zzk` and launches its kernel.
A patch that no longer applies to flash-attention's sdist fails its kernel test naming it. The
real flash-attention recipe builds from that sdist (`components/flash_attention:wheel-from-sdist`,
the kernel test's source) and its install set imports the Triton AMD backend in a fresh venv.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from e2e.install_set import install_into_fresh_venv, run_in_set
from e2e.wheels import unkeyed
from e2e.workspace import CACHE_ROOT, FIXTURE_WHEELS, RECIPE_WHEELS, Workspace, borrowed
from kernels import make_mirror
from mini import make_upstreams

LDS = "tests/kernels:lds"
BUILD = "tests/kernels/BUILD"


@pytest.fixture(scope="module")
def ws(tmp_path_factory, batch_copy):
    with borrowed(batch_copy, tmp_path_factory.mktemp("kernels") / "upstreams") as workspace:
        # The files ./setup mirrored, checked again by sha256 (nothing is downloaded twice).
        table = make_mirror.mirror(CACHE_ROOT / "kernel-mirror")
        workspace.pants_env_extra["PANTS_ROCM_BUILD_MIRRORS"] = repr(table)
        # flash-attention's real recipe (:wheel-from-sdist) installs its locks' wheels from there.
        workspace.pants_env_extra["PANTS_ROCM_BUILD_FIND_LINKS"] = repr([str(FIXTURE_WHEELS), str(RECIPE_WHEELS)])
        yield workspace


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


# ------------------------------------------------------------------ each kind of `source`

ZZK_INIT = '''"""A package at the root of its upstream, as a new user's would be."""
import torch
import triton
import triton.language as tl

BLOCK = 64


@triton.jit
def double(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def launch():
    x = torch.empty(256, dtype=torch.float32)
    double[(triton.cdiv(256, BLOCK),)](x, 256, BLOCK=BLOCK)
'''
ZZK = {
    "zzk/__init__.py": ZZK_INIT,
    "setup.py": 'from setuptools import setup\nsetup(name="zzk", version="1.0", packages=["zzk"])\n',
}
# The archive's patch: the kernel compiled is the patched one.
ZZK_PATCH = """[[edit]]
path = "zzk/__init__.py"
pattern = '^BLOCK = 64$'
replace = 'BLOCK = 128'
"""
ZZK_DIR = "tests/kernels/zzk"


def zzk_build(repo_pins: str, archive_url: str, archive_sha: str) -> str:
    tests = "\n".join(
        f'triton_kernel_test(name="kernels-{name}", source=":{source}", workload="workload.py", '
        'dependencies=["components/kernels:venv"])'
        for name, source in (("repo", "src"), ("archive", "sdist"), ("wheel", "wheel"), ("prebuilt", "prebuilt"))
    )
    return f"""upstream_repo(name="src", pin="zzk", pins_file="{repo_pins}")
upstream_archive(name="sdist", url="{archive_url}", sha256="{archive_sha}", strip_prefix="zzk-1.0",
                 patches=[":patches"])
patch_set(name="patches", sources=["*.edit.toml"])
rocm_wheel(name="wheel", source=":src", toolchain="tests/mini:llvm", gpu_targets=["gfx1151"], python="3.11")
prebuilt_wheel(name="prebuilt", pin="zzk", pins_file="{ZZK_DIR}/pins.toml")
file(name="pins", source="pins.toml")
{tests}
"""


def zzk_wheel(out: Path) -> Path:
    """zzk's pure-Python wheel, for the `prebuilt_wheel`'s index: the files a wheel needs, by hand."""
    files = {
        "zzk/__init__.py": ZZK_INIT.encode(),
        "zzk-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: zzk\nVersion: 1.0\n",
        "zzk-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: kernels_test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(
        f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
        for name, data in files.items()
    )
    files["zzk-1.0.dist-info/RECORD"] = (record + "zzk-1.0.dist-info/RECORD,,\n").encode()
    out.mkdir(parents=True, exist_ok=True)
    wheel = out / "zzk-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return wheel


@pytest.fixture(scope="module")
def zzk(ws: Workspace, tmp_path_factory) -> Workspace:
    root = tmp_path_factory.mktemp("zzk")
    repo = root / "zzk"
    repo.mkdir()
    make_upstreams.git(repo, "init", "-q", "-b", "main")
    ws.pin_extra("zzk", repo, make_upstreams.commit(repo, ZZK, "zzk 1.0"))
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w:gz") as tf:
        for rel, text in ZZK.items():
            info = tarfile.TarInfo(f"zzk-1.0/{rel}")
            info.size = len(text.encode())
            tf.addfile(info, io.BytesIO(text.encode()))
    (root / "zzk-1.0.tar.gz").write_bytes(archive.getvalue())
    wheel = zzk_wheel(root / "files")
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (root / "simple/zzk").mkdir(parents=True)
    (root / "simple/zzk/index.html").write_text(f'<a href="file://{wheel}#sha256={sha}">{wheel.name}</a>\n')
    ws.path(ZZK_DIR).mkdir(parents=True, exist_ok=True)
    ws.write(f"{ZZK_DIR}/pins.toml", f'[prebuilt]\nindex_url = "file://{root}/simple/"\npython = "3.11"\n\n'
             f'[prebuilt.zzk]\nproject = "zzk"\ntrack = "==1.0"\nversion = "1.0"\nfile = "{wheel.name}"\n'
             f'sha256 = "{sha}"\nrequires_rocm = ""\n')
    ws.write(f"{ZZK_DIR}/0001-block.edit.toml", ZZK_PATCH)
    ws.write(f"{ZZK_DIR}/workload.py", 'import zzk\n\n\ndef cases():\n    return [("double", zzk.launch)]\n')
    archive_sha = hashlib.sha256((root / "zzk-1.0.tar.gz").read_bytes()).hexdigest()
    ws.write(f"{ZZK_DIR}/BUILD", zzk_build("tests/mini/pins", f"file://{root}/zzk-1.0.tar.gz", archive_sha))
    return ws


def compiled_from(ws: Workspace, name: str) -> dict:
    """`pants test` of one of zzk's kernel tests: the one kernel its workload launched."""
    run = ws.pants("test", f"{ZZK_DIR}:kernels-{name}")
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    report = json.loads(ws.path(f"dist/test/tests.kernels.zzk.kernels-{name}/report.json").read_text())
    gfx1151 = report["targets"]["gfx1151"]
    assert gfx1151["failures"] == [], gfx1151["failures"]
    (kernel,) = gfx1151["kernels"]
    assert (kernel["name"], kernel["case"], kernel["arch"]) == ("double", "double", "gfx1151")
    return kernel


def test_an_upstream_repo_source_is_importable_from_its_root(zzk: Workspace) -> None:
    # Its tree was once on PYTHONPATH as src/tree/zzk: `No module named 'zzk'`.
    assert compiled_from(zzk, "repo")["key"].startswith("BLOCK=64 | ")


def test_an_upstream_archive_source_is_importable_and_compiled_patched(zzk: Workspace) -> None:
    assert compiled_from(zzk, "archive")["key"].startswith("BLOCK=128 | ")


def test_a_rocm_wheel_source_is_installed_and_importable(zzk: Workspace) -> None:
    assert compiled_from(zzk, "wheel")["key"].startswith("BLOCK=64 | ")


def test_a_prebuilt_wheel_source_is_installed_and_importable(zzk: Workspace) -> None:
    assert compiled_from(zzk, "prebuilt")["key"].startswith("BLOCK=64 | ")


FA_PATCH = "patches/flash_attention/0001-rdna-includes-gfx115x.edit.toml"


def test_a_patch_that_no_longer_applies_to_the_sdist_fails_the_kernel_test_naming_it(ws: Workspace) -> None:
    patch = ws.read(FA_PATCH)
    # As if upstream had changed the line: the pattern matches nothing in the pinned sdist.
    ws.write(FA_PATCH, patch.replace('("gfx1030", ', '("gfx1031", '))
    try:
        run = ws.pants("test", "components/flash_attention:kernels")
    finally:
        ws.write(FA_PATCH, patch)
    assert run.returncode != 0
    out = run.stdout + run.stderr
    assert (
        f"components/flash_attention:sdist: {FA_PATCH}: edit 1 on flash_attn/flash_attn_triton_amd/utils.py: pattern "
    ) in out, out[-4000:]
    assert (
        "matched 0 time(s), expected exactly 1. No patch before it changes flash_attn/flash_attn_triton_amd/utils.py: "
        "the pinned file changed here"
    ) in out, out[-4000:]
    assert "./pants patch-workspace components/flash_attention:sdist" in out
    # It failed before any venv or compile.
    assert "Compiling the Triton kernels of components/flash_attention:kernels" not in out


FA_FROM_SDIST = "components/flash_attention:wheel-from-sdist"


def test_flash_attention_real_recipe_builds_from_its_sdist_and_imports_its_triton_backend(ws: Workspace, tmp_path) -> None:
    """The real component's recipe (kind, patches, build requirements and locks) run end to
    end, offline: the wheel names the sdist's sha256 and the patch's, carries the patched
    line, and its install set installs into a fresh venv where flash_attn_interface takes the
    Triton AMD backend (without FLASH_ATTENTION_TRITON_AMD_ENABLE it would import the CUDA
    extension, which a Triton build does not have)."""
    run = ws.pants("package", FA_FROM_SDIST)
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    # The build venv's 13 prebuilt wheels (one generator) share a folder, written and named once.
    assert run.stderr.count("Wrote dist/components.kernels.build-venv\n") == 1, run.stderr[-4000:]
    venv_wheels = ws.path("dist/components.kernels.build-venv").glob("*.whl")
    assert len(list(venv_wheels)) == len(re.findall(r"^  pinned +\S+ \(components/kernels:build-venv#", run.stderr, re.M)) == 13
    # A no-op: each of them unchanged, no moved pin, their folder not named.
    again = ws.pants("package", FA_FROM_SDIST)
    assert again.returncode == 0, again.stderr[-4000:]
    assert len(re.findall(r"^  unchanged +\S+ \(components/kernels:build-venv#", again.stderr, re.M)) == 13, again.stderr[-4000:]
    assert "pin moved" not in again.stderr and "Wrote dist/" not in again.stderr, again.stderr[-4000:]
    (wheel,) = ws.path("dist/components.flash_attention.wheel-from-sdist").glob("*.whl")
    assert unkeyed(wheel.name) == "flash_attn-2.8.3.post2+llvm19gfx1151-py3-none-any.whl"
    pin = ws.read("components/archives/flash-attention-sdist.toml")
    with zipfile.ZipFile(wheel) as zf:
        info = json.loads(zf.read(wheel.name.split("-py3")[0] + ".dist-info/rocm_build_info.json"))
        utils = zf.read("flash_attn/flash_attn_triton_amd/utils.py").decode()
    assert info["source"] == {
        "pin": "flash-attention-sdist",
        "url": "https://files.pythonhosted.org/packages/6c/b1/b77625e3d11260d2bd6a4fc249a4be9a3da97ff848e2222e810c4f0e0211/flash_attn-2.8.3.post2.tar.gz",
        "sha256": "d0f9f0b08a986cdeadbffcf5ec8b3a8f514366c68ad1853d3ab061bc83cc340b",
        "patches": [{"path": FA_PATCH, "sha256": hashlib.sha256(ws.path(FA_PATCH).read_bytes()).hexdigest()}],
    }
    assert f'sha256 = "{info["source"]["sha256"]}"' in pin
    assert info["network"].startswith("none") and info["toolchain"]["address"] == "components:llvm"
    assert '"gfx1150", "gfx1151", "gfx1200"' in utils  # patches/flash_attention/0001's line
    install = ws.path("dist/components.flash_attention.wheel-from-sdist.install")
    # Every wheel the set needs is in wheels/, each prebuilt one's requirements too: the header
    # sends no one to an index (einops, filelock, ..., triton had an `--index-url` step each).
    header = [line for line in (install / "requirements.txt").read_text().splitlines() if line.startswith("#")]
    assert not [line for line in header if "--index-url" in line], header
    venv = tmp_path / "venv"
    install_into_fresh_venv(install, venv)
    out = run_in_set(install, venv, "import flash_attn, flash_attn.flash_attn_interface as i; print(flash_attn.__version__, i.flash_attn_gpu.__name__)")
    assert (out.returncode, out.stdout) == (0, "2.8.3.post2 flash_attn.flash_attn_triton_amd.interface_fa\n"), out.stderr[-2000:]
