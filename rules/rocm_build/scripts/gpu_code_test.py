"""scripts/gpu_code.py on real binaries: code objects and shared objects compiled here by
Debian's clang-19 for AMD GPUs (no GPU or ROCm needed), in each offload format."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rocm_build.sandbox_scripts import load_script

CLANG = "/usr/bin/clang++-19"
DEVICE_ONLY = ["--cuda-device-only", "--no-gpu-bundle-output"]
# A kernel and, for the host side (no HIP headers), the declarations its launch stub needs.
KERNEL = """
typedef struct { unsigned x, y, z; } dim3;
extern "C" int hipLaunchKernel(const void *, dim3, dim3, void **, unsigned long, void *);
extern "C" int __hipPushCallConfiguration(dim3, dim3, unsigned long, void *);
extern "C" int __hipPopCallConfiguration(dim3 *, dim3 *, unsigned long *, void *);
#define __global__ __attribute__((global))
extern "C" __global__ void scale(float *x, float a) {
#if defined(__HIP_DEVICE_COMPILE__)
  int i = __builtin_amdgcn_workitem_id_x(); x[i] *= a;
#endif
}
"""


@pytest.fixture(scope="module")
def gpu_code():
    return load_script("gpu_code.py", "wheel_zip.py")


def compile_hip(tmp: Path, out: str, *args: str) -> Path:
    source = tmp / "kernel.hip"
    source.write_text(KERNEL)
    target = tmp / out
    subprocess.run([CLANG, "-x", "hip", "-nogpulib", "-nogpuinc", "-O2", *args, str(source), "-o", str(target)], check=True)
    return target


def test_the_arch_table_matches_the_compiler(gpu_code, tmp_path) -> None:
    # Every target of the table (the gfx names rocm_wheel accepts) that clang-19 can compile
    # comes back as itself from the ELF header.
    checked = []
    for arch in gpu_code.MACH.values():
        try:
            co = compile_hip(tmp_path, f"{arch}.co", f"--offload-arch={arch}", *DEVICE_ONLY, "-c")
        except subprocess.CalledProcessError:
            continue  # newer than clang-19 (gfx950, gfx1153, gfx1250): from LLVM's ELF.h
        assert gpu_code.archs_of(co.read_bytes()) == {arch}
        checked.append(arch)
    assert {"gfx1151", "gfx1100", "gfx942", "gfx90a", "gfx1201"} <= set(checked), checked


@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--offload-arch=gfx1151", "--offload-arch=gfx1100"], {"gfx1100", "gfx1151"}),
        (["--offload-arch=gfx1151", "--offload-arch=gfx1030", "--offload-compress"], {"gfx1030", "gfx1151"}),
        (["--offload-arch=gfx1151", "--offload-new-driver"], {"gfx1151"}),
    ],
    ids=["bundle", "compressed bundle", "new offload driver"],
)
def test_shared_objects_are_read_through_their_offload_sections(gpu_code, tmp_path, flags, expected) -> None:
    so = compile_hip(tmp_path, "libkernels.so", *flags, "-no-hip-rt", "-fPIC", "-shared")
    data = so.read_bytes()
    assert (b"CCOB" in data) == ("--offload-compress" in flags)
    assert gpu_code.archs_of(data) == expected


def test_a_wheel_lists_only_libraries_with_gpu_code(gpu_code, tmp_path, monkeypatch, capsys) -> None:
    host_only = tmp_path / "libhost.so"
    subprocess.run(
        ["/usr/bin/clang-19", "-x", "c", "-fPIC", "-shared", "-", "-o", str(host_only)],
        input=b"int answer(void) { return 42; }\n", check=True,
    )  # fmt: skip
    wheel = tmp_path / "pkg-1.0-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(compile_hip(tmp_path, "k.co", "--offload-arch=gfx1100", *DEVICE_ONLY, "-c"), "pkg/kernels/scale.co")
        zf.write(compile_hip(tmp_path, "lib.so", "--offload-arch=gfx1151", "-no-hip-rt", "-fPIC", "-shared"), "pkg/lib/libk.so.1")
        zf.write(host_only, "pkg/_C.so")
        zf.writestr("pkg/__init__.py", "x = 1\n" * 20)
        zf.writestr("pkg/bad.so", b"\x7fELF\x02\x01" + b"\xff" * 80)  # claims ELF, is not
    monkeypatch.setattr(sys, "argv", ["gpu_code.py", str(wheel)])
    gpu_code.main()
    found = json.loads(capsys.readouterr().out)
    assert found["code_objects"] == {"pkg/kernels/scale.co": ["gfx1100"]}
    assert found["libraries"] == {"pkg/lib/libk.so.1": ["gfx1151"]}
    assert list(found["unreadable"]) == ["pkg/bad.so"]
