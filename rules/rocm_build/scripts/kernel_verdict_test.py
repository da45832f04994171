"""kernel_verdict.py: a triton_kernel_test passes on exactly its expected failures."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

from rocm_build.sandbox_scripts import script_bytes
from rocm_build.scripts import kernel_verdict
from rocm_build.workloads.sandbox import DRIVER

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
    return kernel_verdict.verdict


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


UNDER_TEST = [{
    "target": "components/flash_attention:wheel-from-sdist",
    "wheel": "flash_attn-2.8.3.post2+llvm19gfx1151.k1a2b3c4d-py3-none-any.whl",
    "line": "components/flash_attention:wheel-from-sdist: flash_attn-2.8.3.post2+llvm19gfx1151.k1a2b3c4d-py3-none-any.whl, "
            "built from flash-attention-sdist sha256 0123456789ab with 1 patch(es): "
            "patches/flash_attention/0001-rdna-includes-gfx115x.edit.toml (sha256 95c733102ebe)",
}]  # fmt: skip


def test_the_report_and_the_output_name_what_was_compiled_first(tmp_path) -> None:
    # triton_kernels.py copies the rule's `under_test` (expected.json) into report.json; the
    # verdict prints it before the venv's triton and torch.
    (tmp_path / "expected.json").write_text(json.dumps(expected(under_test=UNDER_TEST, expected_failures={})))
    for name in ("kernel_verdict.py", *DRIVER):  # as the sandbox has them
        (tmp_path / name).write_bytes(script_bytes(name))
    # As the sandbox imports it (triton only in its main): the module beside its siblings.
    read = "import json, sys, triton_kernels; print(json.dumps([triton_kernels.read_under_test(p or None) for p in sys.argv[1:]]))"
    copied = subprocess.run([sys.executable, "-c", read, "expected.json", ""], cwd=tmp_path, capture_output=True, text=True)
    assert copied.returncode == 0, copied.stderr
    assert json.loads(copied.stdout) == [UNDER_TEST, []]
    report = {"targets": {"gfx1151": {"kernels": [{**KERNEL, "vgpr_spill_count": 0}], "failures": [], "seconds": 1.0}},
              "triton": "3.7.1", "torch": "2.13.0+cpu", "under_test": UNDER_TEST}  # fmt: skip
    (tmp_path / "report.json").write_text(json.dumps(report))
    run = subprocess.run([sys.executable, str(tmp_path / "kernel_verdict.py"), str(tmp_path / "report.json"), str(tmp_path / "expected.json")],
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[:3] == [
        f"under test: {UNDER_TEST[0]['line']}",
        "triton 3.7.1, torch 2.13.0+cpu",
        "gfx1151: 1 specialization(s) of 1 kernel(s), 0 failure(s), 0 spilling, in 1.0 s",
    ]
