"""The component kinds a rocm_wheel's `kind` names, and all that each kind means: one entry here.

A kind says which upstream a wheel is, where that changes the build or the chain around it:
the ROCm environment extras its build gets (on top of every build's table, from the seed
documents), the distribution its wheel installs as, the variable its recipe sets its version
with (the chain's torch and triton are compared against what other upstreams name), and the
variable through which it requires TheRock's SDK when built on it. `kind`'s `valid_choices` and
help are made from this table, so a new kind is a new entry and nothing else
(docs/layout.md, "Add a component kind").

Environment values may use `{archs}` (semicolon-separated gpu targets) and `{archs_comma}`;
`$ROCM_PATH` and friends are expanded by the build script inside the sandbox, because the
toolchain's location must never be part of a cache key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Mapping, Tuple

# Set for every kind (seed 000's tables).
COMMON_ENV: Mapping[str, str] = {
    "PYTORCH_ROCM_ARCH": "{archs}",
    "GPU_ARCHS": "{archs}",
    "AMDGPU_TARGETS": "{archs}",
    "ROCM_BUILD_GPU_TARGETS": "{archs}",
}


@dataclass(frozen=True)
class ComponentKind:
    name: str
    what: str  # one line for `pants help rocm_wheel`
    env: Mapping[str, str] = field(default_factory=dict)  # on top of COMMON_ENV
    # The distribution its wheel is, where not the kind's name (each upstream's setup.py).
    dist: str = ""
    # The variable its recipe may set the wheel's version with: the chain's version of it, which
    # the preflight compares with what other upstreams name (`torch==2.13.0` in a CMakeLists.txt).
    version_var: str = ""
    # The variable its build adds install requirements through: built on TheRock's SDK, the
    # wheel then requires that SDK and a triton, as TheRock's own torch wheels do
    # (build_prod_wheels.py: PYTORCH_EXTRA_INSTALL_REQUIREMENTS, read by PyTorch's setup.py).
    sdk_requirements_var: str = ""
    # Other projects a prebuilt wheel of this upstream is published as (PyTorch's own triton
    # wheels), for the chain's version of it (wheel/chain_versions.py).
    projects: Tuple[str, ...] = ()


KINDS: Dict[str, ComponentKind] = {
    k.name: k
    for k in (
        ComponentKind("generic", "any other upstream: the common table only"),
        ComponentKind("aotriton", "AOTriton", {"AOTRITON_TARGET_ARCH": "{archs}"}),
        ComponentKind(
            "torch",
            "PyTorch",
            {
                "USE_ROCM": "1",
                "USE_CUDA": "0",
                "BUILD_TEST": "0",
                # FBGEMM GenAI fails to link for gfx11 (seed 001).
                "USE_FBGEMM_GENAI": "0",
                "USE_FLASH_ATTENTION": "1",
                "USE_MEM_EFF_ATTENTION": "1",
            },
            version_var="PYTORCH_BUILD_VERSION",
            sdk_requirements_var="PYTORCH_EXTRA_INSTALL_REQUIREMENTS",
        ),
        ComponentKind(
            "triton",
            "Triton",
            {"TRITON_BUILD_WITH_CLANG_LLD": "1"},
            version_var="TRITON_WHEEL_VERSION",
            projects=("pytorch_triton_rocm", "pytorch_triton"),
        ),
        # Nothing beyond the common table (its recipe sets FORCE_CUDA): the kind names its distribution.
        ComponentKind("vision", "torchvision", dist="torchvision"),
        ComponentKind(
            "flash_attention",
            "flash-attention",
            {
                "FLASH_ATTENTION_TRITON_AMD_ENABLE": "TRUE",
                # Its setup.py (at our pin) otherwise downloads a guessed prebuilt wheel from GitHub
                # releases and ships it instead of building, and picks ROCm vs CUDA by asking torch.
                "FLASH_ATTENTION_FORCE_BUILD": "TRUE",
                "BUILD_TARGET": "rocm",
            },
            dist="flash_attn",
        ),
        ComponentKind("vllm", "vLLM", {"VLLM_TARGET_DEVICE": "rocm"}),
        ComponentKind("aiter", "AITER", {"GPU_ARCHS": "{archs}"}, dist="amd_aiter"),
    )
}


def kind_help() -> str:
    """The kinds for `pants help rocm_wheel`, one line each."""
    lines = []
    for k in KINDS.values():
        sets = [f"{', '.join(sorted(k.env))}"] if k.env else []
        sets += [f"its wheel is `{k.dist}`"] if k.dist else []
        sets += [f"its version is `{k.version_var}`"] if k.version_var else []
        lines.append(f"`{k.name}`: {k.what}{' (' + '; '.join(sets) + ')' if sets else ''}")
    return "; ".join(lines)


def by_project() -> Dict[str, str]:
    """project (a prebuilt wheel's, as a module name) -> the kind it is, for the kinds that name
    other projects."""
    return {p: k.name for k in KINDS.values() for p in k.projects}


def by_version_var() -> Dict[str, str]:
    """kind -> the variable its version is set with, for the kinds that have one."""
    return {k.name: k.version_var for k in KINDS.values() if k.version_var}

