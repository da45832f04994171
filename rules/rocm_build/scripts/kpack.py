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

A code object's arch is read from its own ELF header (amdgpu_elf.amdgpu_arch), not from the
TOC: only its first ARCH_BYTES are read (inflated, for a zstd frame).

An archive comes from a wheel someone else built, so it is read with bounds, whatever it
holds: the file is read where the format points (the header, the TOC, the first bytes of each
code object) and never as a whole; the TOC is read as a stream, field by field, each field's
type checked as it comes, keeping only what the answer needs (at most MAX_ENTRIES code
objects, strings of at most MAX_STRING bytes, unknown fields skipped by msgpack in C within
its own nesting limit); every offset and size is checked against the file; a zstd frame is
inflated only as far as ARCH_BYTES, at most once however many entries name it, with a window
of at most MAX_WINDOW, and one whose declared size passes MAX_CODE_OBJECT is refused. What
cannot be read is a KpackError of one line naming the field (the archive), or a reason under
`unreadable` (one code object); never another exception.
"""

import struct

import msgpack
import zstandard

if __package__:  # imported as rocm_build.scripts.kpack (tests)
    from .amdgpu_elf import HEADER_BYTES, amdgpu_arch
else:  # run by path in a sandbox, amdgpu_elf.py beside it
    from amdgpu_elf import HEADER_BYTES, amdgpu_arch

MAGIC = b"KPAK"
VERSION = 1
HEADER = struct.Struct("<4sIQ")
MARKER_SECTION = ".rocm_kpack_ref"
WRAPPER_SECTION = ".hipFatBinSegment"
WRAPPER = struct.Struct("<IIQI4x")  # magic, version, pointer, co_index (low half of reserved1)
HIPK = 0x4B504948
ARCH_PLACEHOLDER = "@GFXARCH@"
SUFFIX = ".kpack"
SCHEMES = ("none", "zstd-per-kernel")

ARCH_BYTES = 64  # what is read of a code object: its ELF header names its arch
MAX_ENTRIES = 1 << 17  # code objects (kernel x arch) one archive may list; also blobs and frames
MAX_ARCHES = 256  # entries of `gfx_arches`
MAX_STRING = 4096  # bytes of a kernel key, an arch or any string of the TOC
MAX_TOC_BYTES = 64 << 20  # a TOC of MAX_ENTRIES code objects takes under 16 MiB
MAX_CODE_OBJECT = 1 << 28  # a code object's declared size (256 MiB; real ones are a few MiB)
MAX_WINDOW = 1 << 25  # zstd window a frame may ask for (32 MiB: zstd -19 asks 8 MiB)
MAX_MARKER = 64 << 10  # bytes of a `.rocm_kpack_ref` section: a name and a few paths (decoded whole)
MARKER_LIMITS = dict(max_str_len=MAX_STRING, max_bin_len=0, max_ext_len=0, max_array_len=1024, max_map_len=64)


class KpackError(Exception):
    pass


def _plain(text, what):
    """`text` if it is a string fit for a one-line message and a JSON key, else a KpackError."""
    if not isinstance(text, str):
        kind = "bytes (msgpack bin)" if isinstance(text, bytes) else _kind(text)
        raise KpackError(f"{what} is {kind}, not a string")
    if not text or not text.isprintable():
        raise KpackError(f"{what} {text!r} is empty or holds a control character")
    return text


def _kind(value):
    """What a decoded msgpack value is, for a message: its type and, for a scalar, its value."""
    names = {bool: "a boolean", int: "an integer", float: "a float", str: "a string", bytes: "bytes",
             list: "a list", dict: "a map", type(None): "nil"}  # fmt: skip
    name = names.get(type(value), type(value).__name__)
    return f"{name} ({value!r})" if isinstance(value, (bool, int, float)) else name


def read_marker(data):
    """The `.rocm_kpack_ref` section's map: (kernel name, search paths)."""
    if len(data) > MAX_MARKER:
        raise KpackError(f"its {MARKER_SECTION} section is {len(data)} bytes, more than the {MAX_MARKER} a marker may have")
    try:
        marker = msgpack.unpackb(data, raw=False, **MARKER_LIMITS)
    except (ValueError, msgpack.UnpackException) as e:
        raise KpackError(f"its {MARKER_SECTION} section is not msgpack: {str(e) or type(e).__name__}") from e
    name = marker.get("kernel_name") if isinstance(marker, dict) else None
    paths = marker.get("kpack_search_paths") if isinstance(marker, dict) else None
    if not isinstance(name, str) or not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise KpackError(f"its {MARKER_SECTION} section lacks a kernel_name string or a kpack_search_paths list")
    _plain(name, f"its {MARKER_SECTION} section's kernel_name")
    for path in paths:
        _plain(path, f"a kpack_search_paths entry of its {MARKER_SECTION} section")
    return name, paths


def hipk_indexes(segment):
    """The code object index of each HIPK wrapper of a `.hipFatBinSegment` (HIPF ones carry
    their code in the library itself)."""
    if len(segment) % WRAPPER.size:
        raise KpackError(f"its {WRAPPER_SECTION} section is {len(segment)} bytes, not a multiple of {WRAPPER.size}")
    return [index for magic, _, _, index in WRAPPER.iter_unpack(segment) if magic == HIPK]


class _File:
    """The archive: a seekable binary file of `size` bytes, read only where asked and, after
    its table of contents, front to back (a deflated wheel member seeks back by inflating
    again from its start)."""

    def __init__(self, f, size):
        self.f, self.size = f, size
        self.last_at, self.last = 0, b""  # the latest bytes read, which a read may start within

    def read_at(self, offset, length, what):
        if offset < 0 or length < 0 or offset + length > self.size:
            raise KpackError(f"{what} (offset {offset}, {length} bytes) lies outside the file ({self.size} bytes)")
        kept = b""
        if self.last_at <= offset < self.last_at + len(self.last):
            kept = self.last[offset - self.last_at:offset - self.last_at + length]
        if len(kept) < length:
            self.f.seek(offset + len(kept))
            kept += self.f.read(length - len(kept))
            self.last_at, self.last = offset, kept  # it ends where the file now stands
        if len(kept) != length:
            raise KpackError(f"{what} (offset {offset}, {length} bytes) ends early: the file is shorter than it says")
        return kept

    def window(self, offset, length, first=b""):
        """`length` bytes from `offset` as a file, of which `first` (just read) are its start."""
        self.f.seek(offset + len(first))  # where it stands after `first`: no move, then
        return _Window(self.f, length - len(first), first)


class _Window:
    """Bytes of a file from where it stands (after `first`), at most `left`, as a file: what
    msgpack's and zstd's readers read from."""

    def __init__(self, f, left, first=b""):
        self.f, self.left, self.first = f, left, first

    def read(self, n=-1):
        n = self.left + len(self.first) if n is None or n < 0 else n
        data, self.first = self.first[:n], self.first[n:]
        if len(data) < n and self.left:
            more = self.f.read(min(n - len(data), self.left))
            self.left -= len(more)
            data += more
        return data


class _Toc:
    """A TOC read from a stream: each field's type checked as it comes, only what is needed kept."""

    def __init__(self, stream):
        self.unpacker = msgpack.Unpacker(
            stream, raw=False, strict_map_key=False, read_size=1 << 16, max_buffer_size=1 << 20,
            max_str_len=MAX_STRING, max_bin_len=MAX_STRING, max_ext_len=0, max_array_len=MAX_ENTRIES, max_map_len=MAX_ENTRIES,
        )  # fmt: skip
        self.fields = {}  # compression_scheme, zstd_offset, zstd_size, gfx_arches -> its value
        self.kernels = None  # kernel key -> arch -> (ordinal, original_size or None, why it is unusable or "")
        self.entries = 0
        self.blobs = None  # per ordinal: (offset, size) or why it is unusable

    def _containers(self):
        return (("a map", self.unpacker.read_map_header), ("a list", self.unpacker.read_array_header))

    def _scalar(self, what):
        """The next value, which must be no map or list: one is refused before it is read (a
        failed header read consumes nothing)."""
        for kind, header in self._containers():
            try:
                header()
            except ValueError:
                continue
            raise KpackError(f"{what} is {kind}")
        return self.unpacker.unpack()

    def _size(self, kind, what, limit):
        """The entry count of the next value, which must be `kind` ("a map" or "a list")."""
        containers = dict(self._containers())
        try:
            n = containers[kind]()
        except ValueError:
            other = next(iter(set(containers) - {kind}))
            try:
                containers[other]()
                found = other
            except ValueError:
                found = _kind(self.unpacker.unpack())
            raise KpackError(f"{what} is {found}, not {kind}") from None
        if n > limit:
            raise KpackError(f"{what} has {n} entries, more than the {limit} this reader takes")
        return n

    def _string(self, what):
        return _plain(self._scalar(what), what)

    def read(self):
        for _ in range(self._size("a map", "its table of contents", 64)):
            key = self._string("a key of its table of contents")
            if key == "toc":
                self._read_kernels()
            elif key == "gfx_arches":
                count = self._size("a list", "its `gfx_arches`", MAX_ARCHES)
                self.fields[key] = [self._string(f"entry {i} of its `gfx_arches`") for i in range(count)]
            elif key == "blobs":
                self.blobs = [self._blob(i) for i in range(self._size("a list", "its `blobs`", MAX_ENTRIES))]
            elif key in ("compression_scheme", "zstd_offset", "zstd_size"):
                self.fields[key] = self._scalar(f"its `{key}`")
            else:
                self.unpacker.skip()  # format_version, group_name, gfx_arch_family, newer fields
        if self.kernels is None or "gfx_arches" not in self.fields:
            raise KpackError("its table of contents lacks `toc` or `gfx_arches`")
        return self

    def _read_kernels(self):
        self.kernels = {}
        for _ in range(self._size("a map", "its `toc`", MAX_ENTRIES)):
            key = self._string("a kernel key of its `toc`")
            by_arch = self.kernels.setdefault(key, {})
            for _ in range(self._size("a map", f"the `toc` entry of {key!r}", MAX_ARCHES)):
                arch = self._string(f"an arch of {key!r} in its `toc`")
                self.entries += 1
                if self.entries > MAX_ENTRIES:
                    raise KpackError(f"its `toc` lists more than the {MAX_ENTRIES} code objects this reader takes")
                by_arch[arch] = self._entry(f"the `toc` entry of {key!r} @ {arch!r}")

    def _fields(self, what, wanted):
        """The fields of the map that comes next that are among `wanted` (the others skipped)."""
        found = {}
        for _ in range(self._size("a map", what, 64)):
            name = self._scalar(f"a field name of {what}")
            if name in wanted:
                found[name] = self._scalar(f"the `{name}` of {what}")
            else:
                self.unpacker.skip()  # an entry's `type` ("hsaco"), newer fields
        return found

    def _entry(self, what):
        """(ordinal, original_size or None, why the entry is unusable or "")."""
        fields = self._fields(what, ("ordinal", "original_size"))
        for name in ("ordinal", "original_size"):
            value = fields.get(name)
            if (name in fields or name == "ordinal") and (type(value) is not int or value < 0):
                return None, None, f"its `{name}` is {_kind(value)}, not a non-negative integer"
        return fields["ordinal"], fields.get("original_size"), ""

    def _blob(self, i):
        """(offset, size) of stored code object `i`, or why it is unusable."""
        fields = self._fields(f"blob {i} of its `blobs`", ("offset", "size"))
        for name in ("offset", "size"):
            value = fields.get(name)
            if type(value) is not int or value < 0:
                return f"the `{name}` of blob {i} is {_kind(value)}, not a non-negative integer"
        return fields["offset"], fields["size"]


def _toc(archive):
    if archive.size < HEADER.size:
        raise KpackError(f"it is {archive.size} bytes, shorter than the {HEADER.size}-byte header")
    magic, version, toc_at = HEADER.unpack(archive.read_at(0, HEADER.size, "its header"))
    if magic != MAGIC:
        raise KpackError(f"it starts with {magic!r}, not {MAGIC!r}")
    if version != VERSION:
        raise KpackError(f"its format version is {version}; this reader knows {VERSION}")
    if not HEADER.size <= toc_at < archive.size:
        raise KpackError(f"its table of contents offset {toc_at} lies outside the file ({archive.size} bytes)")
    if archive.size - toc_at > MAX_TOC_BYTES:
        raise KpackError(f"its table of contents is {archive.size - toc_at} bytes, more than the {MAX_TOC_BYTES} this reader takes")
    try:
        toc = _Toc(archive.window(toc_at, archive.size - toc_at)).read()
    except msgpack.StackError as e:  # skipping a value nested past msgpack's own limit
        raise KpackError("its table of contents nests deeper than msgpack reads (it needs 5 levels)") from e
    except msgpack.OutOfData as e:
        raise KpackError("its table of contents ends inside a value") from e
    except (ValueError, msgpack.UnpackException) as e:  # msgpack's max_*_len limits, malformed bytes
        raise KpackError(f"its table of contents is not msgpack: {str(e) or type(e).__name__}") from e
    scheme = toc.fields.get("compression_scheme", "none")
    if scheme not in SCHEMES:
        raise KpackError(f"its compression scheme {scheme!r} is not known ({', '.join(SCHEMES)})")
    return toc, scheme


def _stored(archive, toc, wanted):
    """ordinal -> the first ARCH_BYTES of each wanted stored code object, or why it cannot be
    read; read in file order, each span once."""
    blobs = toc.blobs or []
    spans = {}
    for ordinal in wanted:
        blob = blobs[ordinal]
        if isinstance(blob, str):
            spans[ordinal] = blob
        elif blob[1] > MAX_CODE_OBJECT:
            spans[ordinal] = f"its blob's `size` {blob[1]} is over the {MAX_CODE_OBJECT} bytes a code object may have"
        elif blob[0] + blob[1] > archive.size:
            spans[ordinal] = f"its blob (offset {blob[0]}, size {blob[1]}) runs past the end of the file ({archive.size} bytes)"
        else:
            spans[ordinal] = (blob[0], min(blob[1], ARCH_BYTES))
    heads = {}
    for span in sorted({s for s in spans.values() if not isinstance(s, str)}):
        heads[span] = archive.read_at(span[0], span[1], "a stored code object")
    return {o: s if isinstance(s, str) else heads[s] for o, s in spans.items()}


def _frames(archive, toc, wanted, sizes):
    """ordinal -> the first ARCH_BYTES of each wanted zstd frame inflated, or why it cannot be;
    the region's frames walked once, in order."""
    start, size = toc.fields.get("zstd_offset"), toc.fields.get("zstd_size")
    for name, value in (("zstd_offset", start), ("zstd_size", size)):
        if type(value) is not int or value < 0:
            raise KpackError(f"its `{name}` is {_kind(value)}, not a non-negative integer")
    if start + size > archive.size or size < 4:
        raise KpackError(f"its zstd region (offset {start}, size {size}) does not fit the file ({archive.size} bytes)")
    (count,) = struct.unpack("<I", archive.read_at(start, 4, "its zstd region's frame count"))
    if count > MAX_ENTRIES:
        raise KpackError(f"its zstd region holds {count} frames, more than the {MAX_ENTRIES} this reader takes")
    found, at, end = {}, start + 4, start + size
    for ordinal in range(count):
        if at + 4 > end:
            raise KpackError(f"its zstd region ends before frame {ordinal}'s size (of {count} frames)")
        (length,) = struct.unpack("<I", archive.read_at(at, 4, f"frame {ordinal}'s size"))
        if at + 4 + length > end:
            raise KpackError(f"its zstd frame {ordinal} ({length} bytes at offset {at + 4}) runs past the region's end ({end})")
        if ordinal in wanted:
            found[ordinal] = _frame_head(archive, at + 4, length, sizes.get(ordinal))
        at += 4 + length
    return found, count


def _frame_head(archive, at, length, declared):
    """The first ARCH_BYTES a zstd frame inflates to, or why it cannot be read."""
    head = archive.read_at(at, min(length, 18), "a zstd frame's header")  # a frame header is at most 18 bytes
    try:
        content = zstandard.frame_content_size(head)
    except zstandard.ZstdError as e:
        return f"its zstd frame does not decompress: {e}"
    if content > MAX_CODE_OBJECT:
        return f"its zstd frame declares {content} bytes, over the {MAX_CODE_OBJECT} a code object may have"
    if content >= 0 and declared is not None and content != declared:
        return f"its zstd frame declares {content} bytes, its `original_size` {declared}"
    # A frame without its content size in the header (a streamed one) inflates too.
    reader = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW).stream_reader(
        archive.window(at, length, head), read_size=1 << 14, read_across_frames=False
    )
    try:
        return reader.read(ARCH_BYTES)
    except zstandard.ZstdError as e:
        return f"its zstd frame does not decompress: {e}"


def read_archive(f, size):
    """What the archive in the seekable binary file `f` of `size` bytes holds: {"arches": [...],
    "compression": scheme, "kernels": {key: {arch: the arch its code object's ELF header
    names, "" if it is no AMDGPU ELF}}, "unreadable": {"key @ arch": why}}; a KpackError (one
    line, naming the field) when the archive itself cannot be read."""
    archive = _File(f, size)
    try:
        toc, scheme = _toc(archive)
        entries = [(key, arch, entry) for key, by_arch in sorted(toc.kernels.items()) for arch, entry in sorted(by_arch.items())]
        wanted = {ordinal for _, _, (ordinal, _, why) in entries if not why}
        if scheme == "none":
            count = len(toc.blobs or [])
            heads = _stored(archive, toc, {o for o in wanted if o < count})
        else:
            sizes = {ordinal: declared for _, _, (ordinal, declared, why) in entries if not why and declared is not None}
            heads, count = _frames(archive, toc, wanted, sizes)
    except (OSError, EOFError, RuntimeError, zstandard.ZstdError) as e:  # the member itself (zipfile's CRC, inflation)
        raise KpackError(f"it cannot be read: {str(e) or type(e).__name__}") from e
    kernels, unreadable = {}, {}
    for key, arch, (ordinal, _, why) in entries:
        kernels.setdefault(key, {})
        if not why and ordinal >= count:
            why = f"its ordinal {ordinal} is outside the {count} stored code objects"
        head = heads.get(ordinal) if not why else None
        if why or isinstance(head, str):
            unreadable[f"{key} @ {arch}"] = why or head
            continue
        kernels[key][arch] = (amdgpu_arch(head) or "") if len(head) >= HEADER_BYTES else ""
    return {"arches": list(toc.fields["gfx_arches"]), "compression": scheme, "kernels": kernels, "unreadable": unreadable}
