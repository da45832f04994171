"""Is the real chain running as built, or a silent fallback? Run in the install set's venv:

    . ./env.sh && python runtime_checks.py gfx1151

It prints what it found, one line per check, and exits 1 naming every check that failed:
- vLLM's platform is ROCm (vLLM picks it through amdsmi; without amdsmi it falls back to an
  unspecified platform and says nothing);
- `torch.cuda.get_arch_list()` holds the gpu target (else every kernel fails with
  hipErrorInvalidImage);
- flash-attention runs its AMD Triton backend (`flash_attn.flash_attn_interface` imports
  `flash_attn.flash_attn_triton_amd` only when FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE, at
  0e60e394 and v2.8.3.post1 lines 11-15; otherwise it imports the Composable Kernel extension);
and which SDPA backend torch chose on its own (gfx1151 has been seen falling back to the math
path: TheRock #1364). The decisions are functions of the objects they read, so
runtime_checks_test.py proves, with test doubles, that each fails when it should.
"""

from __future__ import annotations

import sys
from typing import Iterable, List, Optional, Sequence

# The dispatcher ops `scaled_dot_product_attention` chooses between (aten's sdp_utils): the op
# a profile records is the backend that ran. Kernel names are no good for this: they are the
# implementation's (AOTriton's `attn_fwd`, CK's, Triton's JIT names) and change with it.
SDPA_OPS = {
    "aten::_scaled_dot_product_flash_attention": "FLASH_ATTENTION",
    "aten::_scaled_dot_product_efficient_attention": "EFFICIENT_ATTENTION",
    "aten::_scaled_dot_product_cudnn_attention": "CUDNN_ATTENTION",
    "aten::_scaled_dot_product_fused_attention_overrideable": "OVERRIDEABLE",
    "aten::_scaled_dot_product_attention_math": "MATH",
}
TRITON_AMD = "flash_attn.flash_attn_triton_amd"


def platform_problem(platform) -> Optional[str]:
    """vllm.platforms.current_platform must be ROCm's."""
    if platform.is_rocm():
        return None
    return (
        f"vLLM's platform is {type(platform).__name__} (device_type {platform.device_type!r}), not ROCm: vLLM "
        "detects ROCm through amdsmi (`import amdsmi`, `amdsmi_init()`, a GPU handle). Install amdsmi from the SDK "
        "as the install set's requirements.txt says, and check that /dev/kfd is readable."
    )


def arch_problem(arch_list: Sequence[str], target: str) -> Optional[str]:
    """torch must carry code for the gpu target (entries may have features: `gfx1151:xnack-`)."""
    if target in (arch.split(":")[0] for arch in arch_list):
        return None
    return (
        f"torch.cuda.get_arch_list() is {list(arch_list)}: torch has no {target} code, so its kernels fail "
        "with hipErrorInvalidImage. Install the device wheel for it (TheRock: torch[device-" + target + "])."
    )


def flash_attn_problem(interface) -> Optional[str]:
    """flash_attn.flash_attn_interface must have picked the AMD Triton backend."""
    backend = getattr(getattr(interface, "flash_attn_gpu", None), "__name__", "none")
    if getattr(interface, "USE_TRITON_ROCM", False) and backend.startswith(TRITON_AMD):
        return None
    return (
        f"flash-attention's backend is {backend} (USE_TRITON_ROCM={getattr(interface, 'USE_TRITON_ROCM', None)}), "
        f"not the AMD Triton one ({TRITON_AMD}): source the install set's env.sh "
        "(FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE) before Python starts."
    )


def sdpa_backend(op_names: Iterable[str]) -> str:
    """The SDPA backend(s) a profile's op names show, in the order they ran."""
    found = [SDPA_OPS[name] for name in dict.fromkeys(op_names) if name in SDPA_OPS]
    return ", ".join(found) or "none recorded"


def import_problem(what: str, error: BaseException) -> str:
    return f"{what} did not import: {type(error).__name__}: {error}"


def default_sdpa_ops(torch) -> List[str]:
    """Op names of one SDPA call with no backend forced: what torch picks for itself."""
    q = torch.randn(1, 8, 256, 64, device="cuda", dtype=torch.float16)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        torch.nn.functional.scaled_dot_product_attention(q, q, q)
        torch.cuda.synchronize()
    return [event.name for event in prof.events()]


def main(argv: Sequence[str]) -> int:
    target = argv[1]
    problems: List[str] = []
    import torch  # pants: no-infer-dep (the install set's venv, not a resolve)

    print(f"torch {torch.__version__} hip {torch.version.hip} arch list {torch.cuda.get_arch_list()}")
    problems.append(arch_problem(torch.cuda.get_arch_list(), target) or "")
    try:
        from vllm.platforms import current_platform  # pants: no-infer-dep (the install set's venv, not a resolve)

        print(f"vLLM platform {type(current_platform).__name__} device_type {current_platform.device_type!r}")
        problems.append(platform_problem(current_platform) or "")
    except Exception as e:  # noqa: BLE001 - any import failure is the finding
        problems.append(import_problem("vllm.platforms", e))
    try:
        import flash_attn.flash_attn_interface as interface  # pants: no-infer-dep (the install set's venv, not a resolve)

        print(f"flash-attention backend {interface.flash_attn_gpu.__name__}")
        problems.append(flash_attn_problem(interface) or "")
    except Exception as e:  # noqa: BLE001
        problems.append(import_problem("flash_attn.flash_attn_interface", e))
    print(f"SDPA backend (torch's own choice, fp16 1x8x256x64): {sdpa_backend(default_sdpa_ops(torch))}")
    problems = [p for p in problems if p]
    for problem in problems:
        print(f"FAILED: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
