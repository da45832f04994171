"""kernel_shards.py: the cases of a triton_kernel_test spread over processes give the report one
process gives. The shard reports here are what triton_kernels.py writes for a workload of three
cases, a, b and c, where b reuses a's kernel (one process compiles it once, under a; the other
process compiles it again under b) and both autotune into the same config that does not fit."""

from __future__ import annotations

import copy
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from rocm_build.scripts.kernel_shards import claimed_cases, merge_reports

CASES = ["a", "b", "c"]
LIMITS = {"lds_bytes": 65536}


def kernel(name: str, case: str, triton_hash: str, sha: str, loaded: bool) -> dict:
    return {"name": name, "case": case, "triton_hash": triton_hash, "code_object_sha256": sha, "loaded": loaded,
            "target": "gfx1151", "arch": "gfx1151"}  # fmt: skip


PRUNED = {"during": "autotune", "kernel": "attn", "key": "BLOCK=256 | warps=8", "type": "OutOfResources", "target": "gfx1151"}
LISTING = {"case": "cases()", "during": "case", "kernel": None, "type": "builtins.RuntimeError", "message": "no device"}


def result(kernels, failures, pruned, case_seconds, seconds) -> dict:
    return {"limits": LIMITS, "cases": CASES, "kernels": kernels, "failures": failures, "autotune_pruned": pruned,
            "case_seconds": case_seconds, "seconds": seconds}  # fmt: skip


def report(target_result: dict) -> dict:
    return {"targets": {"gfx1151": target_result}, "triton": "3.7.1", "torch": "2.13.0", "under_test": [{"line": "up"}]}


# One process took a and c; the other took b.
SHARD_0 = report(result(
    [kernel("attn", "a", "h1", "s1", False), kernel("norm", "a", "h2", "s2", True), kernel("attn", "c", "h4", "s4", True)],
    [LISTING, {"case": "c", "during": "case", "kernel": "attn", "type": "OutOfResources", "message": "lds"}],
    [dict(PRUNED, case="a")],
    {"a": 3.0, "c": 1.5}, 4.6,
))
SHARD_1 = report(result(
    # b compiled a's attn again (same Triton hash) and launched it; and a kernel of its own.
    [kernel("attn", "b", "h1", "s1", True), kernel("attn", "b", "h3", "s3", True)],
    [LISTING],
    [dict(PRUNED, case="b")],
    {"b": 2.0}, 2.1,
))
# What one process over a, b and c writes.
SERIAL = report(result(
    [kernel("attn", "a", "h1", "s1", True), kernel("norm", "a", "h2", "s2", True),
     kernel("attn", "b", "h3", "s3", True), kernel("attn", "c", "h4", "s4", True)],
    [LISTING, {"case": "c", "during": "case", "kernel": "attn", "type": "OutOfResources", "message": "lds"}],
    [dict(PRUNED, case="a")],
    {"a": 3.0, "b": 2.0, "c": 1.5}, 4.6,
))


def test_two_shards_merge_into_the_serial_report() -> None:
    shards = [copy.deepcopy(SHARD_0), copy.deepcopy(SHARD_1)]
    assert merge_reports(shards) == SERIAL
    assert shards == [SHARD_0, SHARD_1]  # the shards' reports are read, not changed


def test_the_order_of_the_shards_does_not_change_the_report() -> None:
    assert merge_reports([SHARD_1, SHARD_0]) == SERIAL


def test_one_process_is_its_own_report() -> None:
    assert merge_reports([SERIAL]) == SERIAL


def test_without_claims_a_process_runs_every_case_in_order() -> None:
    assert list(claimed_cases(5, None, "gfx1151")) == [0, 1, 2, 3, 4]


def claim_all(claims: str, count: int) -> list:
    return list(claimed_cases(count, claims, "gfx1151"))


@pytest.mark.parametrize("jobs", [2, 4])
def test_processes_claiming_side_by_side_take_each_case_once_each_in_order(tmp_path: Path, jobs: int) -> None:
    # Real processes and the real lock: 200 cases drawn as fast as they go.
    with ProcessPoolExecutor(jobs) as pool:
        taken = list(pool.map(claim_all, [str(tmp_path)] * jobs, [200] * jobs))
    assert sorted(i for each in taken for i in each) == list(range(200))
    assert all(each == sorted(each) for each in taken)  # a process's records stay in case order
    # Each gpu target has its own counter: the next target starts again at its first case.
    assert claim_all(str(tmp_path), 200) == [] and list(claimed_cases(3, str(tmp_path), "gfx950"))[:1] == [0]
