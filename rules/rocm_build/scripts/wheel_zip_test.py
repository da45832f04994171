"""wheel_zip.py: the same members give the same bytes with or without the chunk cache, any
number of threads, damaged cache files and zip64; an edited library reuses its other chunks."""

from __future__ import annotations

import hashlib
import os
import random
import zipfile
from pathlib import Path

import pytest

from rocm_build.scripts import wheel_zip as wz


def library(seed: int, size: int) -> bytes:
    return random.Random(seed).randbytes(size)  # incompressible, as GPU code


def write(target: Path, members: dict, cache=None, jobs=2) -> bytes:
    out = wz.WheelZip(str(target), str(cache) if cache else None, jobs)
    lines = [out.add_bytes(name, 0o755 if name.endswith(".so") else 0o644, data) for name, data in members.items()]
    out.finish()
    assert not Path(f"{target}.part").exists()
    return target.read_bytes(), lines


def cache_files(cache: Path) -> set:
    return {p.name for p in cache.rglob("*") if p.is_file()}


def test_same_bytes_with_or_without_the_cache_and_any_threads(tmp_path: Path) -> None:
    members = {"pkg/_C.so": library(1, 9 << 20), "pkg/__init__.py": b"x = 1\n" * 100, "pkg/empty": b""}
    plain, lines = write(tmp_path / "a.whl", members, jobs=1)
    assert write(tmp_path / "b.whl", members, cache=tmp_path / "cache", jobs=3)[0] == plain
    assert write(tmp_path / "c.whl", members, cache=tmp_path / "cache", jobs=2)[0] == plain  # from the cache
    with zipfile.ZipFile(tmp_path / "c.whl") as archive:
        assert archive.testzip() is None
        assert {i.filename: archive.read(i) for i in archive.infolist()} == members
        assert [(i.date_time, i.external_attr >> 16) for i in archive.infolist()] == [
            ((1980, 1, 1, 0, 0, 0), 0o100755), ((1980, 1, 1, 0, 0, 0), 0o100644), ((1980, 1, 1, 0, 0, 0), 0o100644)]  # fmt: skip
    digest = wz.base64.urlsafe_b64encode(hashlib.sha256(members["pkg/_C.so"]).digest()).rstrip(b"=").decode()
    assert lines[0] == f"pkg/_C.so,sha256={digest},{9 << 20}"


def test_an_edited_library_deflates_only_the_chunks_around_the_edit(tmp_path: Path) -> None:
    old = library(2, 24 << 20)
    cache = tmp_path / "cache"
    write(tmp_path / "old.whl", {"_C.so": old}, cache=cache)
    before = cache_files(cache)
    # A relink after a one-file edit: a few bytes more in the middle, everything after moves.
    new = old[: 10 << 20] + b"\x90" * 13 + old[10 << 20 :]
    fresh, _ = write(tmp_path / "fresh.whl", {"_C.so": new})
    assert write(tmp_path / "new.whl", {"_C.so": new}, cache=cache)[0] == fresh
    added = cache_files(cache) - before
    assert 1 <= len(added) <= 2, f"{len(added)} chunks deflated again of {len(before)}"


def test_a_damaged_cache_file_is_deflated_again(tmp_path: Path) -> None:
    members = {"_C.so": library(3, 3 << 20)}
    cache = tmp_path / "cache"
    plain, _ = write(tmp_path / "a.whl", members, cache=cache)
    for path in [p for p in cache.rglob("*") if p.is_file()][:2]:
        path.write_bytes(path.read_bytes()[:-9] + b"damaged!!")
    assert write(tmp_path / "b.whl", members, cache=cache)[0] == plain


def test_zip64_where_sizes_need_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wz, "ZIP64_LIMIT", 1000)  # instead of writing 2 GiB
    members = {"big.so": library(4, 5000), "small.py": b"x = 1\n", **{f"m{i}": b"%d" % i for i in range(3)}}
    write(tmp_path / "a.whl", members)
    with zipfile.ZipFile(tmp_path / "a.whl") as archive:
        assert archive.testzip() is None
        assert {i.filename: archive.read(i) for i in archive.infolist()} == members


@pytest.mark.parametrize("kernel_copy", [True, False])
def test_members_copied_as_stored_give_the_same_wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel_copy: bool) -> None:
    members = {"pkg/_C.so": library(5, 2 << 20), "pkg/a.py": b"a = 1\n"}
    plain, _ = write(tmp_path / "a.whl", members)
    if not kernel_copy:  # a kernel or Python without copy_file_range
        monkeypatch.delattr(os, "copy_file_range")
    raw = wz.raw_entries(str(tmp_path / "a.whl"))
    out = wz.WheelZip(str(tmp_path / "b.whl"))
    for name in members:
        out.add_raw(name, raw[name].info.external_attr >> 16, raw[name])
    out.finish()
    assert (tmp_path / "b.whl").read_bytes() == plain


def test_an_abandoned_wheel_leaves_nothing(tmp_path: Path) -> None:
    out = wz.WheelZip(str(tmp_path / "a.whl"))
    out.add_bytes("a", 0o644, b"a")
    out.abandon()
    assert os.listdir(tmp_path) == []


def test_the_chunk_cache_keeps_about_twice_what_the_last_wheel_used(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    for seed in range(4):  # four different libraries, one after the other
        write(tmp_path / "a.whl", {"_C.so": library(10 + seed, 4 << 20)}, cache=cache)
    kept = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())
    assert 4 << 20 < kept <= 2 * (4 << 20) + (1 << 20)
