"""flash-attention's Triton AMD backend as a workload for triton_kernels.py.

    export FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE       # set here too, if unset
    export PYTHONPATH=/path/to/flash_attn-2.8.3.post2   # the PyPI sdist, extracted, not built
    python rules/rocm_build/scripts/triton_kernels.py \
        --workload components/flash_attention/kernels_workload.py --target gfx1151 --report fa.json

Each case calls the functions of `flash_attn.flash_attn_triton_amd.interface_fa` that
flash-attention's public API (`flash_attn_func`, `flash_attn_varlen_func`,
`flash_attn_with_kvcache`, their autograd backward) calls when the Triton AMD backend is
enabled: `fwd`, `bwd`, `varlen_fwd`, `varlen_bwd`, `fwd_kvcache`. The public functions
themselves cannot take CPU tensors: `flash_attn_interface` wraps each call in a
`torch.library.custom_op(..., device_types="cuda")`, which has no CPU kernel, so the workload
calls one level down, the same code those ops run.

Shapes are small and representative (batch 2, seqlen 128-256, 4 heads, GQA 8/2 in the
kvcache case); what matters is the specialization (dtype, head dim, causal, varlen), not
the size. The backward is the default `BWD_MODE=split` (a preprocess kernel, then dK/dV and
dQ kernels). Nothing runs, so outputs stay as allocated.

One more case, `autotune_configs`, runs what `FLASH_ATTENTION_TRITON_AMD_AUTOTUNE=1` runs at
import (fwd_prefill.get_autotune_configs): it picks RDNA or CDNA configs by `utils.is_rdna()` /
`is_cdna()`, whose upstream lists do not name gfx1151, so on the unpatched sdist gfx1151 raises
"Unknown Device Type". patches/flash_attention/0001 adds gfx1150/gfx1151 to `is_rdna()`; the
case checks that gfx1151 then gets exactly the RDNA configs.

Not covered, and why:
- Paged KV (`fwd_kvcache(block_table=...)`): this backend accepts the argument and ignores
  it (its decode kernel has no block table), so there is no paged kernel to compile.
- Dropout, ALiBi, softcap, fp8: off in the Llama-style use this repo targets.
"""

from __future__ import annotations

import os

os.environ.setdefault("FLASH_ATTENTION_TRITON_AMD_ENABLE", "TRUE")

import functools  # noqa: E402
import sys  # noqa: E402
from typing import Callable, Iterable  # noqa: E402

import torch  # noqa: E402

from flash_attn.flash_attn_triton_amd import fwd_prefill, interface_fa  # noqa: E402

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
HEAD_DIMS = (64, 128, 256)
BATCH, SEQLEN, HEADS = 2, 256, 4


# ---------------------------------------------------------------------------------------------
# Test doubles for the GPU.


def _no_device_switch(device: object) -> int:
    return -1


def install_gpu_doubles() -> None:
    """flash_attn.ops.triton.rotary enters `torch.cuda.device(x.device.index)` before its
    launch; for a CPU tensor the index is None, which torch's CPU build cannot exchange.
    On the device this only selects the current GPU: a no-op stands in for it."""
    torch.cuda._exchange_device = _no_device_switch
    torch.cuda._maybe_exchange_device = _no_device_switch


def forget_arch() -> None:
    """flash_attn_triton_amd.utils caches the arch (`get_arch`, `is_rdna`, `is_cdna`, ...)
    with functools.cache on first use; clear them so each target is asked afresh."""
    for name, module in list(sys.modules.items()):
        if not name.startswith("flash_attn.flash_attn_triton_amd"):
            continue
        for value in vars(module).values():
            if isinstance(value, functools._lru_cache_wrapper):
                value.cache_clear()


# ---------------------------------------------------------------------------------------------
# Cases.


def qkv(dtype: torch.dtype, head_dim: int, seqlen: int = SEQLEN, heads_k: int = HEADS):
    q = torch.zeros(BATCH, seqlen, HEADS, head_dim, dtype=dtype)
    k = torch.zeros(BATCH, seqlen, heads_k, head_dim, dtype=dtype)
    v = torch.zeros(BATCH, seqlen, heads_k, head_dim, dtype=dtype)
    return q, k, v


def forward(dtype: torch.dtype, head_dim: int, causal: bool) -> None:
    q, k, v = qkv(dtype, head_dim)
    interface_fa.fwd(q, k, v, None, None, 0.0, head_dim**-0.5, causal, -1, -1, 0.0, False)


def backward(dtype: torch.dtype, head_dim: int, causal: bool) -> None:
    q, k, v = qkv(dtype, head_dim)
    out = torch.zeros_like(q)
    lse = torch.zeros(BATCH, HEADS, SEQLEN, dtype=torch.float32)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    interface_fa.bwd(torch.zeros_like(out), q, k, v, out, lse, dq, dk, dv, None, 0.0,
                     head_dim**-0.5, causal, -1, -1, 0.0, False)


def varlen_tensors(dtype: torch.dtype, head_dim: int):
    # Three sequences of 100, 28 and 128 tokens packed into 256 rows (thd layout).
    cu_seqlens = torch.tensor([0, 100, 128, 256], dtype=torch.int32)
    q = torch.zeros(256, HEADS, head_dim, dtype=dtype)
    return q, torch.zeros_like(q), torch.zeros_like(q), cu_seqlens, 128


def varlen_forward(dtype: torch.dtype, head_dim: int, causal: bool) -> None:
    q, k, v, cu, max_len = varlen_tensors(dtype, head_dim)
    interface_fa.varlen_fwd(q, k, v, None, cu, cu, None, None, None, None, max_len, max_len,
                            0.0, head_dim**-0.5, False, causal, -1, -1, 0.0, False)


def varlen_backward(dtype: torch.dtype, head_dim: int, causal: bool) -> None:
    q, k, v, cu, max_len = varlen_tensors(dtype, head_dim)
    out = torch.zeros_like(q)
    lse = torch.zeros(HEADS, q.shape[0], dtype=torch.float32)
    interface_fa.varlen_bwd(torch.zeros_like(out), q, k, v, out, lse, torch.zeros_like(q),
                            torch.zeros_like(k), torch.zeros_like(v), cu, cu, None, max_len,
                            max_len, 0.0, head_dim**-0.5, False, causal, -1, -1, 0.0, False)


def kvcache(dtype: torch.dtype, head_dim: int, rotary: bool) -> None:
    """One decode step: 1 new token per sequence appended to a 512-slot cache, GQA 8/2."""
    cache_len, heads_k = 512, 2
    q = torch.zeros(BATCH, 1, 8, head_dim, dtype=dtype)
    k_cache = torch.zeros(BATCH, cache_len, heads_k, head_dim, dtype=dtype)
    v_cache = torch.zeros_like(k_cache)
    k_new = torch.zeros(BATCH, 1, heads_k, head_dim, dtype=dtype)
    v_new = torch.zeros_like(k_new)
    seqlens = torch.tensor([300, 17], dtype=torch.int32)
    cos = sin = None
    if rotary:  # the rotary embedding (flash_attn.ops.triton.rotary) runs first, in Triton
        cos = torch.zeros(cache_len, head_dim // 2, dtype=dtype)
        sin = torch.zeros_like(cos)
    interface_fa.fwd_kvcache(q, k_cache, v_cache, k_new, v_new, seqlens, cos, sin, None, None,
                             None, None, None, head_dim**-0.5, True, -1, -1, 0.0, False, 0)


def autotune_configs() -> None:
    """What `FLASH_ATTENTION_TRITON_AMD_AUTOTUNE=1` does at import: pick the arch's
    config list (fwd_prefill.get_autotune_configs)."""
    saved = fwd_prefill.AUTOTUNE
    fwd_prefill.AUTOTUNE = True
    try:
        configs, _ = fwd_prefill.get_autotune_configs()
    finally:
        fwd_prefill.AUTOTUNE = saved
    rdna, _ = fwd_prefill.get_rdna_autotune_configs()
    if [str(c) for c in configs] != [str(c) for c in rdna]:
        raise AssertionError(f"is_rdna() is {fwd_prefill.is_rdna()}: the autotune configs are not RDNA's: {configs}")


def cases() -> Iterable[tuple[str, Callable[[], None]]]:
    """Forward: every dtype x head dim x causal. Backward: the same for head dims 64 and
    128, and one head-dim-256 case: each d256 backward takes 14-34 s to compile here (its
    dK/dV kernel spills thousands of VGPRs on gfx1151), and this set compiles in under two
    minutes a target on a 2-core machine. Varlen in fp16, kvcache in both dtypes."""
    install_gpu_doubles()
    forget_arch()
    out: list[tuple[str, Callable[[], None]]] = []
    for dname, dtype in DTYPES.items():
        for hd in HEAD_DIMS:
            for causal in (False, True):
                tag = f"{dname}_d{hd}_{'causal' if causal else 'full'}"
                out.append((f"fwd_{tag}", functools.partial(forward, dtype, hd, causal)))
                if hd < 256 or (dname, causal) == ("fp16", True):
                    out.append((f"bwd_{tag}", functools.partial(backward, dtype, hd, causal)))
        out.append((f"kvcache_{dname}_d128_rotary", functools.partial(kvcache, dtype, 128, True)))
        out.append((f"kvcache_{dname}_d64", functools.partial(kvcache, dtype, 64, False)))
    fp16 = torch.float16
    out.append(("varlen_fwd_fp16_d128_causal", functools.partial(varlen_forward, fp16, 128, True)))
    out.append(("varlen_bwd_fp16_d128_causal", functools.partial(varlen_backward, fp16, 128, True)))
    out.append(("autotune_configs", autotune_configs))
    return out
