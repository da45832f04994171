"""The workload tests' rules and target types, as Pants' backends register theirs."""

from __future__ import annotations

from rocm_build.workloads import choices, dependency_inference, kernels, sandbox, source, venv
from rocm_build.workloads.target_types import TritonKernelTestTarget, UpstreamChoicesTestTarget


def target_types():
    return [TritonKernelTestTarget, UpstreamChoicesTestTarget]


def rules():
    return [
        *dependency_inference.rules(),
        *venv.rules(),
        *source.rules(),
        *sandbox.rules(),
        *kernels.rules(),
        *choices.rules(),
    ]
