"""A reader of TheRock's split device code: `.kpack` archives and the HIPK references of the
host libraries that load from them (RFC0008 "Multi-Architecture Packaging with Kpack").

Imported by elf_links.py and gpu_code.py (the arch audit), in auditwheel's venv (msgpack and
zstandard pinned by the python-default lock). Written here from the format's description, not from its code. The facts
relied on, and where they were read:

- stellaraccident/rocm-kpack ae4f1c2eda3c3449251474a6bda188401959e2bd,
  python/rocm_kpack/kpack.py (PackedKernelArchive): an archive starts with a 16-byte header,
  little-endian `4s I Q`: the magic `KPAK`, the format version (1), the file offset of the
  table of contents. The TOC is one msgpack map: `format_version`, `group_name`,
  `gfx_arch_family`, `gfx_arches` (the arches it holds), `compression_scheme`, and `toc`:
  {kernel key: {arch: {"type": "hsaco", "ordinal": n, "original_size": bytes}}}. The ordinal
  indexes the stored code objects.
- the same commit, python/rocm_kpack/compression.py: scheme "none" stores `blobs`, a list of
  {"offset": absolute file offset, "size"} per ordinal; "zstd-per-kernel" stores `zstd_offset`
  and `zstd_size` of one region holding a u32 count, then per ordinal a u32 size and a zstd
  frame. An absent scheme means "none".
- ROCm/rocm-systems 7944dba951bb582a680b839826edb9fdfc131154,
  shared/kpack/python/rocm_kpack/elf/kpack_transform.py: a split host library carries a
  section `.rocm_kpack_ref` holding a msgpack map {"kernel_name": str,
  "kpack_search_paths": [str]}; its `.hipFatBinSegment` is an array of 24-byte
  `__CudaFatBinaryWrapper`s: u32 magic (0x4B504948 once split, whose little-endian bytes read
  `HIPK`; 0x48495046 before, clang's HIPF, the bytes `FPIH`), u32 version, u64 pointer (to the marker), and at +16 the wrapper's index, the
  code object index (`co_index`) the runtime asks the archive for.
- ROCm/rocm-systems 3027bf1a78f23faa8421918aa9de546ecba543cc,
  shared/kpack/python/rocm_kpack/artifact_splitter.py: the archive's kernel key is
  `<kernel_name>#<co_index>` (the runtime appends `#N` from the wrapper); a search path is
  relative to the library's directory, `../.kpack/<group>_@GFXARCH@.kpack`, `@GFXARCH@`
  replaced by the arch the runtime asks for; the archive lives in the device artifact's
  `.kpack/` directory, `<group>_<gfx>.kpack`, with `gfx_arches` = [that gfx].
- stellaraccident/rocm-kpack ae4f1c2eda3c3449251474a6bda188401959e2bd, runtime/src/loader.cpp:
  for each arch asked, the first archive among the search paths whose `gfx_arches` has it is
  the one asked for the kernel; a kernel absent there is "kernel not found in this archive".

A code object's arch is read from its own ELF header (gpu_code.amdgpu_arch), not from the TOC.
"""

import struct

import msgpack
import zstandard

from gpu_code import amdgpu_arch

MAGIC = b"KPAK"
VERSION = 1
HEADER = struct.Struct("<4sIQ")
MARKER_SECTION = ".rocm_kpack_ref"
WRAPPER_SECTION = ".hipFatBinSegment"
WRAPPER = struct.Struct("<IIQI4x")  # magic, version, pointer, co_index (low half of reserved1)
HIPK = 0x4B504948
ARCH_PLACEHOLDER = "@GFXARCH@"
SUFFIX = ".kpack"


class KpackError(Exception):
    pass


def read_marker(data):
    """The `.rocm_kpack_ref` section's map: (kernel name, search paths)."""
    try:
        marker = msgpack.unpackb(data, raw=False)
    except (ValueError, msgpack.UnpackException) as e:
        raise KpackError(f"its {MARKER_SECTION} section is not msgpack: {e}") from e
    name = marker.get("kernel_name") if isinstance(marker, dict) else None
    paths = marker.get("kpack_search_paths") if isinstance(marker, dict) else None
    if not isinstance(name, str) or not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise KpackError(f"its {MARKER_SECTION} section lacks a kernel_name string or a kpack_search_paths list")
    return name, paths


def hipk_indexes(segment):
    """The code object index of each HIPK wrapper of a `.hipFatBinSegment` (HIPF ones carry
    their code in the library itself)."""
    if len(segment) % WRAPPER.size:
        raise KpackError(f"its {WRAPPER_SECTION} section is {len(segment)} bytes, not a multiple of {WRAPPER.size}")
    return [index for magic, _, _, index in WRAPPER.iter_unpack(segment) if magic == HIPK]


def _toc(data):
    if len(data) < HEADER.size:
        raise KpackError(f"it is {len(data)} bytes, shorter than the {HEADER.size}-byte header")
    magic, version, toc_at = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise KpackError(f"it starts with {magic!r}, not {MAGIC!r}")
    if version != VERSION:
        raise KpackError(f"its format version is {version}; this reader knows {VERSION}")
    if not HEADER.size <= toc_at < len(data):
        raise KpackError(f"its table of contents offset {toc_at} lies outside the file ({len(data)} bytes)")
    try:
        toc = msgpack.unpackb(data[toc_at:], raw=False, strict_map_key=False)
    except (ValueError, msgpack.UnpackException) as e:
        raise KpackError(f"its table of contents is not msgpack: {e}") from e
    if not isinstance(toc, dict) or not isinstance(toc.get("toc"), dict) or not isinstance(toc.get("gfx_arches"), list):
        raise KpackError("its table of contents lacks `toc` or `gfx_arches`")
    return toc


def _stored(data, toc):
    """ordinal -> a function returning that code object's bytes."""
    scheme = toc.get("compression_scheme", "none")
    if scheme == "none":
        blobs = toc.get("blobs") or []
        return [lambda b=b: data[b["offset"]:b["offset"] + b["size"]] for b in blobs]
    if scheme == "zstd-per-kernel":
        start, size = toc["zstd_offset"], toc["zstd_size"]
        region = data[start:start + size]
        (count,) = struct.unpack_from("<I", region, 0)
        frames, at = [], 4
        for _ in range(count):
            (length,) = struct.unpack_from("<I", region, at)
            frames.append(region[at + 4:at + 4 + length])
            at += 4 + length
        # A frame without its content size in the header (a streamed one) decompresses too.
        return [lambda f=f: zstandard.ZstdDecompressor().decompressobj().decompress(f) for f in frames]
    raise KpackError(f"its compression scheme {scheme!r} is not known (none, zstd-per-kernel)")


def read_archive(data):
    """{"arches": [...], "compression": scheme, "kernels": {key: {arch: the arch its code
    object's ELF header names, "" if it is no AMDGPU ELF}}, "unreadable": {"key @ arch": why}}."""
    toc = _toc(data)
    try:
        stored = _stored(data, toc)
    except (KeyError, TypeError, struct.error) as e:
        raise KpackError(f"its {toc.get('compression_scheme')} blob table cannot be read: {e!r}") from e
    kernels, unreadable = {}, {}
    for key, by_arch in sorted(toc["toc"].items()):
        kernels[key] = {}
        for arch, entry in sorted(by_arch.items()):
            ordinal = entry.get("ordinal") if isinstance(entry, dict) else None
            if not isinstance(ordinal, int) or not 0 <= ordinal < len(stored):
                unreadable[f"{key} @ {arch}"] = f"its ordinal {ordinal!r} is outside the {len(stored)} stored code objects"
                continue
            try:
                code = stored[ordinal]()
            except zstandard.ZstdError as e:
                unreadable[f"{key} @ {arch}"] = f"its zstd frame does not decompress: {e}"
                continue
            kernels[key][arch] = (amdgpu_arch(code) or "") if len(code) >= 52 else ""
    return {
        "arches": [str(a) for a in toc["gfx_arches"]],
        "compression": toc.get("compression_scheme", "none"),
        "kernels": kernels,
        "unreadable": unreadable,
    }
