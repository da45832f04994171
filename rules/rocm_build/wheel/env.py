"""The build environment the seed documents prescribe, as data.

Values may use `{archs}` (semicolon-separated gpu targets) and `{archs_comma}`;
`$ROCM_PATH` and friends are expanded by the build script inside the sandbox, because the
toolchain's location must never be part of a cache key.
"""

from __future__ import annotations

import difflib
from typing import Dict, List, Mapping, Sequence

from rocm_build.sandbox_scripts import load_script

# gfx names the ROCm compilers accept (LLVM AMDGPU processors, gfx9 and later): the arch
# table of the script that reads built wheels' GPU code, so a name asked for here is one the
# audit can find.
KNOWN_GPU_TARGETS = tuple(load_script("amdgpu_elf.py").MACH.values())

# Set for every component (seed 000's tables). ROCM_PATH etc. are filled in the sandbox.
COMMON_ENV: Dict[str, str] = {
    "PYTORCH_ROCM_ARCH": "{archs}",
    "GPU_ARCHS": "{archs}",
    "AMDGPU_TARGETS": "{archs}",
    "ROCM_BUILD_GPU_TARGETS": "{archs}",
}

# Per component kind, on top of COMMON_ENV.
KIND_ENV: Dict[str, Dict[str, str]] = {
    "generic": {},
    "aotriton": {"AOTRITON_TARGET_ARCH": "{archs}"},
    "torch": {
        "USE_ROCM": "1",
        "USE_CUDA": "0",
        "BUILD_TEST": "0",
        # FBGEMM GenAI fails to link for gfx11 (seed 001).
        "USE_FBGEMM_GENAI": "0",
        "USE_FLASH_ATTENTION": "1",
        "USE_MEM_EFF_ATTENTION": "1",
    },
    "triton": {"TRITON_BUILD_WITH_CLANG_LLD": "1"},
    # torchvision: nothing beyond the common table (its recipe sets FORCE_CUDA); the kind says
    # which distribution the wheel is (chain_versions.KIND_DISTS).
    "vision": {},
    "flash_attention": {
        "FLASH_ATTENTION_TRITON_AMD_ENABLE": "TRUE",
        # Its setup.py (at our pin) otherwise downloads a guessed prebuilt wheel from GitHub
        # releases and ships it instead of building, and picks ROCm vs CUDA by asking torch.
        "FLASH_ATTENTION_FORCE_BUILD": "TRUE",
        "BUILD_TARGET": "rocm",
    },
    "vllm": {"VLLM_TARGET_DEVICE": "rocm"},
    "aiter": {"GPU_ARCHS": "{archs}"},
}


def nearest_gpu_target(name: str) -> List[str]:
    # Swapped digits (gfx1115 for gfx1151) are the common typo; difflib ranks them poorly.
    swapped = [t for t in KNOWN_GPU_TARGETS if sorted(t) == sorted(name)]
    return swapped[:1] or difflib.get_close_matches(name, KNOWN_GPU_TARGETS, n=1, cutoff=0.6)


def check_gpu_targets(targets: Sequence[str], owner: str, field: str = "gpu_targets") -> None:
    if not targets:
        raise ValueError(f"{owner}: `{field}` is empty; list at least one, e.g. [\"gfx1151\"]")
    for target in targets:
        if target not in KNOWN_GPU_TARGETS:
            near = nearest_gpu_target(target)
            hint = f" Did you mean `{near[0]}`?" if near else ""
            raise ValueError(
                f"{owner}: unknown gpu target `{target}` in `{field}`.{hint} "
                f"Known targets: {', '.join(KNOWN_GPU_TARGETS)}"
            )


def build_env(kind: str, gpu_targets: Sequence[str], extra: Mapping[str, str], owner: str) -> Dict[str, str]:
    if kind not in KIND_ENV:
        raise ValueError(f"{owner}: unknown `kind` {kind!r}; use one of {', '.join(KIND_ENV)}")
    archs = sorted(gpu_targets)
    values = {"archs": ";".join(archs), "archs_comma": ",".join(archs)}
    env = {k: v.format(**values) for k, v in {**COMMON_ENV, **KIND_ENV[kind]}.items()}
    env.update(extra)
    return env
