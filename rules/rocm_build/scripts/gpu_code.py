"""Which AMD GPU architectures each library of a wheel carries code for, read from the bytes.

Usage: gpu_code.py WHEEL   prints JSON {"libraries": {member: [gfx...]},
                                         "code_objects": {member: [gfx]}, "unreadable": {member: why},
                                         "members": [every file of the wheel],
                                         "kpacks": {member: archive}, "split_libraries": {member: reference}}

A member carries AMDGPU code when it is an AMDGPU code object itself (an ELF with e_machine
EM_AMDGPU: `.co`, `.hsaco`; AOTriton ships one per kernel and arch), or a host library (a
`.so`) with offload sections: `.hip_fatbin`
(clang offload bundles, HIP's default) or `.llvm.offloading` (the new offload driver). In
both, each device image is an AMDGPU ELF; its arch is in its header (`e_flags & 0xff`), so
the bundle's own entry names are not trusted. Compressed bundles (`CCOB`, clang
`--offload-compress`) are inflated first (zlib, or zstd with the `zstd` tool).

TheRock's split device code (RFC0008, kpack) is read with kpack.py, the format's reader (its
header says where the format was learned). A `.kpack` archive (`kpacks`): `arches`, the arches
its code objects' ELF headers say; `toc_arches`, what its table of contents says it holds;
`compression`; `kernels` {kernel key: {arch the table of contents files it under: arch its
ELF header says, "" if it is no AMDGPU ELF}}; `mismatches` [[kernel key, filed under, header
says]] where the two differ. A host library with a `.rocm_kpack_ref` marker (`split_libraries`:
`kernel_name`, `search_paths`, `indexes` of its HIPK wrappers, `bundled` arches still in its
offload sections) loads its device code from the archives: it is listed there, not among the
`libraries` that must carry code themselves. kpack.py needs msgpack and zstandard: this script
reads wheels in auditwheel's venv, which has them; it is imported only when a wheel is read,
so the scripts that import this one for its arch table (triton_kernels.py) need neither.
"""

import json
import re
import struct
import subprocess
import sys
import zipfile
import zlib

from wheel_zip import data_offset

EM_AMDGPU = 224
# EF_AMDGPU_MACH_* of LLVM's ELF.h. Checked against Debian's clang 19, which compiles all of
# these but gfx950, gfx1153 and gfx1250 (tests compile them and read them back). Its names are
# also the gfx names a rocm_wheel may ask for (wheel/env.py loads this file): one table.
MACH = {
    0x2C: "gfx900", 0x2D: "gfx902", 0x2E: "gfx904", 0x2F: "gfx906", 0x30: "gfx908", 0x31: "gfx909",
    0x3F: "gfx90a", 0x32: "gfx90c", 0x40: "gfx940", 0x4B: "gfx941", 0x4C: "gfx942", 0x4F: "gfx950",
    0x33: "gfx1010", 0x34: "gfx1011", 0x35: "gfx1012", 0x42: "gfx1013",
    0x36: "gfx1030", 0x37: "gfx1031", 0x38: "gfx1032", 0x39: "gfx1033", 0x3E: "gfx1034", 0x3D: "gfx1035",
    0x45: "gfx1036", 0x41: "gfx1100", 0x46: "gfx1101", 0x47: "gfx1102", 0x44: "gfx1103",
    0x43: "gfx1150", 0x4A: "gfx1151", 0x55: "gfx1152", 0x58: "gfx1153",
    0x48: "gfx1200", 0x4E: "gfx1201", 0x49: "gfx1250",
}  # fmt: skip
OFFLOAD_SECTIONS = (".hip_fatbin", ".llvm.offloading")
ELF_MAGIC = b"\x7fELF"
CCOB = b"CCOB"


class Unreadable(Exception):
    pass


def amdgpu_arch(data, at=0):
    """The arch of an AMDGPU ELF at `at`, or None if there is none there."""
    if data[at:at + 4] != ELF_MAGIC or data[at + 4] != 2 or len(data) < at + 52:
        return None
    (machine,) = struct.unpack_from("<H", data, at + 18)
    if machine != EM_AMDGPU:
        return None
    (flags,) = struct.unpack_from("<I", data, at + 48)
    return MACH.get(flags & 0xFF, f"unknown-mach-{flags & 0xFF:#x}")


def sections(data, wanted):
    """name -> bytes of the sections named in `wanted` of a 64-bit little-endian ELF."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shoff + shnum * shentsize > len(data) or shstrndx >= shnum:
        raise Unreadable("its ELF section headers lie outside the file")
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = headers[shstrndx]
    table = data[names[4]:names[4] + names[5]]
    found = {}
    for name_at, kind, _, _, offset, size, *_ in headers:
        name = table[name_at:table.index(b"\0", name_at)].decode()
        if name in wanted and kind != 8:  # SHT_NOBITS has no bytes in the file
            found[name] = data[offset:offset + size]
    return found


def inflate(blob):
    """The uncompressed bundle of a CCOB header (LLVM's CompressedOffloadBundle)."""
    version, method = struct.unpack_from("<HH", blob, 4)
    # v1: sizes start at 8 (uncompressed u64, hash u64); v2 adds a u32 total size at 8 (and
    # a u32 uncompressed size), v3 makes both u64. The total size bounds the bundle.
    if version == 1:
        header, total = 24, len(blob)
    elif version == 2:
        header, total = 24, struct.unpack_from("<I", blob, 8)[0]
    elif version == 3:
        header, total = 32, struct.unpack_from("<Q", blob, 8)[0]
    else:
        raise Unreadable(f"compressed offload bundle version {version} is not known")
    payload = blob[header:total]
    if method == 0:
        return zlib.decompressobj().decompress(payload)
    if method == 1:
        result = subprocess.run(["zstd", "-d", "-c"], input=payload, capture_output=True)
        if result.returncode != 0 and not result.stdout:
            raise Unreadable(f"zstd could not inflate a compressed offload bundle: {result.stderr.decode().strip()}")
        return result.stdout
    raise Unreadable(f"compressed offload bundle with method {method} is not known")


def images_archs(blob):
    """Arches of every AMDGPU ELF inside an offload section, inflating compressed bundles."""
    archs = set()
    for m in re.finditer(re.escape(CCOB), blob):
        archs |= images_archs(inflate(blob[m.start():]))
    for m in re.finditer(re.escape(ELF_MAGIC), blob):
        arch = amdgpu_arch(blob, m.start())
        if arch:
            archs.add(arch)
    return archs


def archs_of(data):
    """The arches a file carries code for (empty: no AMDGPU code), or None if not ELF."""
    if data[:4] != ELF_MAGIC:
        return None
    own = amdgpu_arch(data)
    if own:
        return {own}
    if data[4] != 2 or data[5] != 1:
        return set()  # not a 64-bit little-endian host object: no GPU code of ours
    found = set()
    for blob in sections(data, OFFLOAD_SECTIONS).values():
        found |= images_archs(blob)
    return found


def is_host_elf(data):
    """A 64-bit little-endian ELF that is no AMDGPU code object: a host library or program."""
    return data[:4] == ELF_MAGIC and data[4] == 2 and data[5] == 1 and not amdgpu_arch(data)


def _kpack():
    """kpack.py, imported when a wheel is read: it imports this module, and needs msgpack
    (see the module's doc)."""
    import kpack

    return kpack


def kpack_reference(data):
    """A split host library's `.rocm_kpack_ref` marker and the code object index of each HIPK
    wrapper, or None for a library that is not split."""
    kpack = _kpack()
    found = sections(data, (kpack.MARKER_SECTION, kpack.WRAPPER_SECTION))
    if kpack.MARKER_SECTION not in found:
        return None
    kernel_name, search_paths = kpack.read_marker(found[kpack.MARKER_SECTION])
    indexes = kpack.hipk_indexes(found.get(kpack.WRAPPER_SECTION, b""))
    return {"kernel_name": kernel_name, "search_paths": search_paths, "indexes": indexes}


def kpack_code(data):
    """What a `.kpack` archive carries (see the module's doc), and why its code objects that
    could not be read were not ("" if all were)."""
    kpack = _kpack()
    archive = kpack.read_archive(data)
    kernels = archive["kernels"]
    mismatches = [[key, filed, says] for key, by_arch in kernels.items() for filed, says in by_arch.items() if filed != says]
    found = {
        "arches": sorted({says for by_arch in kernels.values() for says in by_arch.values() if says}),
        "toc_arches": archive["arches"],
        "compression": archive["compression"],
        "kernels": kernels,
        "mismatches": mismatches,
    }
    why = "; ".join(f"the code object of {key} cannot be read: {reason}" for key, reason in sorted(archive["unreadable"].items()))
    return found, why


def member_bytes(wheel, info):
    """A member's bytes, checked against its crc: deflated ones inflated in one call, which
    for a GB library takes half the time of zipfile's reads in pieces."""
    if info.compress_type != zipfile.ZIP_DEFLATED:
        return wheel.read(info)
    wheel.fp.seek(data_offset(wheel.fp, info))
    data = zlib.decompressobj(-15).decompress(wheel.fp.read(info.compress_size))
    if len(data) != info.file_size or zlib.crc32(data) != info.CRC:
        raise zlib.error(f"{info.filename} does not inflate to its recorded size and crc")
    return data


def read_member(found, name, data):
    """Records what one member of the wheel carries in `found` (main's JSON)."""
    if name.endswith(_kpack().SUFFIX):
        found["kpacks"][name], why = kpack_code(data)
        if why:
            found["unreadable"][name] = why
        return
    archs = archs_of(data)
    reference = kpack_reference(data) if is_host_elf(data) else None
    if reference is not None:
        # Its device code is in `.kpack` archives (TheRock's split): what it references is
        # checked across the install set (install/kpack_check.py), not here.
        found["split_libraries"][name] = {**reference, "bundled": sorted(archs)}
    elif archs:
        found["code_objects" if amdgpu_arch(data) else "libraries"][name] = sorted(archs)


def main():
    kpack = _kpack()
    found = {"libraries": {}, "code_objects": {}, "unreadable": {}, "members": [], "kpacks": {}, "split_libraries": {}}
    with zipfile.ZipFile(sys.argv[1]) as wheel:
        found["members"] = sorted(i.filename for i in wheel.infolist() if not i.is_dir())
        for info in wheel.infolist():
            if info.is_dir():
                continue
            if not info.filename.endswith(kpack.SUFFIX):  # an archive of any size is read (and a short one refused)
                if info.file_size < 64:
                    continue
                with wheel.open(info) as f:
                    if f.read(4) != ELF_MAGIC:
                        continue
            try:
                read_member(found, info.filename, member_bytes(wheel, info))
            # A wheel is untrusted input: what cannot be read is reported by name, never a crash.
            except (Unreadable, kpack.KpackError, struct.error, ValueError, IndexError, KeyError, TypeError, AttributeError,
                    zlib.error) as e:  # fmt: skip
                found["unreadable"][info.filename] = str(e) or type(e).__name__
    json.dump(found, sys.stdout, indent=2, sort_keys=True)


if __name__ == "__main__":
    main()
