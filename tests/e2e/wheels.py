"""Reading what a wheel really contains: AMDGPU code objects and their arch."""

from __future__ import annotations

import re
import struct
import zipfile
from pathlib import Path
from typing import Dict, List

EM_AMDGPU = 224
# e_flags & 0xff (EF_AMDGPU_MACH) of the targets tests build for, from LLVM's ELF.h.
MACH_TO_GFX = {0x4A: "gfx1151", 0x41: "gfx1100", 0x43: "gfx1150", 0x55: "gfx1152", 0x4C: "gfx942", 0x3F: "gfx90a"}


def code_object_arch(data: bytes) -> str:
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise ValueError("not a 64-bit ELF file")
    (machine,) = struct.unpack_from("<H", data, 18)
    if machine != EM_AMDGPU:
        raise ValueError(f"ELF e_machine is {machine}, not EM_AMDGPU ({EM_AMDGPU})")
    (flags,) = struct.unpack_from("<I", data, 48)
    return MACH_TO_GFX.get(flags & 0xFF, hex(flags & 0xFF))


def code_object_archs(wheel: Path) -> Dict[str, str]:
    """Every `.co` member of the wheel -> the arch its ELF header names."""
    with zipfile.ZipFile(wheel) as zf:
        return {n: code_object_arch(zf.read(n)) for n in zf.namelist() if n.endswith(".co")}


def members(wheel: Path) -> List[str]:
    with zipfile.ZipFile(wheel) as zf:
        return zf.namelist()


def requires_dist(wheel: Path) -> List[str]:
    """The `Requires-Dist` lines of the wheel's METADATA, values only."""
    name_version = "-".join(wheel.name.split("-")[:2])
    with zipfile.ZipFile(wheel) as zf:
        metadata = zf.read(f"{name_version}.dist-info/METADATA").decode()
    return [line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Requires-Dist:")]


def version(wheel: Path) -> str:
    return wheel.name.split("-")[1]


# The digest of a built wheel's inputs that its version ends with (`1.0.0+llvm19gfx1151.k1a2b3c4d5e6f7a8b`:
# build_process.version_key), after its local label.
VERSION_KEY = re.compile(r"(\+[0-9A-Za-z.]+?)\.k[0-9a-f]{16}(?![0-9A-Za-z])")


def unkeyed(text: str) -> str:
    """`text` with that digest taken out of every wheel name and version, for messages that name
    built wheels (the digest changes with any input; the tests check it where it matters)."""
    return VERSION_KEY.sub(r"\1", text)
