"""A zip writer for wheels whose deflated bytes depend on the members' contents alone, and
reuse what an earlier wheel of the same component deflated.

A ROCm torch wheel is gigabytes of shared libraries, and GPU code deflates at ~47 MB/s a core
(zlib level 6, measured here): re-zipping after a one-line edit would cost more than the
compile. So each member is deflated in chunks cut by content (the first ANCHOR at least
MIN_CHUNK bytes after the previous cut, else MAX_CHUNK bytes on), each chunk by a fresh
compressor ending in a sync flush, the member's stream closed by an empty final block. A
chunk's deflated bytes are then a function of the chunk alone: they are kept under its
sha256 in a cache directory, and a relinked library whose bytes moved still finds most of
its chunks there. Chunks are deflated in parallel threads (zlib and hashlib release the GIL).

The output does not depend on the cache, the number of threads or read sizes: a clean build
and an incremental one write the same bytes (the bench compares them). Members are written
with fixed times and modes; zip64 records only where sizes or counts need them. Members of
another zip can be copied as they are (`raw_entries`), deflated bytes and all.
"""

import base64
import csv
import hashlib
import io
import os
import struct
import zipfile
import zlib
from collections import deque
from concurrent.futures import ThreadPoolExecutor

LEVEL = 6
ANCHOR = b"\xa5\x5a"  # any two bytes: in incompressible data, one every 64 KiB on average
MIN_CHUNK = 512 << 10
MAX_CHUNK = 4 << 20
READ = 8 << 20
CACHED_MIN = 64 << 10  # smaller chunks deflate faster than a cache lookup
FINAL_BLOCK = b"\x03\x00"  # an empty, final block with fixed codes
ZIP64_LIMIT = (1 << 31) - 1
DOS_DATE, DOS_TIME = (0 << 9) | (1 << 5) | 1, 0  # 1980-01-01 00:00:00


class RawEntry:
    """A member of an existing zip, to copy without inflating it."""

    def __init__(self, path, info, data_offset):
        self.path, self.info, self.data_offset = path, info, data_offset


def data_offset(f, info):
    """Where the stored bytes of member `info` start in the zip open as `f` (after its local
    header, whose name and extra field may differ from the central directory's)."""
    f.seek(info.header_offset)
    name_len, extra_len = struct.unpack("<HH", f.read(30)[26:30])
    return info.header_offset + 30 + name_len + extra_len


def raw_entries(path):
    """name -> RawEntry for every file in the zip at `path`."""
    with zipfile.ZipFile(path) as archive, open(path, "rb") as f:
        return {i.filename: RawEntry(path, i, data_offset(f, i)) for i in archive.infolist() if not i.is_dir()}


def cut(buf, at_end):
    """Where the next chunk of `buf` ends, or None until more bytes are read."""
    found = buf.find(ANCHOR, MIN_CHUNK, MAX_CHUNK)
    if found >= 0:
        return found + len(ANCHOR)
    if len(buf) >= MAX_CHUNK:
        return MAX_CHUNK
    return len(buf) if at_end else None


def chunks(stream):
    buf, at_end = bytearray(), False
    while buf or not at_end:
        if not at_end:
            piece = stream.read(READ)
            at_end = not piece
            buf += piece
        end = cut(buf, at_end)
        while end:
            yield bytes(buf[:end])
            del buf[:end]
            end = cut(buf, at_end)


class ChunkCache:
    """Deflated chunks by the sha256 of their bytes, per zlib version and level (another zlib
    may deflate differently), each file ending with the crc32 of what precedes it so a torn or
    damaged file is deflated again instead of trusted."""

    def __init__(self, root):
        self.dir = os.path.join(root, f"zlib-{zlib.ZLIB_RUNTIME_VERSION}-{LEVEL}")
        self.used = 0  # bytes of chunks this wheel holds (counted by the writer)

    def _path(self, chunk):
        key = hashlib.sha256(chunk).hexdigest()
        return os.path.join(self.dir, key[:2], key)

    def get(self, chunk):
        path = self._path(chunk)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return path, None
        body, check = data[:-4], data[-4:]
        if len(data) < 4 or struct.pack("<I", zlib.crc32(body)) != check:
            return path, None
        os.utime(path)  # recently used: kept by `prune`
        return path, body

    def put(self, path, deflated):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        part = f"{path}.{os.getpid()}.{id(deflated)}.part"
        with open(part, "wb") as f:
            f.write(deflated + struct.pack("<I", zlib.crc32(deflated)))
        os.replace(part, path)

    def prune(self, keep_factor=2):
        """Drops the least recently used chunks once the cache holds more than `keep_factor`
        times what this wheel used: the previous build's chunks stay for the next edit."""
        files = []
        for parent, _, names in os.walk(os.path.dirname(self.dir)):
            for name in names:
                try:
                    st = os.stat(os.path.join(parent, name))
                except FileNotFoundError:  # another build of the component renamed or pruned it
                    continue
                files.append((st.st_mtime, st.st_size, os.path.join(parent, name)))
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files):
            if total <= keep_factor * self.used:
                break
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            total -= size


def deflate_chunk(chunk, cache):
    if cache is not None and len(chunk) >= CACHED_MIN:
        path, found = cache.get(chunk)
        if found is not None:
            return found
    compressor = zlib.compressobj(LEVEL, zlib.DEFLATED, -15)
    deflated = compressor.compress(chunk) + compressor.flush(zlib.Z_SYNC_FLUSH)
    if cache is not None and len(chunk) >= CACHED_MIN:
        cache.put(path, deflated)
    return deflated


class WheelZip:
    """Writes `target` (through `target.part`, renamed when finished)."""

    def __init__(self, target, chunk_cache=None, jobs=None):
        self.target = target
        self.file = open(target + ".part", "wb")
        self.cache = ChunkCache(chunk_cache) if chunk_cache else None
        self.jobs = jobs or len(os.sched_getaffinity(0))
        self.pool = ThreadPoolExecutor(self.jobs)
        self.central = []

    def add(self, name, mode, stream, size):
        """Deflates `size` bytes read from `stream`; returns the member's RECORD line."""
        zip64 = size > ZIP64_LIMIT
        offset, header_at = self.file.tell(), self._local_header(name, 8, 0, 0, size, zip64)
        digest, crc, written, compressed = hashlib.sha256(), 0, 0, 0
        pending = deque()
        for chunk in chunks(stream):
            digest.update(chunk)
            crc = zlib.crc32(chunk, crc)
            written += len(chunk)
            pending.append(self.pool.submit(deflate_chunk, chunk, self.cache))
            while len(pending) > 2 * self.jobs:
                compressed += self._write_deflated(pending.popleft().result())
        while pending:
            compressed += self._write_deflated(pending.popleft().result())
        compressed += self.file.write(FINAL_BLOCK)
        if written != size:
            raise ValueError(f"{name}: read {written} bytes, expected {size}")
        self._patch_header(header_at, crc, compressed, zip64)
        self.central.append((name, mode, 8, crc, compressed, size, offset))
        return record_line(name, digest.digest(), size)

    def _write_deflated(self, deflated):
        if self.cache is not None:
            self.cache.used += len(deflated)
        return self.file.write(deflated)

    def add_bytes(self, name, mode, data):
        return self.add(name, mode, io.BytesIO(data), len(data))

    def add_raw(self, name, mode, entry):
        """Copies a member of another zip as it is stored (same method, crc, bytes)."""
        info = entry.info
        zip64 = info.file_size > ZIP64_LIMIT
        offset = self.file.tell()
        self._local_header(name, info.compress_type, info.CRC, info.compress_size, info.file_size, zip64)
        self.file.flush()
        with open(entry.path, "rb") as src:
            copy_range(src, self.file, entry.data_offset, info.compress_size, name)
        self.file.seek(0, os.SEEK_END)  # (its header was written with the final crc and sizes)
        self.central.append((name, mode, info.compress_type, info.CRC, info.compress_size, info.file_size, offset))

    def _local_header(self, name, method, crc, compressed, size, zip64):
        """Writes a local header; returns where its crc and sizes are, to patch them after."""
        encoded, flags = encode_name(name)
        extra = struct.pack("<HHQQ", 1, 16, size, compressed) if zip64 else b""
        at = self.file.tell()
        self.file.write(struct.pack(
            "<IHHHHHIIIHH", 0x04034B50, 45 if zip64 else 20, flags, method, DOS_TIME, DOS_DATE, crc,
            0xFFFFFFFF if zip64 else compressed, 0xFFFFFFFF if zip64 else size, len(encoded), len(extra),
        ))  # fmt: skip
        self.file.write(encoded + extra)
        return at, len(encoded)

    def _patch_header(self, header_at, crc, compressed, zip64):
        at, name_len = header_at
        end = self.file.tell()
        self.file.seek(at + 14)
        self.file.write(struct.pack("<I", crc))
        if zip64:
            self.file.seek(at + 30 + name_len + 12)  # the extra's compressed size
            self.file.write(struct.pack("<Q", compressed))
        else:
            self.file.write(struct.pack("<I", compressed))
        self.file.seek(end)

    def finish(self):
        self.pool.shutdown()
        start = self.file.tell()
        for name, mode, method, crc, compressed, size, offset in self.central:
            encoded, flags = encode_name(name)
            big = [v for v in (size, compressed) if size > ZIP64_LIMIT] + ([offset] if offset > ZIP64_LIMIT else [])
            extra = struct.pack(f"<HH{len(big)}Q", 1, 8 * len(big), *big) if big else b""
            needed = 45 if big else 20
            attr = (0o100755 if mode & 0o111 else 0o100644) << 16
            self.file.write(struct.pack(
                "<IHHHHHHIIIHHHHHII", 0x02014B50, (3 << 8) | needed, needed, flags, method, DOS_TIME, DOS_DATE, crc,
                0xFFFFFFFF if size > ZIP64_LIMIT else compressed, 0xFFFFFFFF if size > ZIP64_LIMIT else size,
                len(encoded), len(extra), 0, 0, 0, attr, 0xFFFFFFFF if offset > ZIP64_LIMIT else offset,
            ))  # fmt: skip
            self.file.write(encoded + extra)
        end = self.file.tell()
        count, length = len(self.central), end - start
        if count > 0xFFFF or start > ZIP64_LIMIT or length > ZIP64_LIMIT:
            self.file.write(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, count, count, length, start))
            self.file.write(struct.pack("<IIQI", 0x07064B50, 0, end, 1))
        self.file.write(struct.pack(
            "<IHHHHIIH", 0x06054B50, 0, 0, min(count, 0xFFFF), min(count, 0xFFFF),
            min(length, 0xFFFFFFFF), min(start, 0xFFFFFFFF), 0,
        ))  # fmt: skip
        self.file.close()
        os.replace(self.target + ".part", self.target)
        if self.cache is not None:
            self.cache.prune()

    def abandon(self):
        """Leaves nothing behind: no wheel, no part file."""
        self.pool.shutdown()
        self.file.close()
        os.unlink(self.target + ".part")


def copy_range(src, dst, at, length, name):
    """`length` bytes of `src` from `at` to the end of `dst`: in the kernel where it can
    (copy_file_range, Linux 4.5+, Python 3.8+), else through memory."""
    try:
        while length:
            n = os.copy_file_range(src.fileno(), dst.fileno(), length, at)
            if n == 0:
                raise ValueError(f"{src.name}: {name} ends early")
            length, at = length - n, at + n
        return
    except (AttributeError, OSError):
        dst.seek(0, os.SEEK_END)
    src.seek(at)
    while length:
        data = src.read(min(length, READ))
        if not data:
            raise ValueError(f"{src.name}: {name} ends early")
        dst.write(data)
        length -= len(data)


def encode_name(name):
    try:
        return name.encode("ascii"), 0
    except UnicodeEncodeError:
        return name.encode("utf-8"), 0x800


def record_line(path, sha256_digest, size):
    """A RECORD row (CSV: a path with a comma or quote is quoted)."""
    digest = base64.urlsafe_b64encode(sha256_digest).rstrip(b"=").decode()
    row = io.StringIO()
    csv.writer(row, lineterminator="").writerow([path, f"sha256={digest}", size])
    return row.getvalue()
