"""The target types of the rocm_build plugin, for register.py. Each is defined with its
fields in the target_types.py of its folder: upstream/, toolchain/, wheel/ (every rocm_wheel
field), workloads/ (the kernel and choices tests)."""

from __future__ import annotations

from rocm_build.prebuilt.target_generator import PrebuiltWheelsTarget
from rocm_build.toolchain.target_types import RocmToolchainTarget
from rocm_build.upstream.target_types import (
    PatchSetTarget,
    PrebuiltWheelTarget,
    UpstreamArchiveTarget,
    UpstreamRepoTarget,
)
from rocm_build.wheel.target_types import RocmWheelTarget
from rocm_build.workloads.target_types import TritonKernelTestTarget, UpstreamChoicesTestTarget


def target_types():
    return [PatchSetTarget, UpstreamRepoTarget, RocmToolchainTarget, RocmWheelTarget, UpstreamArchiveTarget, PrebuiltWheelTarget, PrebuiltWheelsTarget, TritonKernelTestTarget, UpstreamChoicesTestTarget]
