"""scripts/gpu_code.py on real binaries: code objects and shared objects compiled here by
Debian's clang-19 for AMD GPUs (no GPU or ROCm needed), in each offload format; and TheRock's
split device code (rocm_build/testutil/kpack_wheels.py): `.kpack` archives of real code objects
and a library split from them, read with kpack.py as the process reads them in auditwheel's
venv (msgpack and zstandard of the test's resolve)."""

from __future__ import annotations

import struct
import subprocess
import zipfile
from pathlib import Path

import pytest

from mini import kpack_writer
from rocm_build.scripts import amdgpu_elf as amdgpu_elf_script
from rocm_build.scripts import gpu_code as gpu_code_script
from rocm_build.testutil import kpack_wheels
from rocm_build.testutil.kpack_wheels import ARCHIVE, KERNEL_NAME
from rocm_build.testutil.wheel_facts import read_script_json, wheel
from rocm_build.audits.gpu_audit import GPU_CODE

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
    return gpu_code_script


@pytest.fixture(scope="module")
def amdgpu_elf():
    return amdgpu_elf_script


def compile_hip(tmp: Path, out: str, *args: str) -> Path:
    source = tmp / "kernel.hip"
    source.write_text(KERNEL)
    target = tmp / out
    subprocess.run([CLANG, "-x", "hip", "-nogpulib", "-nogpuinc", "-O2", *args, str(source), "-o", str(target)], check=True)
    return target


def test_the_arch_table_matches_the_compiler(gpu_code, amdgpu_elf, tmp_path) -> None:
    # Every target of the table (the gfx names rocm_wheel accepts) that clang-19 can compile
    # comes back as itself from the ELF header.
    checked = []
    for arch in amdgpu_elf.MACH.values():
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


def test_a_wheel_lists_only_libraries_with_gpu_code(tmp_path) -> None:
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
    found = read_script_json(GPU_CODE, wheel, tmp_path)
    assert found["code_objects"] == {"pkg/kernels/scale.co": ["gfx1100"]}
    assert found["libraries"] == {"pkg/lib/libk.so.1": ["gfx1151"]}
    assert list(found["unreadable"]) == ["pkg/bad.so"]
    assert (found["kpacks"], found["split_libraries"]) == ({}, {})


@pytest.fixture(scope="module")
def split(tmp_path_factory) -> kpack_wheels.Split:
    return kpack_wheels.split_library(tmp_path_factory.mktemp("hip"))


@pytest.mark.parametrize("compression", ["none", "zstd-per-kernel"])
def test_a_kpack_archive_carries_the_arch_of_each_code_object_header(split, tmp_path, compression) -> None:
    kernels = kpack_wheels.filed(split, ("gfx1151", "gfx1151"))
    found = read_script_json(GPU_CODE, kpack_wheels.device_wheel(tmp_path, kernels, compression), tmp_path)
    assert found["kpacks"] == {
        ARCHIVE: {
            "arches": ["gfx1151"], "toc_arches": ["gfx1151"], "compression": compression,
            "kernels": {f"{KERNEL_NAME}#0": {"gfx1151": "gfx1151"}, f"{KERNEL_NAME}#1": {"gfx1151": "gfx1151"}}, "mismatches": [],
        }
    }  # fmt: skip
    # The device wheel's only GPU code is in the archive: no library or code object of its own.
    assert (found["libraries"], found["code_objects"], found["unreadable"]) == ({}, {}, {})


def test_a_code_object_filed_under_another_arch_is_a_mismatch(split, tmp_path) -> None:
    # Unit 1's gfx1100 code object filed under gfx1151: its arch comes from its ELF header.
    kernels = kpack_wheels.filed(split, ("gfx1151", "gfx1100"))
    found = read_script_json(GPU_CODE, kpack_wheels.device_wheel(tmp_path, kernels, "zstd-per-kernel"), tmp_path)
    archive = found["kpacks"][ARCHIVE]
    assert (archive["arches"], archive["toc_arches"]) == (["gfx1100", "gfx1151"], ["gfx1151"])
    assert archive["kernels"][f"{KERNEL_NAME}#1"] == {"gfx1151": "gfx1100"}
    assert archive["mismatches"] == [[f"{KERNEL_NAME}#1", "gfx1151", "gfx1100"]]


def test_an_archive_of_two_arches_and_unreadable_archives(split, tmp_path) -> None:
    found = read_script_json(GPU_CODE, kpack_wheels.device_wheel(tmp_path, split[1], arches=("gfx1100", "gfx1151")), tmp_path)
    assert found["kpacks"][ARCHIVE]["kernels"][f"{KERNEL_NAME}#0"] == {"gfx1100": "gfx1100", "gfx1151": "gfx1151"}
    assert (found["kpacks"][ARCHIVE]["arches"], found["kpacks"][ARCHIVE]["mismatches"]) == (["gfx1100", "gfx1151"], [])
    # Not an archive, and an archive whose frame is not zstd: named, never a crash.
    good = kpack_writer.archive(kpack_wheels.filed(split, ("gfx1151",)), ["gfx1151"], "blas_lib", "zstd-per-kernel")
    frame_at = good.index(b"\x28\xb5\x2f\xfd")  # the zstd frame's magic
    toc = kpack_writer.packb({"gfx_arches": ["gfx1151"], "toc": {f"{KERNEL_NAME}#0": 7}})  # a kernel's entry no map
    members = {
        "a/.kpack/x_gfx1151.kpack": b"not an archive", ARCHIVE: good[:frame_at] + bytes(4) + good[frame_at + 4 :],
        "b/.kpack/y_gfx1151.kpack": struct.pack("<4sIQ", b"KPAK", 1, 16) + toc,
    }  # fmt: skip
    found = read_script_json(GPU_CODE, wheel(tmp_path / kpack_wheels.DEVICE, members), tmp_path)
    assert found["unreadable"]["a/.kpack/x_gfx1151.kpack"] == "it is 14 bytes, shorter than the 16-byte header"
    assert found["unreadable"]["b/.kpack/y_gfx1151.kpack"] == f"the `toc` entry of '{KERNEL_NAME}#0' is an integer (7), not a map"
    assert found["unreadable"][ARCHIVE].startswith(
        f"the code object of {KERNEL_NAME}#0 @ gfx1151 cannot be read: its zstd frame does not decompress"
    )
    assert found["kpacks"][ARCHIVE]["arches"] == []


def test_a_split_host_library_is_no_library_lacking_code(split, tmp_path) -> None:
    found = read_script_json(GPU_CODE, kpack_wheels.host_wheel(split, tmp_path), tmp_path)
    assert found["split_libraries"] == {
        kpack_wheels.LIBRARY: {
            "kernel_name": KERNEL_NAME, "search_paths": [kpack_wheels.SEARCH_PATH], "indexes": [0, 1], "bundled": []
        }
    }
    assert (found["libraries"], found["code_objects"], found["unreadable"]) == ({}, {}, {})
