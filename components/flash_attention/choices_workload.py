"""What flash-attention's Triton AMD backend decides on each gpu target, for upstream_choices.py.

    export FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE       # set here too, if unset
    export PYTHONPATH=/path/to/flash_attn-2.8.3.post2   # the PyPI sdist, extracted (and patched)
    python rules/rocm_build/scripts/upstream_choices.py \
        --workload components/flash_attention/choices_workload.py --target gfx1151 --target gfx942 \
        --expected expected.json --report choices.json

The backend reads the arch from Triton's active driver (`utils.get_arch()`, cached: cleared per
target as kernels_workload.py does). Cases:
- `config_family`: `rdna`, `cdna` or `generic`, as `utils.is_rdna()` / `is_cdna()` say; the
  RDNA autotune configs (fwd_prefill.get_rdna_autotune_configs) are picked through it.
- `autotune_fwd_prefill`, `autotune_fwd_decode`: what `FLASH_ATTENTION_TRITON_AMD_AUTOTUNE=1`
  makes each module's `get_autotune_configs()` do on this arch: the config list it tunes over
  (`<family> configs (<n>)`), or its error ("Unknown Device Type").
- `default_fwd_config`: the one config the forward takes with autotune off (the default).
"""

from __future__ import annotations

import os

os.environ.setdefault("FLASH_ATTENTION_TRITON_AMD_ENABLE", "TRUE")

import sys  # noqa: E402
from typing import Any, Callable, Iterable  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernels_workload import forget_arch  # noqa: E402

from flash_attn.flash_attn_triton_amd import fwd_decode, fwd_prefill, utils  # noqa: E402


def family() -> str:
    return "rdna" if utils.is_rdna() else "cdna" if utils.is_cdna() else "generic"


def autotune(module: Any) -> Callable[[], str]:
    def choice() -> str:
        saved = module.AUTOTUNE
        module.AUTOTUNE = True
        try:
            configs = module.get_autotune_configs()
        finally:
            module.AUTOTUNE = saved
        while isinstance(configs, tuple):  # (configs, keys), or one such pair per kernel
            configs = configs[0]
        return f"{family()} configs ({len(configs)})"

    return choice


def default_fwd_config() -> str:
    (config,), _ = fwd_prefill.get_autotune_configs()
    params = " ".join(f"{k}={v}" for k, v in sorted(config.kwargs.items()))
    return f"{params} warps={config.num_warps} stages={config.num_stages}"


def cases() -> Iterable[tuple[str, Callable[[], Any]]]:
    forget_arch()
    return [
        ("config_family", family),
        ("autotune_fwd_prefill", autotune(fwd_prefill)),
        ("autotune_fwd_decode", autotune(fwd_decode)),
        ("default_fwd_config", default_fwd_config),
    ]
