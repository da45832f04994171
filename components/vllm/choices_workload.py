"""What vLLM decides at run time on each gpu target, as a workload for upstream_choices.py.

    export PYTHONPATH=/path/to/vllm-0.31.0   # the PyPI sdist, extracted (and patched), not built
    python rules/rocm_build/scripts/upstream_choices.py --workload components/vllm/choices_workload.py \
        --target gfx1151 --target gfx942 --expected expected.json --report choices.json

vLLM sees the arch as in kernels_workload.py (beside this file, reused: its `amdsmi` test double
answers for the arch of the active compile-only driver, and `select_target_arch()` reloads
`vllm.platforms.rocm` so `_GCN_ARCH` and the `on_gfx*()` flags follow). Each case calls vLLM's
own selection code:

- `attention_d<head size>_<dtype>[_kvconn][_swa]`: the backend `RocmPlatform.get_attn_backend_cls`
  picks for a Llama-style decoder layer (no `--attention-backend`, block size 16, KV cache
  dtype auto), with and without a KV connector and a sliding window. The detail lists the
  valid backends in priority order and why the others were refused. AITER is off (not built for
  gfx1151), as on the box.
- `moe_<model>`: the fused-MoE config `try_get_optimal_moe_config` uses: the tuned JSON for the
  device name (`get_config_file_name`, e.g. `AMD_Radeon_8060S` for gfx1151) when vLLM ships one,
  else its default config.
- `triton_kernels`: whether the `triton_kernels` package (gpt-oss MoE, MXFP4) imports as vLLM
  imports it (site-packages first, then `vllm.third_party.triton_kernels`, which vLLM's wheel
  build installs from cmake/external_projects/triton_kernels.cmake; an sdist has none).
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from typing import Any, Callable, Iterable

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernels_workload  # noqa: E402  (installs the amdsmi double; vLLM's platform resolves ROCm)

from vllm.platforms import current_platform  # noqa: E402

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
HEAD_SIZES = (64, 128, 256)
# (name, experts, intermediate size a GPU holds (N of the config file), hidden, top k):
# Mixtral-8x7B, for which vLLM ships tuned configs for MI300X, and Qwen3-30B-A3B (E=128, N=768).
# The Triton kernels each backend runs on ROCm (what components/vllm:kernels compiles for it), so a
# report can show the chosen backend beside its kernels' figures (bench/kernel_table.py --choices).
BACKEND_KERNELS = {
    "TRITON_ATTN": ["kernel_unified_attention", "reduce_segments", "reshape_and_cache_kernel_flash"],
    "ROCM_ATTN": ["_fwd_kernel", "kernel_paged_attention_2d"],
}
MOE_MODELS = (("mixtral_8x7b", 8, 14336, 4096, 2), ("qwen3_30b_a3b", 128, 768, 2048, 8))


def attention(head_size: int, dtype: torch.dtype, kv_connector: bool, sliding_window: bool) -> dict[str, Any]:
    from vllm.v1.attention.selector import AttentionSelectorConfig

    config = AttentionSelectorConfig(head_size=head_size, dtype=dtype, kv_cache_dtype="auto", block_size=16,
                                     has_sliding_window=sliding_window, use_kv_connector=kv_connector)
    path = current_platform.get_attn_backend_cls(None, config)
    valid, invalid = current_platform.get_valid_backends(current_platform.get_device_capability(), config)
    names = {b.get_path(): b.name for b, _ in valid}
    choice = names.get(path, path)
    return {
        "choice": choice,
        "detail": {"priority": [b.name for b, _ in sorted(valid, key=lambda v: v[1])],
                   "refused": {b.name: reasons for b, reasons in invalid.items()}},
        "kernels": BACKEND_KERNELS.get(choice, []),
    }


def moe(experts: int, intermediate: int, hidden: int, top_k: int) -> dict[str, Any]:
    from vllm.model_executor.layers.fused_moe import fused_moe

    name = fused_moe.get_config_file_name(experts, intermediate, None)
    w1, w2 = (experts, 2 * intermediate, hidden), (experts, hidden, intermediate)
    config = fused_moe.try_get_optimal_moe_config(w1, w2, top_k, None, 64)
    if fused_moe.get_moe_configs(experts, intermediate, None) is not None:
        return {"choice": f"tuned {name}", "detail": {"M=64": config}}
    return {"choice": f"default (no {name})", "detail": {"M=64": config}}


def triton_kernels() -> dict[str, Any]:
    from vllm.utils import import_utils

    if not import_utils.has_triton_kernels():
        return {"choice": "unavailable", "detail": "neither triton_kernels nor vllm.third_party.triton_kernels"}
    module = importlib.import_module("triton_kernels")
    importlib.import_module("triton_kernels.matmul" if import_utils.get_triton_kernels_version() == "3.8"
                            else "triton_kernels.matmul_ogs")
    return {"choice": "imports", "detail": getattr(module, "__file__", None)}


def cases() -> Iterable[tuple[str, Callable[[], Any]]]:
    kernels_workload.select_target_arch()
    out: list[tuple[str, Callable[[], Any]]] = []
    for head_size in HEAD_SIZES:
        for dname, dtype in DTYPES.items():
            for kv_connector in (False, True):
                for sliding_window in (False, True):
                    name = f"attention_d{head_size}_{dname}{'_kvconn' if kv_connector else ''}{'_swa' if sliding_window else ''}"
                    out.append((name, functools.partial(attention, head_size, dtype, kv_connector, sliding_window)))
    for name, experts, intermediate, hidden, top_k in MOE_MODELS:
        out.append((f"moe_{name}", functools.partial(moe, experts, intermediate, hidden, top_k)))
    out.append(("triton_kernels", triton_kernels))
    return out
