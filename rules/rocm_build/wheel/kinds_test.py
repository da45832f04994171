"""The table of component kinds is what `kind` accepts and what a build's environment gets."""

from __future__ import annotations

from rocm_build.wheel.env import build_env
from rocm_build.wheel.kinds import KINDS, kind_help
from rocm_build.wheel.target_types import WheelKindField


def test_the_field_accepts_exactly_the_kinds_of_the_table() -> None:
    assert WheelKindField.valid_choices == tuple(KINDS)
    assert set(KINDS) == {"generic", "aotriton", "torch", "triton", "vision", "flash_attention", "vllm", "aiter"}
    help_text = kind_help()
    assert all(f"`{name}`:" in help_text for name in KINDS)
    assert "`torch`: PyTorch (BUILD_TEST, USE_CUDA" in help_text and "its version is `PYTORCH_BUILD_VERSION`" in help_text


def test_a_kind_adds_its_table_to_every_builds_and_the_targets_env_wins() -> None:
    env = build_env("flash_attention", ["gfx1151", "gfx1100"], {"BUILD_TARGET": "mine"}, "c:fa")
    assert env["PYTORCH_ROCM_ARCH"] == "gfx1100;gfx1151"
    assert env["FLASH_ATTENTION_FORCE_BUILD"] == "TRUE"
    assert env["BUILD_TARGET"] == "mine"
    assert "USE_ROCM" not in env
