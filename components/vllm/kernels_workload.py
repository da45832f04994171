"""vLLM's Triton kernels for a Llama-style model on ROCm, as a workload for triton_kernels.py.

    export PYTHONPATH=/path/to/vllm-0.31.0   # the PyPI sdist, extracted, not built
    python rules/rocm_build/scripts/triton_kernels.py \
        --workload components/vllm/kernels_workload.py --target gfx1151 --report vllm.json

`triton_unified_attention` (imported at module level) needs numpy, packaging and regex
beyond torch and triton. The other entry points, imported by their cases, import
`vllm._custom_ops` or `vllm.model_executor`, which pull in much of vLLM's runtime
requirements (requirements/common.txt); measured import closure: numpy requests psutil pyzmq
pydantic cbor2 transformers aiohttp openai openai-harmony pillow pybase64 cachetools msgspec
cloudpickle uvloop py-cpuinfo prometheus-client xgrammar fastapi partial-json-parser
llguidance packaging regex. Without them those cases fail with ModuleNotFoundError.

vLLM's compiled extensions (`vllm._C`, `_rocm_C`, `_moe_C`) are not built; vLLM logs that it
could not import them, and the few of their HIP ops that sit between the Triton launches
below are replaced by no-op test doubles (they are HIP kernels, not Triton: there is nothing
of theirs to compile here).

Cases, each through vLLM's own Python entry point:
- `unified_attention` (vllm/v1/attention/ops/triton_unified_attention.py), the kernel of the
  TRITON_ATTN backend, with the KV cache laid out and the 3D-decode buffers sized as
  TritonAttentionMetadataBuilder does: a mixed prefill/decode batch (the 2D kernel) and a
  decode-only batch (the 3D kernel plus `reduce_segments`); fp16 and bf16, head dims 64
  and 128, GQA 8/2, block size 16.
- `chunked_prefill_paged_decode` (ops/chunked_prefill_paged_decode.py), the kernels of
  ROCM_ATTN, the first backend `RocmPlatform` tries: the Triton prefix-prefill kernel, then
  decode either in Triton (`kernel_paged_attention_2d`) or in the HIP kernel
  `paged_attention_rocm`, as vLLM's `use_rocm_custom_paged_attention` decides for the arch.
  MHA (Llama-2-like, decode in Triton on gfx11) and GQA 4 (Llama-3-like, HIP decode).
- `triton_reshape_and_cache_flash` (ops/triton_reshape_and_cache_flash.py): the paged KV
  cache write of TRITON_ATTN (ROCM_ATTN writes block sizes 16 and 32 with the HIP
  `reshape_and_cache` of csrc/cache_kernels.cu and only other sizes with this kernel).
- Fused MoE (model_executor/layers/fused_moe/fused_moe.py): vLLM's config choice
  (`try_get_optimal_moe_config`, which reads a tuned JSON for the device name when it has
  one), its expert assignment (`_prepare_expert_assignment`), and both expert GEMMs through
  `dispatch_fused_moe_kernel`, as `fused_experts_impl` runs them. fused_experts_impl itself
  is not called: between the GEMMs it calls HIP ops of the unbuilt extension
  (`torch.ops._C.silu_and_mul`, `ops.moe_sum`).
- Rotary: a Llama's RotaryEmbedding on ROCm calls the HIP `ops.rotary_embedding`
  (csrc/pos_encoding_kernels.cu), or AITER's Triton rope when AITER is enabled; vLLM's own
  Triton rotary kernel is M-RoPE (`triton_mrope`, rotary_embedding/mrope.py, Qwen2-VL
  style), compiled here as the one rotary Triton kernel vLLM ships.

vLLM picks its platform and arch at import, as on the box: `vllm.platforms` detects ROCm
through `amdsmi`, and `vllm.platforms.rocm` reads the gfx name from amdsmi once, at import,
into `_GCN_ARCH` and the `on_gfx*()` flags. An `amdsmi` test double answers for the arch
Triton's active driver targets; for each target `cases()` reloads `vllm.platforms.rocm` and
clears vLLM's function caches, so the flags, fp8 dtype, device name and MoE configs follow.
"""

from __future__ import annotations

import functools
import importlib
import sys
import types
from typing import Any, Callable, Iterable

import torch
import triton

# ---------------------------------------------------------------------------------------------
# Test doubles for the GPU and for vLLM's unbuilt HIP extension.

# What amdsmi reports per arch: PCI device id (the keys of vLLM's _ROCM_DEVICE_ID_NAME_MAP
# where it has them), market name and VRAM, for one product each.
AMDSMI_DEVICES: dict[str, tuple[str, str, int]] = {
    "gfx1151": ("0x1586", "AMD Radeon 8060S Graphics", 96 << 30),
    "gfx1150": ("0x150e", "AMD Radeon 890M Graphics", 16 << 30),
    "gfx1100": ("0x744c", "AMD Radeon RX 7900 XTX", 24 << 30),
    "gfx1201": ("0x7550", "AMD Radeon RX 9070 XT", 16 << 30),
    "gfx90a": ("0x740f", "AMD Instinct MI210", 64 << 30),
    "gfx942": ("0x74a1", "AMD Instinct MI300X", 192 << 30),
    "gfx950": ("0x75a3", "AMD Instinct MI355X", 288 << 30),
}


def target_arch() -> str:
    """The arch triton_kernels.py is compiling for (its compile-only driver's target)."""
    return triton.runtime.driver.active.get_current_target().arch


def amdsmi_double() -> types.ModuleType:
    """An `amdsmi` with one GPU of the target arch: what vLLM's platform detection and
    RocmPlatform (arch, device name, memory) ask of it."""
    smi = types.ModuleType("amdsmi")

    class AmdSmiException(Exception):
        pass

    smi.AmdSmiException = AmdSmiException
    smi.AmdSmiMemoryType = types.SimpleNamespace(VRAM=0, VIS_VRAM=1, GTT=2)
    smi.amdsmi_init = lambda *args: None
    smi.amdsmi_shut_down = lambda: None
    smi.amdsmi_get_processor_handles = lambda: ["gpu0"]

    def asic_info(handle: str) -> dict[str, Any]:
        arch = target_arch()
        device_id, market_name, _ = AMDSMI_DEVICES[arch]
        return {"target_graphics_version": arch, "device_id": device_id,
                "market_name": market_name, "vendor_name": "Advanced Micro Devices Inc. [AMD/ATI]"}

    smi.amdsmi_get_gpu_asic_info = asic_info
    smi.amdsmi_get_gpu_memory_total = lambda handle, kind: AMDSMI_DEVICES[target_arch()][2]
    smi.amdsmi_get_gpu_device_uuid = lambda handle: "00000000-0000-0000-0000-000000000000"
    smi.amdsmi_topo_get_link_type = lambda a, b: {"hops": 1, "type": 2}
    smi.amdsmi_topo_get_numa_node_number = lambda handle: 0
    return smi


def hip_op_double(*args: Any, **kwargs: Any) -> None:
    """Stands in for a HIP kernel of vLLM's extension: nothing to compile, nothing runs."""


def hip_ops() -> None:
    """Replace the HIP ops called between the Triton launches below (see the docstring)."""
    from vllm import _custom_ops as ops

    for name in ("paged_attention_rocm", "moe_align_block_size"):
        setattr(ops, name, hip_op_double)


sys.modules["amdsmi"] = amdsmi_double()

# Light imports only at module level: these need numpy, packaging and regex beyond torch and
# triton. The other entry points are imported by their cases, so that a venv without vLLM's
# wider requirements still compiles unified attention and reports the rest as failures of
# their cases (ModuleNotFoundError naming the missing package).
from vllm.platforms import current_platform  # noqa: E402
from vllm.v1.attention.ops.triton_unified_attention import unified_attention  # noqa: E402

# TritonAttentionMetadataBuilder's constants (vllm/v1/attention/backends/triton_attn.py);
# importing that module would pull in vllm.config and most of vLLM.
MIN_LAUNCH_GRID_SIZE_2D = 128
NUM_PAR_SOFTMAX_SEGMENTS = 16


def select_target_arch() -> None:
    """Make vLLM see the target arch, as a fresh process on that GPU would."""
    rocm = importlib.import_module("vllm.platforms.rocm")
    for name, module in list(sys.modules.items()):
        if name == "vllm" or name.startswith("vllm."):
            for value in list(vars(module).values()):
                _clear_caches(value)
                if isinstance(value, type) and value.__module__.startswith("vllm.platforms"):
                    for member in vars(value).values():
                        _clear_caches(member)
    # current_platform is an instance of the RocmPlatform class of the first import, which
    # an earlier reload left out of the module: clear the caches of its methods too
    # (get_device_name, get_device_capability).
    for cls in type(current_platform).__mro__:
        for member in vars(cls).values():
            _clear_caches(member)
    importlib.reload(rocm)  # recomputes _GCN_ARCH and the on_gfx*() flags from amdsmi
    assert current_platform.is_rocm(), f"vLLM resolved {type(current_platform).__name__}"
    assert rocm._GCN_ARCH == target_arch(), rocm._GCN_ARCH
    assert current_platform.get_device_name() == rocm._ROCM_DEVICE_ID_NAME_MAP.get(
        AMDSMI_DEVICES[target_arch()][0], AMDSMI_DEVICES[target_arch()][1])


def _clear_caches(obj: Any) -> None:
    # functools caches, also under classmethod and functools.wraps layers. Only functions
    # are looked into: a Platform answers any attribute (None for unknown ones).
    for _ in range(4):
        if isinstance(obj, functools._lru_cache_wrapper):
            obj.cache_clear()
        if isinstance(obj, (classmethod, staticmethod)):
            obj = obj.__func__
        elif isinstance(obj, (types.FunctionType, functools._lru_cache_wrapper)):
            obj = getattr(obj, "__wrapped__", None)
        else:
            return


# ---------------------------------------------------------------------------------------------
# Attention.

NUM_HEADS, NUM_KV_HEADS, BLOCK_SIZE, NUM_BLOCKS = 8, 2, 16, 64


def batch(query_lens: list[int], context_lens: list[int]) -> dict[str, Any]:
    """Metadata of a batch as the scheduler would hand it: sequence i has context_lens[i]
    tokens in the cache and query_lens[i] new ones."""
    seq_lens = [q + c for q, c in zip(query_lens, context_lens)]
    blocks = max(triton.cdiv(s, BLOCK_SIZE) for s in seq_lens)
    cu = [0]
    for q in query_lens:
        cu.append(cu[-1] + q)
    return {
        "cu_seqlens_q": torch.tensor(cu, dtype=torch.int32),
        "seq_lens": torch.tensor(seq_lens, dtype=torch.int32),
        "block_table": (torch.arange(len(seq_lens) * blocks, dtype=torch.int32) % NUM_BLOCKS)
        .view(len(seq_lens), blocks),
        "max_query_len": max(query_lens),
        "max_seq_len": max(seq_lens),
        "num_tokens": cu[-1],
    }


MIXED = ([100, 1, 1, 37], [0, 200, 63, 90])  # two prefills (one chunked), two decodes
DECODE = ([1, 1, 1, 1], [511, 200, 63, 90])


def flash_kv_cache(dtype: torch.dtype, head_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    # TRITON_ATTN's cache: logical (blocks, heads, slots, 2 * head_size), viewed as
    # (blocks, slots, heads, head_size) K and V halves, strides and all.
    kv = torch.zeros(NUM_BLOCKS, NUM_KV_HEADS, BLOCK_SIZE, 2 * head_size, dtype=dtype)
    key_cache, value_cache = kv.transpose(1, 2).split(head_size, dim=-1)
    return key_cache, value_cache


def triton_attn(dtype: torch.dtype, head_size: int, lens: tuple[list[int], list[int]]) -> None:
    meta = batch(*lens)
    q = torch.zeros(meta["num_tokens"], NUM_HEADS, head_size, dtype=dtype)
    key_cache, value_cache = flash_kv_cache(dtype, head_size)
    num_seqs = len(meta["seq_lens"])
    seq_threshold_3d = MIN_LAUNCH_GRID_SIZE_2D // NUM_KV_HEADS
    segments = NUM_PAR_SOFTMAX_SEGMENTS
    padded = triton.next_power_of_2(head_size)
    scale = torch.ones(()).expand(num_seqs, NUM_KV_HEADS)  # layer._k_scale / _v_scale
    unified_attention(
        q=q, k=key_cache, v=value_cache, out=torch.zeros_like(q),
        cu_seqlens_q=meta["cu_seqlens_q"], max_seqlen_q=meta["max_query_len"],
        seqused_k=meta["seq_lens"], max_seqlen_k=meta["max_seq_len"],
        softmax_scale=head_size**-0.5, causal=True, window_size=(-1, -1),
        block_table=meta["block_table"], softcap=0, q_descale=None, k_descale=scale,
        v_descale=scale, seq_threshold_3D=seq_threshold_3d,
        num_par_softmax_segments=segments,
        softmax_segm_output=torch.empty(seq_threshold_3d, NUM_HEADS, segments, padded),
        softmax_segm_max=torch.empty(seq_threshold_3d, NUM_HEADS, segments),
        softmax_segm_expsum=torch.empty(seq_threshold_3d, NUM_HEADS, segments),
    )


def reshape_and_cache(dtype: torch.dtype, head_size: int) -> None:
    num_tokens = 64
    key = torch.zeros(num_tokens, NUM_KV_HEADS, head_size, dtype=dtype)
    key_cache, value_cache = flash_kv_cache(dtype, head_size)
    slots = torch.arange(num_tokens, dtype=torch.int64)
    one = torch.ones((), dtype=torch.float32)
    from vllm.v1.attention.ops.triton_reshape_and_cache_flash import triton_reshape_and_cache_flash

    triton_reshape_and_cache_flash(key, torch.zeros_like(key), key_cache, value_cache, slots,
                                   "auto", one, one)


def rocm_attn(dtype: torch.dtype, head_size: int, num_heads: int, num_kv_heads: int) -> None:
    """ROCM_ATTN's forward for a mixed batch, with its K/V head-group cache layout
    (PagedAttention.split_kv_cache: K as [blocks, heads, head_size / x, slots, x])."""
    meta = batch(*MIXED)
    q = torch.zeros(meta["num_tokens"], num_heads, head_size, dtype=dtype)
    k = torch.zeros(meta["num_tokens"], num_kv_heads, head_size, dtype=dtype)
    x = 16 // q.element_size()
    key_cache = torch.zeros(NUM_BLOCKS, num_kv_heads, head_size // x, BLOCK_SIZE, x, dtype=dtype)
    value_cache = torch.zeros(NUM_BLOCKS, num_kv_heads, head_size, BLOCK_SIZE, dtype=dtype)
    one = torch.ones((), dtype=torch.float32)
    hip_ops()
    from vllm.v1.attention.ops.chunked_prefill_paged_decode import chunked_prefill_paged_decode

    chunked_prefill_paged_decode(
        query=q, key=k, value=torch.zeros_like(k), output=torch.zeros_like(q),
        kv_cache_dtype="auto", key_cache=key_cache, value_cache=value_cache,
        block_table=meta["block_table"], query_start_loc=meta["cu_seqlens_q"],
        seq_lens=meta["seq_lens"], max_seq_len=meta["max_seq_len"],
        max_query_len=meta["max_query_len"], k_scale=one, v_scale=one, sliding_window=None,
        sm_scale=head_size**-0.5,
    )


# ---------------------------------------------------------------------------------------------
# Fused MoE and rotary.


def moe(dtype: torch.dtype, tokens: int, experts: int, hidden: int, intermediate: int,
        top_k: int = 2) -> None:
    hip_ops()
    from vllm.model_executor.layers.fused_moe import fused_moe

    # torch.empty: large weights cost address space only, nothing is touched.
    w1 = torch.empty(experts, 2 * intermediate, hidden, dtype=dtype)
    w2 = torch.empty(experts, hidden, intermediate, dtype=dtype)
    a = torch.zeros(tokens, hidden, dtype=dtype)
    topk_ids = (torch.arange(tokens * top_k, dtype=torch.int32) % experts).view(tokens, top_k)
    topk_weights = torch.zeros(tokens, top_k, dtype=torch.float32)
    config = fused_moe.try_get_optimal_moe_config(w1.size(), w2.size(), top_k, None, tokens)
    sorted_ids, expert_ids, padded = fused_moe._prepare_expert_assignment(
        topk_ids, config, tokens, top_k, experts, None, ignore_invalid_experts=True)
    compute = {torch.float16: triton.language.float16, torch.bfloat16: triton.language.bfloat16}[dtype]
    gate_up = torch.empty(tokens, top_k, 2 * intermediate, dtype=dtype)
    down = torch.empty(tokens, top_k, hidden, dtype=dtype)
    activated = torch.empty(tokens * top_k, intermediate, dtype=dtype)
    for x, w, out, routed, k in ((a, w1, gate_up, False, top_k), (activated, w2, down, True, 1)):
        fused_moe.dispatch_fused_moe_kernel(
            x, w, out, None, None, None, topk_weights, sorted_ids, expert_ids, padded, routed,
            k, config, compute_type=compute, use_fp8_w8a8=False, use_int8_w8a8=False,
            use_int8_w8a16=False, use_int4_w4a16=False, per_channel_quant=False)


def mrope(dtype: torch.dtype, head_size: int) -> None:
    tokens = 64
    q = torch.zeros(tokens, NUM_HEADS * head_size, dtype=dtype)
    k = torch.zeros(tokens, NUM_KV_HEADS * head_size, dtype=dtype)
    cos = torch.zeros(3, tokens, head_size // 2, dtype=dtype)
    section = [head_size // 8, 3 * head_size // 16, 3 * head_size // 16]  # Qwen2-VL: 16/24/24 of 64
    from vllm.model_executor.layers.rotary_embedding.mrope import triton_mrope

    triton_mrope(q, k, cos, torch.zeros_like(cos), section, head_size, head_size, False, True)


def cases() -> Iterable[tuple[str, Callable[[], None]]]:
    select_target_arch()
    out: list[tuple[str, Callable[[], None]]] = []
    for dname, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        for hd in (64, 128):
            out.append((f"unified_attention_mixed_{dname}_d{hd}", functools.partial(triton_attn, dtype, hd, MIXED)))
            out.append((f"unified_attention_decode3d_{dname}_d{hd}", functools.partial(triton_attn, dtype, hd, DECODE)))
            out.append((f"reshape_and_cache_flash_{dname}_d{hd}", functools.partial(reshape_and_cache, dtype, hd)))
        out.append((f"rocm_attn_mha_{dname}_d128", functools.partial(rocm_attn, dtype, 128, 8, 8)))
        out.append((f"rocm_attn_gqa4_{dname}_d128", functools.partial(rocm_attn, dtype, 128, 8, 2)))
        out.append((f"fused_moe_decode_{dname}", functools.partial(moe, dtype, 1, 8, 1024, 1408)))
        out.append((f"fused_moe_prefill_{dname}", functools.partial(moe, dtype, 64, 8, 1024, 1408)))
        out.append((f"mrope_{dname}_d128", functools.partial(mrope, dtype, 128)))
    # Mixtral-8x7B's expert shape, for which vLLM ships tuned configs for MI300X (and none
    # for Radeon parts, so gfx1151 takes get_default_config).
    out.append(("fused_moe_prefill_bf16_mixtral", functools.partial(moe, torch.bfloat16, 64, 8, 4096, 14336)))
    return out
