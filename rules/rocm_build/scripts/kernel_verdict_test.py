"""kernel_verdict.py: a triton_kernel_test passes on exactly its expected failures."""

from __future__ import annotations

import copy

import pytest

from rocm_build.sandbox_scripts import load_script

KERNEL = {
    "name": "attn_fwd", "case": "fwd_fp16_d128", "key": "BLOCK_M=128 | warps=4", "arch": "gfx1151",
    "vgpr_count": 256, "vgpr_spill_count": 23, "sgpr_spill_count": 0, "scratch_bytes": 92, "lds_bytes": 16384,
}  # fmt: skip
FAILURE = {
    "case": "fwd_fp16_d256", "target": "gfx1151", "kernel": "attn_fwd", "key": "BLOCK_M=256 | warps=8",
    "type": "triton.runtime.errors.OutOfResources", "message": "out of resource: shared memory, Required: 131072, Hardware limit: 65536.",
    "required": 131072, "limit": 65536, "resource": "shared memory",
}  # fmt: skip
REPORT = {"targets": {"gfx1151": {"kernels": [KERNEL], "failures": [FAILURE], "seconds": 8.4}}}


@pytest.fixture(scope="module")
def verdict():
    return load_script("kernel_verdict.py").verdict


def expected(**fields):
    return {"owner": "components/flash_attention:kernels", "workload": "components/flash_attention/kernels_workload.py", **fields}


def test_a_failure_not_listed_fails_naming_kernel_specialization_target_required_and_limit(verdict) -> None:
    lines, problems = verdict(REPORT, expected())
    assert problems == [
        "fwd_fp16_d256@gfx1151: attn_fwd [BLOCK_M=256 | warps=8]: OutOfResources (required 131072, limit 65536, "
        "shared memory): out of resource: shared memory, Required: 131072, Hardware limit: 65536."
    ]
    assert lines[0] == "gfx1151: 1 specialization(s) of 1 kernel(s), 1 failure(s), 1 spilling, in 8.4 s"
    assert lines[1] == (
        "    attn_fwd [BLOCK_M=128 | warps=4] (fwd_fp16_d128): gfx1151, 256 VGPRs, 23 spilled, 92 B scratch a lane, 16384 B LDS"
    )


def test_listed_failures_pass_and_a_listed_one_that_no_longer_fails_does_not(verdict) -> None:
    listed = {"fwd_fp16_d256@gfx1151": "needs 128 KiB of LDS (https://github.com/ROCm/aiter/issues/5229)"}
    lines, problems = verdict(REPORT, expected(expected_failures=listed))
    assert problems == []
    assert lines[-1].startswith("  expected failure fwd_fp16_d256@gfx1151: attn_fwd") and lines[-1].endswith("aiter/issues/5229)")
    fixed = copy.deepcopy(REPORT)
    fixed["targets"]["gfx1151"]["failures"] = []
    _, problems = verdict(fixed, expected(expected_failures=listed))
    assert problems == [
        "fwd_fp16_d256@gfx1151 is listed in `expected_failures` (needs 128 KiB of LDS "
        "(https://github.com/ROCm/aiter/issues/5229)) but did not fail: drop it from components/flash_attention:kernels"
    ]


def test_spills_fail_only_where_asked_and_a_code_object_must_be_for_its_target(verdict) -> None:
    report = copy.deepcopy(REPORT)
    report["targets"]["gfx1151"]["failures"] = []
    assert verdict(report, expected())[1] == []
    assert verdict(report, expected(fail_on_spills=True))[1] == [
        "attn_fwd [BLOCK_M=128 | warps=4] spills 23 register(s) on gfx1151 (fail_on_spills)"
    ]
    report["targets"]["gfx1151"]["kernels"][0]["arch"] = "gfx1100"
    assert verdict(report, expected())[1] == [
        "attn_fwd [BLOCK_M=128 | warps=4] was compiled for gfx1151, but its code object says gfx1100"
    ]


def test_a_target_that_compiled_nothing_fails(verdict) -> None:
    _, problems = verdict({"targets": {"gfx1151": {"kernels": [], "failures": []}}}, expected())
    assert problems == [
        "nothing was compiled for gfx1151: the workload components/flash_attention/kernels_workload.py launches no Triton kernel"
    ]
