import pytest

from rocm_build.wheel.env import build_env, check_gpu_targets


def test_unknown_gpu_target_suggests_nearest() -> None:
    with pytest.raises(ValueError) as e:
        check_gpu_targets(["gfx1151", "gfx1115"], "components/vllm:wheel")
    assert str(e.value).startswith(
        "components/vllm:wheel: unknown gpu target `gfx1115` in `gpu_targets`. Did you mean `gfx1151`?"
    )


def test_env_for_flash_attention() -> None:
    env = build_env("flash_attention", ["gfx1151", "gfx1100"], {"X": "1"}, "t")
    assert env["PYTORCH_ROCM_ARCH"] == "gfx1100;gfx1151"
    assert env["FLASH_ATTENTION_TRITON_AMD_ENABLE"] == "TRUE"
    assert (env["FLASH_ATTENTION_FORCE_BUILD"], env["BUILD_TARGET"]) == ("TRUE", "rocm")
    assert env["X"] == "1"
