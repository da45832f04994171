"""Wheels of TheRock's split device code for tests, of real code objects: a host library
clang-19 links from two HIP units, split by the test writer (tests/mini/kpack_writer.py; its
marker names KERNEL_NAME, one HIPK wrapper per unit), and device wheels whose `.kpack` archive
files each unit's code object as `KERNEL_NAME#<unit index>` under an arch."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Mapping, Sequence, Tuple

from mini import kpack_writer
from rocm_build.testutil.wheel_facts import read_script_json, wheel
from rocm_build.audits.gpu_audit import GPU_CODE, GpuCode, gpu_code_of

HOST = "mini_blas-1.0-py3-none-linux_x86_64.whl"
DEVICE = "mini_blas_device_gfx1151-1.0-py3-none-linux_x86_64.whl"
LIBRARY = "_mini_blas/lib/libmini_blas.so"
KERNEL_NAME = "lib/libmini_blas.so"
ARCHIVE = "_mini_blas/.kpack/blas_lib_gfx1151.kpack"
SEARCH_PATH = "../.kpack/blas_lib_@GFXARCH@.kpack"
UNITS = {
    "axpy": 'extern "C" __global__ void axpy(float *x, float a) { x[__builtin_amdgcn_workitem_id_x()] += a; }\n',
    "scale": 'extern "C" __global__ void scale(float *x, float a) { x[__builtin_amdgcn_workitem_id_x()] *= a; }\n',
}
Split = Tuple[bytes, Dict[str, Dict[str, bytes]]]


def split_library(work: Path, arches: Sequence[str] = ("gfx1151", "gfx1100")) -> Split:
    """The split library's bytes, and each unit's code object per arch of `arches`."""
    return kpack_writer.split_hip_library(work, "libmini_blas.so", UNITS, KERNEL_NAME, [SEARCH_PATH], arches)


def filed(split: Split, arches: Sequence[str], under: str = "gfx1151") -> Dict[str, Dict[str, bytes]]:
    """The archive's kernels: unit i's code object compiled for `arches[i]`, filed under `under`."""
    return {key: {under: by_arch[arch]} for (key, by_arch), arch in zip(split[1].items(), arches)}


def device_wheel(
    tmp: Path, kernels: Mapping[str, Mapping[str, bytes]], compression: str = "none", arches: Sequence[str] = ("gfx1151",)
) -> Path:
    """The device wheel installing ARCHIVE, its table of contents saying it holds `arches`."""
    data = kpack_writer.archive(kernels, list(arches), "blas_lib", compression)
    return wheel(tmp / DEVICE, {ARCHIVE: data}, ["mini-blas==1.0"])


def host_wheel(split: Split, tmp: Path) -> Path:
    """The split host wheel: the host-only library, its device wheel named by its extra."""
    return wheel(tmp / HOST, {LIBRARY: split[0]}, ['mini-blas-device-gfx1151==1.0; extra == "device-gfx1151"'])


def read_gpu_code(wheel_path: Path, tmp: Path) -> GpuCode:
    """The audit's GpuCode of a wheel, as gpu_code.py reads it in a process."""
    return gpu_code_of(read_script_json(GPU_CODE, wheel_path, tmp))
