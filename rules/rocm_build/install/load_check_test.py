"""load_check.py's device half: a library of a wheel the chain did not build must carry every
gpu target of the chain (its GPU code read by gpu_code.py, as the build's audit reads it)."""

from __future__ import annotations

from pants.util.frozendict import FrozenDict

from rocm_build.install.load_check import device_problems
from rocm_build.wheel.gpu_audit import GpuCode

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
