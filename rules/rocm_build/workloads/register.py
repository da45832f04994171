"""The workload tests' rules and target types, as Pants' backends register theirs."""

from __future__ import annotations

from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.workloads import choices, dependency_inference, kernels
from rocm_build.workloads.target_types import TritonKernelTestTarget, UpstreamChoicesTestTarget


def target_types():
    return [TritonKernelTestTarget, UpstreamChoicesTestTarget]


@memoized
def rules():
    return FrozenOrderedSet([
        *dependency_inference.rules(),
        *kernels.rules(),
        *choices.rules(),
    ])
