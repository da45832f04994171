"""Wheels written by tests, and what scripts/elf_links.py reads from them, run as a process
runs it (pyelftools, msgpack and zstandard of the test's resolve, as auditwheel's venv has):
elf_links.py, and gpu_code.py (the arch audit's tests, through kpack_wheels.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Mapping, Sequence, Union

from rocm_build.install.load_check import ELF_LINKS
from rocm_build.sandbox_scripts import script_bytes


def wheel(path: Path, members: Mapping[str, Union[bytes, Path]], requires: Sequence[str] = ()) -> Path:
    """A wheel at `path` (its name gives project and version) of these members and Requires-Dist lines."""
    project, version = path.name.split("-")[:2]
    metadata = "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(path, "w") as z:
        for name, member in members.items():
            z.writestr(name, member if isinstance(member, bytes) else member.read_bytes())
        z.writestr(f"{project}-{version}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n{metadata}\n")
    return path


def read_script_json(scripts: Sequence[str], wheel_path: Path, tmp: Path) -> dict:
    """The JSON a script (`scripts[0]`, what it imports after it) prints for one wheel, the
    scripts written to `tmp`."""
    for name in scripts:
        (tmp / name).write_bytes(script_bytes(name))
    result = subprocess.run([sys.executable, str(tmp / scripts[0]), str(wheel_path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def read_elf_links(wheel_path: Path, tmp: Path) -> dict:
    """elf_links.py's JSON for one wheel."""
    return read_script_json(ELF_LINKS, wheel_path, tmp)
