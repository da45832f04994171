"""The install set's check of the machine it is installed on: `check_box.py` (our script,
rules/rocm_build/scripts/check_box.py, standard library only) beside requirements.txt, and
`install_set.json`, which names the gpu targets it checks the GPU against (`gpu_targets` of
the chain's wheels; `--gpu-targets` overrides it). tests/smoke runs it first; docs/checks.md
has its rules."""

from __future__ import annotations

import json
from typing import Sequence, Tuple

from pants.engine.fs import FileContent

from rocm_build.script_modules import script_bytes

CHECK_SCRIPT = "check_box.py"
SET_METADATA = "install_set.json"  # check_box.py reads it from its own directory
CHECK_STEP = "# first, check this machine: python3 check_box.py  (exit 1: fix what it says first; docs/checks.md)"


def set_metadata(owner: str, gpu_targets: Sequence[str]) -> bytes:
    """What the set is for: the target packaged and the gpu targets of its chain."""
    return (json.dumps({"target": owner, "gpu_targets": list(gpu_targets)}, indent=2) + "\n").encode()


def box_check_files(owner: str, gpu_targets: Sequence[str]) -> Tuple[FileContent, ...]:
    return (
        FileContent(CHECK_SCRIPT, script_bytes(CHECK_SCRIPT), is_executable=True),
        FileContent(SET_METADATA, set_metadata(owner, gpu_targets)),
    )
