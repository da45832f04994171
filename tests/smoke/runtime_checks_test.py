"""runtime_checks' decisions, on test doubles of what it reads on a gfx1151 machine (vLLM's
current_platform, torch.cuda, flash_attn.flash_attn_interface, a profile's op names): each check
passes on the real thing's shape and fails, with its reason, on a fallback's."""

from __future__ import annotations

import types

from smoke import runtime_checks
from smoke.runtime_checks import arch_problem, flash_attn_problem, platform_problem, sdpa_backend


class FakeRocmPlatform:
    """Test double of vllm.platforms.rocm.RocmPlatform (what current_platform is with amdsmi)."""

    device_type = "cuda"

    def is_rocm(self) -> bool:
        return True


class FakeUnspecifiedPlatform:
    """Test double of vllm.platforms.interface.UnspecifiedPlatform (no amdsmi: the silent fallback)."""

    device_type = ""

    def is_rocm(self) -> bool:
        return False


class FakeTorchCuda:
    """Test double of torch.cuda: only get_arch_list, as runtime_checks reads it."""

    def __init__(self, archs):
        self.archs = archs

    def get_arch_list(self):
        return list(self.archs)


def fake_flash_attn_interface(use_triton_rocm: bool, backend: str) -> types.SimpleNamespace:
    """Test double of flash_attn.flash_attn_interface: its switch and the backend module it imported."""
    return types.SimpleNamespace(USE_TRITON_ROCM=use_triton_rocm, flash_attn_gpu=types.SimpleNamespace(__name__=backend))


def test_vllm_platform_must_be_rocm() -> None:
    assert platform_problem(FakeRocmPlatform()) is None
    problem = platform_problem(FakeUnspecifiedPlatform())
    assert problem.startswith("vLLM's platform is FakeUnspecifiedPlatform (device_type ''), not ROCm: vLLM detects ROCm through amdsmi")


def test_torch_must_carry_the_target_arch() -> None:
    assert arch_problem(FakeTorchCuda(["gfx1100", "gfx1151"]).get_arch_list(), "gfx1151") is None
    assert arch_problem(FakeTorchCuda(["gfx1151:xnack-"]).get_arch_list(), "gfx1151") is None
    assert arch_problem(FakeTorchCuda(["gfx1100", "gfx1150"]).get_arch_list(), "gfx1151") == (
        "torch.cuda.get_arch_list() is ['gfx1100', 'gfx1150']: torch has no gfx1151 code, so its kernels fail with "
        "hipErrorInvalidImage. Install the device wheel for it (TheRock: torch[device-gfx1151])."
    )
    assert arch_problem(FakeTorchCuda([]).get_arch_list(), "gfx1151") is not None


def test_flash_attention_must_run_its_amd_triton_backend() -> None:
    assert flash_attn_problem(fake_flash_attn_interface(True, "flash_attn.flash_attn_triton_amd.interface_fa")) is None
    ck = flash_attn_problem(fake_flash_attn_interface(False, "flash_attn_2_cuda"))
    assert ck.startswith(
        "flash-attention's backend is flash_attn_2_cuda (USE_TRITON_ROCM=False), not the AMD Triton one "
        "(flash_attn.flash_attn_triton_amd): source the install set's env.sh"
    )
    # The switch on but another module imported, or an interface without the switch at all.
    assert flash_attn_problem(fake_flash_attn_interface(True, "flash_attn_2_cuda")) is not None
    assert flash_attn_problem(types.SimpleNamespace()).startswith("flash-attention's backend is none (USE_TRITON_ROCM=None)")


def test_sdpa_backend_is_read_from_the_dispatcher_ops() -> None:
    flash = ["aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention", "aten::_flash_attention_forward", "aten::empty"]
    math = ["aten::scaled_dot_product_attention", "aten::_scaled_dot_product_attention_math", "aten::matmul", "aten::_softmax"]
    assert sdpa_backend(flash) == "FLASH_ATTENTION"
    assert sdpa_backend(math) == "MATH"
    assert sdpa_backend(["aten::_scaled_dot_product_efficient_attention"] * 2) == "EFFICIENT_ATTENTION"
    assert sdpa_backend(["aten::mm"]) == "none recorded"


def test_an_import_failure_is_a_finding() -> None:
    error = ModuleNotFoundError("No module named 'flash_attn_2_cuda'")
    assert runtime_checks.import_problem("flash_attn.flash_attn_interface", error) == (
        "flash_attn.flash_attn_interface did not import: ModuleNotFoundError: No module named 'flash_attn_2_cuda'"
    )
