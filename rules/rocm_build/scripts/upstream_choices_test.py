"""upstream_choices.py's verdict: a changed choice fails naming the case, the old and the new one."""

from __future__ import annotations

import pytest

from rocm_build.scripts import upstream_choices


def attention(choice: str) -> dict:
    return {"choice": choice, "detail": None}


# What vLLM 0.31.0 chose without our patch (components/vllm:choices, 2026-11-27).
UNPATCHED = {
    "gfx1151": {"attention_d128_bf16": attention("ROCM_ATTN"), "attention_d128_bf16_kvconn": attention("TRITON_ATTN")},
    "gfx942": {"attention_d128_bf16": attention("ROCM_ATTN"), "attention_d128_bf16_kvconn": attention("TRITON_ATTN")},
}
EXPECTED = {
    "attention_*@gfx1151": "TRITON_ATTN",
    "attention_*@gfx942": "ROCM_ATTN",
    "attention_*_kvconn*@gfx942": "TRITON_ATTN",
}


@pytest.fixture(scope="module")
def choices():
    return upstream_choices


def test_a_changed_choice_fails_naming_case_expected_and_new_choice(choices) -> None:
    assert choices.verdict(UNPATCHED, EXPECTED) == [
        "attention_d128_bf16@gfx1151: the choice changed: expected `TRITON_ATTN` (by \"attention_*@gfx1151\"), now `ROCM_ATTN`"
    ]


def test_the_patched_choices_pass_and_the_longest_pattern_wins(choices) -> None:
    patched = {**UNPATCHED, "gfx1151": {c: attention("TRITON_ATTN") for c in UNPATCHED["gfx1151"]}}
    assert choices.verdict(patched, EXPECTED) == []
    assert choices.expected_for("attention_d64_fp16_kvconn_swa@gfx942", EXPECTED) == "attention_*_kvconn*@gfx942"
    assert choices.expected_for("attention_d64_fp16_swa@gfx942", EXPECTED) == "attention_*@gfx942"


def test_an_exact_key_beats_every_pattern(choices) -> None:
    expected = {**EXPECTED, "attention_d128_bf16@gfx1151": "ROCM_ATTN"}
    assert choices.verdict(UNPATCHED, expected) == []


def test_a_case_no_key_states_and_a_key_no_case_matches_both_fail(choices) -> None:
    found = {"gfx1151": {"moe_mixtral_8x7b": attention("default (no E=8,N=14336,device_name=AMD_Radeon_8060S.json)")}}
    assert choices.verdict(found, {"triton_kernels@*": "unavailable"}) == [
        "moe_mixtral_8x7b@gfx1151: chose `default (no E=8,N=14336,device_name=AMD_Radeon_8060S.json)`, which no key of "
        "`expected_choices` states: add \"moe_mixtral_8x7b@gfx1151\": \"default (no E=8,N=14336,device_name=AMD_Radeon_8060S.json)\"",
        "\"triton_kernels@*\" in `expected_choices` matches no case on any gpu target: drop it (or the workload lost a case)",
    ]


def test_a_choice_is_a_string_or_a_dict_with_detail(choices) -> None:
    assert choices.as_choice("rdna") == {"choice": "rdna", "detail": None}
    assert choices.as_choice({"choice": "TRITON_ATTN", "detail": {"priority": ["TRITON_ATTN"]}}) == {
        "choice": "TRITON_ATTN", "detail": {"priority": ["TRITON_ATTN"]}}
    # The kernels the choice runs, for a report to put beside their figures.
    assert choices.as_choice({"choice": "ROCM_ATTN", "detail": None, "kernels": ["_fwd_kernel"]}) == {
        "choice": "ROCM_ATTN", "detail": None, "kernels": ["_fwd_kernel"]}


def test_the_table_has_one_row_a_case_and_one_column_a_target(choices) -> None:
    assert choices.table(UNPATCHED) == [
        "  case                        gfx1151  gfx942",
        "  attention_d128_bf16         ROCM_ATTN  |  ROCM_ATTN",
        "  attention_d128_bf16_kvconn  TRITON_ATTN  |  TRITON_ATTN",
    ]


def test_the_output_names_the_tree_under_test_before_triton(choices) -> None:
    # `under_test` as the test's rule writes it into expected.json (workloads/source.py).
    line = ("components/vllm:sdist: vllm-sdist sha256 0123456789ab with 1 patch(es): "
            "patches/vllm/0001-gfx1151.patch (sha256 95c733102ebe)")  # fmt: skip
    assert choices.header([{"target": "components/vllm:sdist", "line": line}], "3.7.1") == [f"under test: {line}", "triton 3.7.1"]
    assert choices.header([], "3.7.1") == ["triton 3.7.1"]
