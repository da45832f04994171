"""A sandbox script run as a process runs it: by path, with the scripts it imports beside it.
For the scripts that import their siblings by bare name at the top (wheel_files.py, whose bytes
are in every wheel's version key), which the package `rocm_build.scripts` cannot import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Sequence

from rocm_build.script_modules import script_bytes


def run_script(where: Path, scripts: Sequence[str], *args: str) -> str:
    """What `scripts[0]` prints, run with `args` from `where`, where `scripts` are written."""
    for name in scripts:
        (where / name).write_bytes(script_bytes(name))
    result = subprocess.run([sys.executable, str(where / scripts[0]), *args], cwd=where, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout
