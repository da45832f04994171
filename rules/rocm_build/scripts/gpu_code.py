"""Which AMD GPU architectures each library of a wheel carries code for, read from the bytes.

Usage: gpu_code.py WHEEL   prints JSON {"libraries": {member: [gfx...]},
                                         "code_objects": {member: [gfx]}, "unreadable": {member: why},
                                         "members": [every file of the wheel],
                                         "kpacks": {member: archive}, "split_libraries": {member: reference}}

A member carries AMDGPU code when it is an AMDGPU code object itself (an ELF with e_machine
EM_AMDGPU: `.co`, `.hsaco`; AOTriton ships one per kernel and arch), or a host library (a
`.so`) with offload sections: `.hip_fatbin`
(clang offload bundles, HIP's default) or `.llvm.offloading` (the new offload driver). In
both, each device image is an AMDGPU ELF; its arch is in its header (`e_flags & 0xff`,
amdgpu_elf.py), so the bundle's own entry names are not trusted. Compressed bundles (`CCOB`,
clang `--offload-compress`) are inflated as they are scanned (zlib, or zstd with the zstandard
module).

A wheel is untrusted input (a prebuilt one is someone else's build), so an offload section is
read with bounds: one pass over it, finding AMDGPU ELF headers and compressed bundles as it
goes (a bundle's payload is skipped, not searched); a compressed bundle inflates in pieces of
PIECE bytes, each scanned and dropped, never past the size its header declares nor past
MAX_INFLATED for the library; one found inside an inflated bundle is gathered (at most
MAX_NESTED_PAYLOAD bytes) and inflated after, from a list of work (never recursion), at most
MAX_NESTING deep. Whatever cannot be read is `unreadable` with one line naming the member's
field; the rest of the wheel's result is kept.

TheRock's split device code (RFC0008, kpack) is read with kpack.py, the format's reader (its
header says where the format was learned). A `.kpack` archive (`kpacks`): `arches`, the arches
its code objects' ELF headers say; `toc_arches`, what its table of contents says it holds;
`compression`; `kernels` {kernel key: {arch the table of contents files it under: arch its
ELF header says, "" if it is no AMDGPU ELF}}; `mismatches` [[kernel key, filed under, header
says]] where the two differ. A host library with a `.rocm_kpack_ref` marker (`split_libraries`:
`kernel_name`, `search_paths`, `indexes` of its HIPK wrappers, `bundled` arches still in its
offload sections) loads its device code from the archives: it is listed there, not among the
`libraries` that must carry code themselves. kpack.py and the zstd bundles need msgpack and
zstandard: this script reads wheels in auditwheel's venv, which has them.
"""

import json
import struct
import sys
import zipfile
import zlib

import zstandard

if __package__:  # imported as rocm_build.scripts.gpu_code (tests)
    from . import kpack
    from .amdgpu_elf import ELF_MAGIC, HEADER_BYTES, amdgpu_arch
    from .wheel_zip import data_offset
else:  # run by path in a sandbox, its siblings beside it
    import kpack
    from amdgpu_elf import ELF_MAGIC, HEADER_BYTES, amdgpu_arch
    from wheel_zip import data_offset

OFFLOAD_SECTIONS = (".hip_fatbin", ".llvm.offloading")
CCOB = b"CCOB"
# LLVM's CompressedOffloadBundle header (clang/lib/Driver/OffloadBundler.cpp): magic, u16
# version, u16 method (0 zlib, 1 zstd), then v1: u32 uncompressed size, u64 hash; v2: u32 total
# size (header and payload), u32 uncompressed size, u64 hash; v3: the two sizes as u64.
CCOB_HEADER = {1: 20, 2: 24, 3: 32}
CCOB_HEADER_MAX = 32
PIECE = 1 << 20  # bytes a compressed bundle inflates into at a time
MAX_INFLATED = 4 << 30  # bytes the bundles of one library may inflate to, together
MAX_NESTED_PAYLOAD = 16 << 20  # bytes of a compressed bundle found inside an inflated one
MAX_NESTING = 4  # compressed bundles inside compressed bundles (clang writes none)
MAX_WINDOW = 1 << 27  # zstd window a bundle may ask for (zstd's own default limit)


class Unreadable(Exception):
    pass


def sections(data, wanted):
    """name -> bytes of the sections named in `wanted` of a 64-bit little-endian ELF; every
    offset and size checked against the file."""
    if len(data) < 64:
        raise Unreadable(f"its ELF header is cut short ({len(data)} bytes)")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shentsize < 64 or shoff + shnum * shentsize > len(data) or shstrndx >= shnum:
        raise Unreadable("its ELF section headers lie outside the file")
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = headers[shstrndx]
    if names[4] + names[5] > len(data):
        raise Unreadable("its section name table lies outside the file")
    table = data[names[4]:names[4] + names[5]]
    found = {}
    for name_at, kind, _, _, offset, size, *_ in headers:
        end = table.find(b"\0", name_at)
        name = table[name_at:end if end >= 0 else len(table)].decode(errors="replace")
        if name in wanted and kind != 8:  # SHT_NOBITS has no bytes in the file
            if offset + size > len(data):
                raise Unreadable(f"its {name} section (offset {offset}, {size} bytes) lies outside the file")
            found[name] = data[offset:offset + size]
    return found


def ccob_header(data, at):
    """(header size, method, total size or None, uncompressed size) of the compressed bundle
    whose magic is at `at`, or None where the bytes after the magic are no such header (four
    bytes that read CCOB by chance). `data` holds CCOB_HEADER_MAX bytes from `at` or ends."""
    if len(data) < at + 8:
        return None
    version, method = struct.unpack_from("<HH", data, at + 4)
    if version not in CCOB_HEADER or method not in (0, 1) or len(data) < at + CCOB_HEADER[version]:
        return None
    if version == 1:
        (size,), total = struct.unpack_from("<I", data, at + 8), None
    else:
        total, size = struct.unpack_from("<II" if version == 2 else "<QQ", data, at + 8)
        if total < CCOB_HEADER[version]:
            return None
    return CCOB_HEADER[version], method, total, size


class Bundles:
    """What the offload sections of one library hold: every AMDGPU ELF header's arch, found in
    one pass over each section and each bundle as it inflates (the module's doc)."""

    def __init__(self):
        self.archs = set()
        self.inflated = 0  # bytes inflated so far, against MAX_INFLATED
        self.work = []  # (payload, method, uncompressed size, path): bundles to inflate

    def read(self, section, name):
        Scan(self, (), name).feed(section, last=True)  # a section is in memory: one piece
        while self.work:
            payload, method, size, path = self.work.pop()
            scan = Scan(self, path, name)
            for piece in self.inflate(payload, method, size, scan.where(())):
                scan.feed(piece)
            scan.feed(b"", last=True)
            if scan.gather is not None:
                raise Unreadable(f"{scan.where((scan.gather[4],))} says it is longer than the bundle that holds it")
        return self.archs

    def inflate(self, payload, method, size, where):
        """The pieces a compressed bundle inflates to, at most `size` bytes in all."""
        if self.inflated + size > MAX_INFLATED:
            raise Unreadable(f"{where} declares {size} bytes inflated, past the {MAX_INFLATED} this reader inflates for one library")
        self.inflated += size
        out = 0
        try:
            for piece in (_zlib_pieces if method == 0 else _zstd_pieces)(payload, size + 1):
                out += len(piece)
                if out > size:
                    break
                yield piece
        except (zlib.error, zstandard.ZstdError) as e:
            raise Unreadable(f"{where} does not inflate: {' '.join(str(e).split()) or type(e).__name__}") from e
        if out != size:
            said = f"more than the {size} bytes" if out > size else f"{out} bytes, not the {size}"
            raise Unreadable(f"{where} inflates to {said} its header declares")


def _zlib_pieces(payload, limit):
    """What a zlib stream inflates to, in pieces of at most PIECE bytes, until `limit` bytes.
    Its input goes in PIECE at a time: zlib copies what it leaves unread (unconsumed_tail).
    A piece is asked for until none comes, with no input left too: zlib may hold output it had
    no room for after the last input byte."""
    d, out = zlib.decompressobj(), 0
    for at in range(0, len(payload), PIECE):
        data = payload[at:at + PIECE]
        while not d.eof and out < limit:
            piece = d.decompress(data, PIECE)
            data = d.unconsumed_tail
            if not piece and not data:
                break  # this input is used up: the next
            out += len(piece)
            yield piece
        if d.eof or out >= limit:
            return


def _zstd_pieces(payload, limit):
    """What a zstd frame inflates to, in pieces of at most PIECE bytes, until `limit` bytes."""
    reader = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW).stream_reader(payload, read_across_frames=False)
    out = 0
    while out < limit:
        piece = reader.read(min(PIECE, limit - out))
        if not piece:
            return
        out += len(piece)
        yield piece


class Scan:
    """One pass over bytes that arrive in pieces, finding AMDGPU ELF headers and compressed
    bundles: linear in the bytes (a search starts where the last match ended, and a bundle's
    payload is passed over), keeping at most a header's worth of the previous piece."""

    def __init__(self, bundles, path, section):
        self.bundles, self.path, self.section = bundles, path, section  # path: offsets of the bundles it is in
        self.tail = b""  # the end of the last piece, where a header may start
        self.offset = 0  # where the bytes being scanned (`tail`, then the piece) start in the stream
        self.gather = None  # [payload so far, bytes still to come, method, size, offset] of a nested bundle

    def where(self, inner):
        """A bundle in a message: the offsets of it and of the bundles it is in, outermost first."""
        return f"its compressed offload bundle at {' > '.join(f'{o:#x}' for o in (*self.path, *inner))} in its {self.section} section"

    def feed(self, piece, last=False):
        if self.gather is not None:
            rest = self._gather(piece)
            self.offset += len(piece) - len(rest)
            if self.gather is not None:
                return
            piece = rest
        data = self.tail + piece if self.tail else piece
        next_elf, next_ccob, at = data.find(ELF_MAGIC), data.find(CCOB), 0
        while next_elf >= 0 or next_ccob >= 0:
            elf = next_elf >= 0 and (next_ccob < 0 or next_elf < next_ccob)
            hit = next_elf if elf else next_ccob
            if not last and len(data) - hit < (HEADER_BYTES if elf else CCOB_HEADER_MAX):
                at = hit  # a header the piece's end cuts: read it with the next piece
                break
            if elf:
                arch = amdgpu_arch(data, hit)
                if arch:
                    self.bundles.archs.add(arch)
                at = hit + len(ELF_MAGIC)
            else:
                at = self._bundle(data, hit)
            if at >= len(data) and self.gather is not None:  # a nested payload goes on in the next pieces
                self.tail, self.offset = b"", self.offset + len(data)
                return
            if 0 <= next_elf < at:
                next_elf = data.find(ELF_MAGIC, at)
            if 0 <= next_ccob < at:
                next_ccob = data.find(CCOB, at)
        else:
            at = max(at, len(data) - len(CCOB) + 1)  # a magic the piece's end cuts
        self.offset += at
        self.tail = data[at:] if at < len(data) else b""

    def _bundle(self, data, at):
        """Notes the compressed bundle at `at`, if it is one; where scanning goes on (after its
        payload, whose bytes are compressed, not searched)."""
        header = ccob_header(data, at)
        if header is None:
            return at + len(CCOB)
        offset = self.offset + at
        where = self.where((offset,))
        if len(self.path) >= MAX_NESTING:
            raise Unreadable(f"{where} is nested {len(self.path) + 1} deep, past the {MAX_NESTING} this reader inflates")
        length, method, total, size = header
        start = at + length
        if not self.path:  # the whole section is in `data`
            end = len(data) if total is None else at + total  # v1 has no total: the rest is its payload
            if end > len(data):
                raise Unreadable(f"{where} says it is {total} bytes, past the end of the section")
            self.bundles.work.append((memoryview(data)[start:end], method, size, (offset,)))
            return end
        if total is None:
            raise Unreadable(f"{where} is a version 1 bundle inside another (no size to pass over)")
        if total - length > MAX_NESTED_PAYLOAD:
            raise Unreadable(f"{where} says it is {total} bytes, past the {MAX_NESTED_PAYLOAD} gathered of a nested bundle")
        self.gather = [bytearray(), total - length, method, size, offset]
        return len(data) - len(self._gather(data[start:]))

    def _gather(self, piece):
        """Passes the start of `piece` to the nested bundle being gathered; the rest."""
        payload, left, method, size, offset = self.gather
        take = piece[:left]
        payload += take
        self.gather[1] = left - len(take)
        if self.gather[1] == 0:
            self.bundles.work.append((bytes(payload), method, size, (*self.path, offset)))
            self.gather = None
        return piece[len(take):]


def archs_of(data):
    """The arches a file carries code for (empty: no AMDGPU code), or None if not ELF."""
    if data[:4] != ELF_MAGIC:
        return None
    own = amdgpu_arch(data)
    if own:
        return {own}
    if len(data) < 64 or data[4] != 2 or data[5] != 1:
        return set()  # not a 64-bit little-endian host object: no GPU code of ours
    found = set()
    bundles = Bundles()  # MAX_INFLATED counts for the library
    for name, blob in sorted(sections(data, OFFLOAD_SECTIONS).items()):
        found |= bundles.read(blob, name)
    return found


def is_host_elf(data):
    """A 64-bit little-endian ELF that is no AMDGPU code object: a host library or program."""
    return len(data) >= 64 and data[:4] == ELF_MAGIC and data[4] == 2 and data[5] == 1 and not amdgpu_arch(data)


def kpack_reference(data):
    """A split host library's `.rocm_kpack_ref` marker and the code object index of each HIPK
    wrapper, or None for a library that is not split."""
    found = sections(data, (kpack.MARKER_SECTION, kpack.WRAPPER_SECTION))
    if kpack.MARKER_SECTION not in found:
        return None
    kernel_name, search_paths = kpack.read_marker(found[kpack.MARKER_SECTION])
    indexes = kpack.hipk_indexes(found.get(kpack.WRAPPER_SECTION, b""))
    return {"kernel_name": kernel_name, "search_paths": search_paths, "indexes": indexes}


def kpack_code(f, size):
    """What the `.kpack` archive in the file `f` of `size` bytes carries (see the module's doc),
    and why its code objects that could not be read were not ("" if all were)."""
    archive = kpack.read_archive(f, size)
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
    for a GB library takes half the time of zipfile's reads in pieces; never past the size the
    zip declares for it."""
    if info.compress_type != zipfile.ZIP_DEFLATED:
        return wheel.read(info)
    wheel.fp.seek(data_offset(wheel.fp, info))
    data = zlib.decompressobj(-15).decompress(wheel.fp.read(info.compress_size), info.file_size + 1)
    if len(data) != info.file_size or zlib.crc32(data) != info.CRC:
        raise zlib.error(f"{info.filename} does not inflate to its recorded size and crc")
    return data


def read_member(found, wheel, info):
    """Records what one member of the wheel carries in `found` (main's JSON)."""
    name = info.filename
    if name.endswith(kpack.SUFFIX):
        with wheel.open(info) as f:  # read where the archive points, never as a whole
            found["kpacks"][name], why = kpack_code(f, info.file_size)
        if why:
            found["unreadable"][name] = why
        return
    data = member_bytes(wheel, info)
    archs = archs_of(data)
    reference = kpack_reference(data) if is_host_elf(data) else None
    if reference is not None:
        # Its device code is in `.kpack` archives (TheRock's split): what it references is
        # checked across the install set (install/kpack_check.py), not here.
        found["split_libraries"][name] = {**reference, "bundled": sorted(archs)}
    elif archs:
        found["code_objects" if amdgpu_arch(data) else "libraries"][name] = sorted(archs)


def main():
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
                read_member(found, wheel, info)
            # A wheel is untrusted input: what cannot be read is reported by name, never a crash.
            except (Unreadable, kpack.KpackError, struct.error, ValueError, IndexError, zlib.error, zipfile.BadZipFile,
                    OSError, EOFError) as e:  # fmt: skip
                found["unreadable"][info.filename] = " ".join(str(e).split()) or type(e).__name__
    json.dump(found, sys.stdout, indent=2, sort_keys=True)


if __name__ == "__main__":
    main()
