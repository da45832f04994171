"""What an AMDGPU code object's ELF header says: the facts every reader of device code shares.

A leaf module: it imports nothing of ours (standard library only), so gpu_code.py (the wheels'
arch audit), kpack.py (TheRock's `.kpack` archives), triton_kernels.py (compiled Triton
kernels) and wheel/env.py (the gfx names a rocm_wheel may ask for) all take the arch table
from here without importing each other.

An AMDGPU code object is a 64-bit ELF whose e_machine is EM_AMDGPU; its arch is the low byte
of e_flags (EF_AMDGPU_MACH_*), at offset 48 of the header, so the first 52 bytes of a code
object name its arch.
"""

import struct

ELF_MAGIC = b"\x7fELF"
EM_AMDGPU = 224
HEADER_BYTES = 52  # e_ident (16), e_type, e_machine, e_version, e_entry, e_phoff, e_shoff, e_flags
# EF_AMDGPU_MACH_* of LLVM's ELF.h. Checked against Debian's clang 19, which compiles all of
# these but gfx950, gfx1153 and gfx1250 (gpu_code_test compiles them and reads them back). Its
# names are also the gfx names a rocm_wheel may ask for (wheel/env.py loads this file): one table.
MACH = {
    0x2C: "gfx900", 0x2D: "gfx902", 0x2E: "gfx904", 0x2F: "gfx906", 0x30: "gfx908", 0x31: "gfx909",
    0x3F: "gfx90a", 0x32: "gfx90c", 0x40: "gfx940", 0x4B: "gfx941", 0x4C: "gfx942", 0x4F: "gfx950",
    0x33: "gfx1010", 0x34: "gfx1011", 0x35: "gfx1012", 0x42: "gfx1013",
    0x36: "gfx1030", 0x37: "gfx1031", 0x38: "gfx1032", 0x39: "gfx1033", 0x3E: "gfx1034", 0x3D: "gfx1035",
    0x45: "gfx1036", 0x41: "gfx1100", 0x46: "gfx1101", 0x47: "gfx1102", 0x44: "gfx1103",
    0x43: "gfx1150", 0x4A: "gfx1151", 0x55: "gfx1152", 0x58: "gfx1153",
    0x48: "gfx1200", 0x4E: "gfx1201", 0x49: "gfx1250",
}  # fmt: skip


def amdgpu_arch(data, at=0):
    """The arch of an AMDGPU ELF at `at` of `data` (bytes), or None if there is none there."""
    if at < 0 or len(data) < at + HEADER_BYTES or data[at:at + 4] != ELF_MAGIC or data[at + 4] != 2:
        return None
    (machine,) = struct.unpack_from("<H", data, at + 18)
    if machine != EM_AMDGPU:
        return None
    (flags,) = struct.unpack_from("<I", data, at + 48)
    return MACH.get(flags & 0xFF, f"unknown-mach-{flags & 0xFF:#x}")
