"""A build's environment from its kind's table (kinds.py) and its gpu targets, which are
checked against the names the ROCm compilers accept."""

from __future__ import annotations

import difflib
from typing import Dict, List, Mapping, Sequence

from rocm_build.scripts import amdgpu_elf
from rocm_build.wheel.kinds import COMMON_ENV, KINDS

# gfx names the ROCm compilers accept (LLVM AMDGPU processors, gfx9 and later): the arch
# table of the script that reads built wheels' GPU code, so a name asked for here is one the
# audit can find.
KNOWN_GPU_TARGETS = tuple(amdgpu_elf.MACH.values())

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
    if kind not in KINDS:  # the field's valid_choices says so first; a spec made in a test may not
        raise ValueError(f"{owner}: unknown `kind` {kind!r}; use one of {', '.join(KINDS)}")
    archs = sorted(gpu_targets)
    values = {"archs": ";".join(archs), "archs_comma": ",".join(archs)}
    env = {k: v.format(**values) for k, v in {**COMMON_ENV, **KINDS[kind].env}.items()}
    env.update(extra)
    return env
