"""A writer of TheRock's split device code, for test doubles only: `.kpack` archives and host
libraries split as TheRock's kpack splitter leaves them (the format as
rules/rocm_build/scripts/kpack.py, the reader, describes it, with where it was learned).

Written apart from the reader, with the standard library only (the mini SDK is made by the
system Python): msgpack encoded here for the few types the format uses, zstd frames by the
`zstd` tool. `split_library` turns a library clang-19 linked from HIP sources (its
`.hip_fatbin` holding the code objects, one HIPF wrapper per translation unit in
`.hipFatBinSegment`) into a host-only one: `.rocm_kpack_ref` added by llvm-objcopy (not
loaded, as the splitter first adds it), each wrapper's magic made HIPK with its index at +16,
`.hip_fatbin` zeroed (`split_hip_library` compiles such a library and its code objects). The
splitter also maps the marker into a PT_LOAD segment and points the
wrappers at it; only the runtime follows that pointer, so the double leaves it out.
"""

from __future__ import annotations

import struct
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, Mapping, Sequence, Tuple

CLANG = "/usr/bin/clang-19"
OBJCOPY = "/usr/bin/llvm-objcopy-19"
ZSTD = "/usr/bin/zstd"
ALIGN = 64  # the blobs start at the first 64-byte boundary after the header
WRAPPER_SIZE = 24
HIPF, HIPK = 0x48495046, 0x4B504948  # the wrapper's u32 magic, clang's and the split's


def packb(value: object) -> bytes:
    """msgpack of None, bool, non-negative int, str, bytes, list and str-keyed dict."""
    if value is None:
        return b"\xc0"
    if isinstance(value, bool):
        return b"\xc3" if value else b"\xc2"
    if isinstance(value, int):
        if value < 0:
            raise ValueError("negative integers are not needed by the format")
        if value < 0x80:
            return bytes([value])
        for code, fmt, limit in ((0xCC, ">B", 1 << 8), (0xCD, ">H", 1 << 16), (0xCE, ">I", 1 << 32), (0xCF, ">Q", 1 << 64)):
            if value < limit:
                return bytes([code]) + struct.pack(fmt, value)
    if isinstance(value, str):
        data = value.encode()
        head = bytes([0xA0 | len(data)]) if len(data) < 32 else _sized(len(data), 0xD9, 0xDA, 0xDB)
        return head + data
    if isinstance(value, bytes):
        return _sized(len(value), 0xC4, 0xC5, 0xC6) + value
    if isinstance(value, (list, tuple)):
        head = bytes([0x90 | len(value)]) if len(value) < 16 else _sized(len(value), None, 0xDC, 0xDD)
        return head + b"".join(packb(v) for v in value)
    if isinstance(value, dict):
        head = bytes([0x80 | len(value)]) if len(value) < 16 else _sized(len(value), None, 0xDE, 0xDF)
        return head + b"".join(packb(k) + packb(v) for k, v in value.items())
    raise TypeError(f"{type(value).__name__} is not needed by the format")


def _sized(n: int, code8, code16: int, code32: int) -> bytes:
    if code8 is not None and n < 1 << 8:
        return bytes([code8, n])
    return bytes([code16]) + struct.pack(">H", n) if n < 1 << 16 else bytes([code32]) + struct.pack(">I", n)


def _zstd(data: bytes) -> bytes:
    return subprocess.run([ZSTD, "-q", "-c", "-3", "--no-check", f"--stream-size={len(data)}"], input=data, capture_output=True, check=True).stdout


def archive(
    kernels: Mapping[str, Mapping[str, bytes]], arches: Sequence[str], group: str, compression: str = "none"
) -> bytes:
    """A `.kpack` archive: kernel key -> arch -> code object, stored as is or a zstd frame each."""
    entries = [(key, arch, code) for key, by_arch in kernels.items() for arch, code in by_arch.items()]
    start = ALIGN
    toc: dict = {
        "format_version": 1, "group_name": group, "gfx_arch_family": arches[0] if len(arches) == 1 else group,
        "gfx_arches": list(arches), "compression_scheme": compression, "toc": {},
    }  # fmt: skip
    for ordinal, (key, arch, code) in enumerate(entries):
        toc["toc"].setdefault(key, {})[arch] = {"type": "hsaco", "ordinal": ordinal, "original_size": len(code)}
    if compression == "none":
        blob, blobs = b"", []
        for _, _, code in entries:
            blobs.append({"offset": start + len(blob), "size": len(code)})
            blob += code
        toc["blobs"] = blobs
    elif compression == "zstd-per-kernel":
        frames = [_zstd(code) for _, _, code in entries]
        blob = struct.pack("<I", len(frames)) + b"".join(struct.pack("<I", len(f)) + f for f in frames)
        toc["zstd_offset"], toc["zstd_size"] = start, len(blob)
    else:
        raise ValueError(f"compression {compression!r}: none or zstd-per-kernel")
    header = struct.pack("<4sIQ", b"KPAK", 1, start + len(blob))
    return header + b"\0" * (start - len(header)) + blob + packb(toc)


def _section_offsets(data: bytes) -> dict:
    """name -> (file offset, size) of a 64-bit little-endian ELF's sections."""
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    found = {}
    for name_at, _, _, _, offset, size in headers:
        end = data.index(b"\0", names_at + name_at)
        found[data[names_at + name_at:end].decode()] = (offset, size)
    return found


def split_library(library: Path, kernel_name: str, search_paths: Sequence[str], indexes: Sequence[int] = ()) -> None:
    """Makes `library` host-only in place, as TheRock's splitter does (see the module's doc).
    `indexes`: the index written in each wrapper, by default its position."""
    with tempfile.TemporaryDirectory() as tmp:
        marker = Path(tmp) / "marker"
        marker.write_bytes(packb({"kpack_search_paths": list(search_paths), "kernel_name": kernel_name}))
        subprocess.run([OBJCOPY, f"--add-section=.rocm_kpack_ref={marker}", str(library)], check=True)
    data = bytearray(library.read_bytes())
    sections = _section_offsets(bytes(data))
    offset, size = sections[".hipFatBinSegment"]
    for i in range(size // WRAPPER_SIZE):
        at = offset + i * WRAPPER_SIZE
        if struct.unpack_from("<I", data, at)[0] != HIPF:
            raise ValueError(f"{library}: wrapper {i} is not a HIPF wrapper")
        struct.pack_into("<I", data, at, HIPK)
        struct.pack_into("<I", data, at + 16, indexes[i] if indexes else i)
    offset, size = sections[".hip_fatbin"]
    data[offset:offset + size] = bytes(size)
    library.write_bytes(bytes(data))


# What a HIP translation unit needs without HIP's headers: the kernel attribute and the launch
# entry point clang's host stub calls.
HIP_PRELUDE = """\
#define __global__ __attribute__((global))
typedef struct { unsigned x, y, z; } dim3;
typedef struct ihipStream_t *hipStream_t;
extern "C" int hipLaunchKernel(const void *, dim3, dim3, void **, unsigned long, hipStream_t);
"""
HIP_FLAGS = ["-x", "hip", "-nogpulib", "-nogpuinc", "-O2", "-fno-ident"]


def _clang(argv: Sequence[str], cwd: Path) -> None:
    result = subprocess.run([CLANG, *argv], cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"clang-19 {' '.join(argv)}: {result.stderr}")


def split_hip_library(
    work: Path, name: str, units: Mapping[str, str], kernel_name: str, search_paths: Sequence[str],
    arches: Sequence[str], link: Sequence[str] = (),
) -> Tuple[bytes, Dict[str, Dict[str, bytes]]]:  # fmt: skip
    """A shared library clang-19 links from HIP translation units (unit name -> kernel source,
    HIP_PRELUDE before it) for `arches[0]`, split: its bytes, and each unit's code object per
    arch of `arches` keyed as the archive keys them (`<kernel_name>#<unit index>`)."""
    kernels: Dict[str, Dict[str, bytes]] = {}
    for index, (unit, source) in enumerate(units.items()):
        (work / f"{unit}.hip").write_text(HIP_PRELUDE + source)
        # A fixed cuid: the bytes depend on the source alone, and two units do not collide.
        flags = [*HIP_FLAGS, f"-cuid={unit}", f"{unit}.hip"]
        _clang([*flags, f"--offload-arch={arches[0]}", "-fPIC", "-c", "-o", f"{unit}.o"], work)
        for arch in arches:
            _clang([*flags, f"--offload-arch={arch}", "--cuda-device-only", "--no-gpu-bundle-output", "-o", f"{unit}-{arch}.co"], work)
            kernels.setdefault(f"{kernel_name}#{index}", {})[arch] = (work / f"{unit}-{arch}.co").read_bytes()
    objects = [f"{unit}.o" for unit in units]
    _clang(["-shared", "-fuse-ld=lld", "-Wl,--build-id=none", f"-Wl,-soname,{name}", "-o", name, *objects, *link], work)
    split_library(work / name, kernel_name, search_paths)
    return (work / name).read_bytes(), kernels
