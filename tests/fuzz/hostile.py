"""Hostile device code, built in memory at test time: `.kpack` archives, zstd frames and
compressed offload bundles shaped as the attacks on our readers were (issue 58), for the
tests of scripts/kpack.py and scripts/gpu_code.py and as seeds of their fuzz targets.

Each is written from its format's description, small whatever it inflates to: a zstd frame
(RFC 8878) of raw and RLE blocks says gigabytes in kilobytes; a clang compressed offload
bundle (`CCOB`, LLVM's CompressedOffloadBundle) is its header and a zlib or zstd payload; a
`.kpack` is its 16-byte header, a region and a msgpack table of contents (the layout
scripts/kpack.py describes). Hostile msgpack (negative and float numbers, bin keys, nesting
deeper than any parser's stack) is assembled from bytes: no encoder writes it on purpose.
Standard library only.
"""

from __future__ import annotations

import struct
import zlib
from typing import Iterable, Iterator, Optional, Sequence, Tuple

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
ZSTD_BLOCK = 1 << 17  # a block's content: at most 128 KiB
WINDOW_128K = 0x38  # a window descriptor: windowLog 10 + 7 = 17, mantissa 0
KPACK_ALIGN = 64


def zstd_frame(head: bytes, zeros: int, declared: Optional[int] = None) -> bytes:
    """A zstd frame whose content is `head` and then `zeros` zero bytes: `head` in raw blocks,
    the zeros in RLE blocks (4 bytes for each 128 KiB). `declared`: the content size its header
    states (None: a streamed frame, which states none)."""
    if declared is None:
        header = bytes([0x00, WINDOW_128K])  # no content size, a window descriptor
    else:
        header = bytes([0xC0, WINDOW_128K]) + struct.pack("<Q", declared)  # an 8-byte content size
    blocks = []
    for at in range(0, len(head), ZSTD_BLOCK):
        piece = head[at:at + ZSTD_BLOCK]
        blocks.append((0, len(piece), piece))  # raw
    left = zeros
    while left:
        size = min(left, ZSTD_BLOCK)
        blocks.append((1, size, b"\0"))  # RLE: one byte, repeated `size` times
        left -= size
    if not blocks:
        blocks.append((0, 0, b""))
    out = [ZSTD_MAGIC, header]
    for i, (kind, size, data) in enumerate(blocks):
        last = i == len(blocks) - 1
        out.append((size << 3 | kind << 1 | last).to_bytes(3, "little") + data)
    return b"".join(out)


def zlib_stream(head: bytes, zeros: int, level: int = 9) -> bytes:
    """A zlib stream of `head` and `zeros` zero bytes, compressed a MiB at a time."""
    c = zlib.compressobj(level)
    out = [c.compress(head)]
    left = zeros
    block = bytes(1 << 20)
    while left:
        out.append(c.compress(block[:min(left, len(block))]))
        left -= min(left, len(block))
    out.append(c.flush())
    return b"".join(out)


def ccob(payload: bytes, size: int, method: int = 0, version: int = 2, total: Optional[int] = None) -> bytes:
    """A compressed offload bundle: its header (v1: u32 size; v2: u32 total and size; v3: u64
    both; a zero hash) and `payload`, zlib (method 0) or zstd (1), inflating to `size` bytes."""
    if version == 1:
        header = b"CCOB" + struct.pack("<HHI", 1, method, size) + bytes(8)
    else:
        fields = "<HHII" if version == 2 else "<HHQQ"
        length = 24 if version == 2 else 32
        header = b"CCOB" + struct.pack(fields, version, method, length + len(payload) if total is None else total, size) + bytes(8)
    return header + payload


def nested_bundles(code: bytes, depth: int) -> bytes:
    """`code` in `depth` compressed bundles, each inside the next."""
    data = code
    for _ in range(depth):
        data = ccob(zlib.compress(data), len(data))
    return data


# msgpack, assembled: what an encoder would write, and what none writes on purpose.
def mp_str(text: str) -> bytes:
    data = text.encode()
    if len(data) < 32:
        return bytes([0xA0 | len(data)]) + data
    return (b"\xd9" + bytes([len(data)]) if len(data) < 256 else b"\xda" + struct.pack(">H", len(data))) + data


def mp_int(value: int) -> bytes:
    if 0 <= value < 0x80:
        return bytes([value])
    return b"\xd3" + struct.pack(">q", value) if value < 0 else b"\xcf" + struct.pack(">Q", value)


def mp_float(value: float) -> bytes:
    return b"\xcb" + struct.pack(">d", value)


def mp_bin(data: bytes) -> bytes:
    return b"\xc4" + bytes([len(data)]) + data


def mp_map(pairs: Sequence[Tuple[bytes, bytes]], count: Optional[int] = None) -> bytes:
    """A map of packed keys and values; `count`: the entry count its header says."""
    n = len(pairs) if count is None else count
    return b"\xdf" + struct.pack(">I", n) + b"".join(k + v for k, v in pairs)


def mp_list(items: Sequence[bytes], count: Optional[int] = None) -> bytes:
    n = len(items) if count is None else count
    return b"\xdd" + struct.pack(">I", n) + b"".join(items)


def mp_nested(depth: int) -> bytes:
    """A list in a list ... `depth` deep, nil innermost."""
    return b"\x91" * depth + b"\xc0"


def entry(ordinal: bytes, original_size: Optional[int] = None) -> bytes:
    """A `toc` entry: {"type": "hsaco", "ordinal": ..., "original_size": ...}."""
    pairs = [(mp_str("type"), mp_str("hsaco")), (mp_str("ordinal"), ordinal)]
    if original_size is not None:
        pairs.append((mp_str("original_size"), mp_int(original_size)))
    return mp_map(pairs)


def toc(kernels: bytes, scheme: str, extra: Sequence[Tuple[bytes, bytes]] = (), arches: Sequence[str] = ("gfx1151",)) -> bytes:
    """A table of contents: `kernels` the packed `toc` map, `extra` more packed fields."""
    pairs = [
        (mp_str("format_version"), mp_int(1)), (mp_str("group_name"), mp_str("blas_lib")),
        (mp_str("gfx_arch_family"), mp_str(arches[0])), (mp_str("gfx_arches"), mp_list([mp_str(a) for a in arches])),
        (mp_str("compression_scheme"), mp_str(scheme)), (mp_str("toc"), kernels), *extra,
    ]  # fmt: skip
    return mp_map(pairs)


def kpack(region: bytes, table: bytes) -> bytes:
    """A `.kpack` archive: the header, `region` at 64 (the blobs or the zstd region), the TOC."""
    at = KPACK_ALIGN + len(region)
    return struct.pack("<4sIQ", b"KPAK", 1, at) + bytes(KPACK_ALIGN - 16) + region + table


def zstd_region(frames: Sequence[bytes]) -> bytes:
    """The zstd-per-kernel region: a u32 count, then each frame after its u32 size."""
    return struct.pack("<I", len(frames)) + b"".join(struct.pack("<I", len(f)) + f for f in frames)


def zstd_fields(region: bytes) -> Sequence[Tuple[bytes, bytes]]:
    return [(mp_str("zstd_offset"), mp_int(KPACK_ALIGN)), (mp_str("zstd_size"), mp_int(len(region)))]


def blobs(spans: Iterable[Tuple[bytes, bytes]]) -> Tuple[bytes, bytes]:
    """The `blobs` field of (packed offset, packed size) pairs."""
    return mp_str("blobs"), mp_list([mp_map([(mp_str("offset"), o), (mp_str("size"), s)]) for o, s in spans])


def one_kernel(key: str, arch: str, packed_entry: bytes) -> bytes:
    return mp_map([(mp_str(key), mp_map([(mp_str(arch), packed_entry)]))])


def many_kernels(count: int, ordinal: int = 0) -> Iterator[bytes]:
    """The `toc` map of `count` kernels, each one code object of ordinal `ordinal`, in pieces."""
    yield b"\xdf" + struct.pack(">I", count)
    packed = mp_map([(mp_str("gfx1151"), entry(mp_int(ordinal)))])
    for start in range(0, count, 4096):
        yield b"".join(mp_str(f"lib/libtorch_hip.so#{i}") + packed for i in range(start, min(count, start + 4096)))


def amdgpu_header(mach: int = 0x4A) -> bytes:
    """The 64-byte ELF header of an AMDGPU code object (e_machine 224, e_flags' low byte the
    mach: 0x4a is gfx1151), all the readers look at; the fuzz targets' seeds use it."""
    ident = b"\x7fELF" + bytes([2, 1, 1, 64, 3]) + bytes(7)  # ELF64, little-endian, AMDGPU_HSA ABI v3
    return ident + struct.pack("<HHIQQQIHHHHHH", 3, 224, 1, 0, 0, 0, 0x500 | mach, 64, 56, 0, 64, 0, 0)


def host_elf(sections: Sequence[Tuple[str, bytes]]) -> bytes:
    """A 64-bit little-endian x86-64 ELF of these sections (SHT_PROGBITS) and its name table:
    the section table the readers walk, nothing a loader needs."""
    names = b"\0" + b"".join(name.encode() + b"\0" for name, _ in sections) + b".shstrtab\0"
    body, headers, at, name_at = b"", [bytes(64)], 64, 1
    for name, data in sections:
        headers.append(struct.pack("<IIQQQQIIQQ", name_at, 1, 0, 0, at + len(body), len(data), 0, 0, 1, 0))
        body += data
        name_at += len(name) + 1
    headers.append(struct.pack("<IIQQQQIIQQ", name_at, 3, 0, 0, at + len(body), len(names), 0, 0, 1, 0))
    body += names
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    header = ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, 64 + len(body), 0, 64, 56, 0, 64, len(headers), len(headers) - 1)
    return header + body + b"".join(headers)
