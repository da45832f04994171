"""load_check.py's device half: a library of a wheel the chain did not build must carry every
gpu target of the chain (its GPU code read by gpu_code.py, as the build's audit reads it); a
`.kpack` archive of a device wheel must hold code for one of them, each code object of the arch
its table of contents files it under."""

from __future__ import annotations


import pytest

from pants.util.frozendict import FrozenDict

from rocm_build.install.load_check import device_problems
from rocm_build.testutil import kpack_wheels
from rocm_build.testutil.kpack_wheels import device_wheel, filed, read_gpu_code
from rocm_build.audits.gpu_audit import GpuCode

TORCH = "torch-2.13.0+rocm10.0.0-cp312-cp312-linux_x86_64.whl"


def code(libraries, unreadable=()) -> GpuCode:
    return GpuCode(FrozenDict({k: tuple(v) for k, v in libraries.items()}), FrozenDict(), FrozenDict(dict(unreadable)))


def test_a_prebuilt_library_without_a_chain_target_is_named_with_the_fix() -> None:
    found = code({"torch/lib/libtorch_hip.so": ["gfx1100", "gfx942"], "torch/lib/libc10_hip.so": ["gfx1100", "gfx1151"]})
    assert device_problems("components/therock:torch", TORCH, found, ("gfx1151",)) == [
        f"torch/lib/libtorch_hip.so in {TORCH} (components/therock:torch) carries AMDGPU code for gfx1100, gfx942, but "
        "none for gfx1151 (the chain's gpu_targets: gfx1151): on a gfx1151 GPU it fails with hipErrorInvalidImage. Use "
        "a build of it for gfx1151, or leave gfx1151 out of the chain's gpu_targets."
    ]


def test_every_target_present_and_unreadable_code() -> None:
    assert device_problems("x", TORCH, code({"a.so": ["gfx1151", "gfx1100"]}), ("gfx1100", "gfx1151")) == []
    assert device_problems("x", TORCH, code({}, [("b.so", "zstd could not inflate")]), ("gfx1151",)) == [
        f"the GPU code of b.so in {TORCH} could not be read: zstd could not inflate"
    ]



# TheRock's device wheels, read by gpu_code.py from wheels of real code objects
# (rocm_build/testutil/kpack_wheels.py).
DEVICE, ARCHIVE, KERNEL_NAME = kpack_wheels.DEVICE, kpack_wheels.ARCHIVE, kpack_wheels.KERNEL_NAME
OWNER = "tests/mini/therock:blas-gfx1151"


@pytest.fixture(scope="module")
def split(tmp_path_factory) -> kpack_wheels.Split:
    return kpack_wheels.split_library(tmp_path_factory.mktemp("hip"))


def test_a_device_wheel_with_code_for_a_chain_target_and_its_split_host_pass(split, tmp_path) -> None:
    for compression in ("none", "zstd-per-kernel"):
        found = read_gpu_code(device_wheel(tmp_path, filed(split, ("gfx1151", "gfx1151")), compression), tmp_path)
        assert found.kpacks[ARCHIVE].arches == ("gfx1151",)
        # One device wheel per arch: the gfx1151 one serves a chain for gfx1100 and gfx1151.
        assert device_problems(OWNER, DEVICE, found, ("gfx1151",)) == []
        assert device_problems(OWNER, DEVICE, found, ("gfx1100", "gfx1151")) == []
    host = read_gpu_code(kpack_wheels.host_wheel(split, tmp_path), tmp_path)
    assert device_problems("tests/mini/therock:blas", kpack_wheels.HOST, host, ("gfx1151",)) == []


def test_a_code_object_of_another_arch_is_named_with_its_archive_and_kernel(split, tmp_path) -> None:
    found = read_gpu_code(device_wheel(tmp_path, filed(split, ("gfx1151", "gfx1100")), "zstd-per-kernel"), tmp_path)
    assert device_problems(OWNER, DEVICE, found, ("gfx1151",)) == [
        f"kernel {KERNEL_NAME}#1 in {ARCHIVE} in {DEVICE} is filed under gfx1151 (its table of contents), but its code "
        f"object's ELF header says gfx1100 ({OWNER}): on a gfx1151 GPU it fails with hipErrorInvalidImage. Use a device "
        "wheel built for gfx1151."
    ]


def test_a_device_wheel_for_another_gpu_is_named(split, tmp_path) -> None:
    kernels = filed(split, ("gfx1100", "gfx1100"), under="gfx1100")
    found = read_gpu_code(device_wheel(tmp_path, kernels, arches=("gfx1100",)), tmp_path)
    assert device_problems(OWNER, DEVICE, found, ("gfx1151",)) == [
        f"{ARCHIVE} in {DEVICE} ({OWNER}) holds code for gfx1100 (kernel {KERNEL_NAME}#0), none for the chain's "
        "gpu_targets (gfx1151): no GPU of the chain loads it. Use the device wheel built for gfx1151."
    ]
