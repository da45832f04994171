"""scripts/fetch_archive.py on real hostile tarballs and zips: each refused with the member
named, and nothing written outside `archive/` (an escape would land in the test's directory,
where the walk below finds it)."""

from __future__ import annotations

import hashlib
import io
import os
import stat
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Iterable, Mapping, Tuple

import pytest

from rocm_build.sandbox_scripts import script_bytes

Member = Tuple[str, str, object, int]  # name, kind ("file", "dir", "symlink", "hardlink", "fifo", "chr"), data, mode


def tarball(members: Iterable[Member], mtimes: Mapping[str, int] = {}) -> bytes:
    kinds = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE,
             "fifo": tarfile.FIFOTYPE, "chr": tarfile.CHRTYPE}  # fmt: skip
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, kind, data, mode in members:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = kinds[kind], mode, mtimes.get(name, 0)
            if kind in ("symlink", "hardlink"):
                info.linkname = data
            body = data if kind == "file" else b""
            info.size = len(body)
            tf.addfile(info, io.BytesIO(body))
    return buf.getvalue()


def zipped(members: Iterable[Member]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, kind, data, mode in members:
            info = zipfile.ZipInfo(name)
            info.create_system = 3
            info.external_attr = ((stat.S_IFLNK if kind == "symlink" else stat.S_IFREG) | mode) << 16
            zf.writestr(info, data.encode() if isinstance(data, str) else data)
    return buf.getvalue()


def fetch(tmp_path: Path, archive: bytes, strip_prefix: str = "", sha256: str = "") -> subprocess.CompletedProcess:
    src, work = tmp_path / "src", tmp_path / "work"
    src.mkdir()
    work.mkdir()
    (src / "a.tar.gz").write_bytes(archive)
    for script in ("fetch_archive.py", "mirrors.py"):
        (work / script).write_bytes(script_bytes(script))
    sha256 = sha256 or hashlib.sha256(archive).hexdigest()
    argv = [sys.executable, "fetch_archive.py", sha256, strip_prefix, f"file://{src}/a.tar.gz"]
    env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}  # mirrors.py is imported: no __pycache__
    return subprocess.run(argv, cwd=work, capture_output=True, text=True, env=env)


def written(tmp_path: Path) -> set:
    """Every path under the test's directory but the input, the script and the stand-in for
    /etc, links not followed."""
    found = set()
    for top, dirs, files in os.walk(tmp_path):
        found.update(os.path.relpath(os.path.join(top, e), tmp_path) for e in dirs + files)
    return found - {"src", "src/a.tar.gz", "work", "work/fetch_archive.py", "work/mirrors.py", "outside", "outside/secret"}


def assert_refused(tmp_path: Path, result: subprocess.CompletedProcess, message: str) -> None:
    assert (result.returncode, result.stderr) == (22, message + "\n")
    outside = {p for p in written(tmp_path) if p != "work/download.part" and not p.startswith("work/archive")}
    assert outside == set()


def test_a_good_archive_with_links_inside_it_unpacks(tmp_path: Path) -> None:
    result = fetch(tmp_path, tarball([
        ("top/bin", "dir", None, 0o2755),  # setgid directory: how it was packed, never applied
        ("top/bin/clang", "file", b"#!/bin/sh\n", 0o755),
        ("top/bin/clang++", "symlink", "clang", 0o777),
        ("top/lib/libc.so", "symlink", "../bin/clang", 0o777),
        ("top/bin/clang-copy", "hardlink", "top/bin/clang", 0o755),
        ("elsewhere/ignored.txt", "file", b"x", 0o644),
    ], mtimes={"top/bin/clang": 1760000000, "top/lib/libc.so": 1760000500, "elsewhere/ignored.txt": 1790000000}),
        strip_prefix="top")  # fmt: skip
    assert (result.returncode, result.stderr) == (0, "")
    out = tmp_path / "work/archive"
    assert written(tmp_path) == {
        "work/archive", "work/newest_mtime",
        *(f"work/archive/{p}" for p in ("bin", "lib", "bin/clang", "bin/clang++", "lib/libc.so", "bin/clang-copy")),
    }  # fmt: skip
    # The archive's date: its newest member below strip_prefix (a build's SOURCE_DATE_EPOCH).
    assert (tmp_path / "work/newest_mtime").read_text() == "1760000500\n"
    assert os.readlink(out / "lib/libc.so") == "../bin/clang"
    assert (out / "bin/clang-copy").read_bytes() == b"#!/bin/sh\n" and os.access(out / "bin/clang-copy", os.X_OK)


def test_a_wrong_sha256_unpacks_nothing(tmp_path: Path) -> None:
    archive = tarball([("top/f", "file", b"x", 0o644)])
    result = fetch(tmp_path, archive, sha256="0" * 64)
    assert result.returncode == 20
    assert result.stderr == f"got sha256:{hashlib.sha256(archive).hexdigest()} from file://{tmp_path}/src/a.tar.gz\n"
    assert written(tmp_path) == set()


@pytest.mark.parametrize(
    "members, message",
    [
        pytest.param([("OUTSIDE/abs.txt", "file", b"x", 0o644)], "refused member 'OUTSIDE/abs.txt': it has an absolute path", id="absolute"),
        pytest.param([("../escaped.txt", "file", b"x", 0o644)], "refused member '../escaped.txt': it has a `..` component, which leads outside the unpacked tree", id="dotdot"),
        pytest.param([("a/../../escaped.txt", "file", b"x", 0o644)], "refused member 'a/../../escaped.txt': it has a `..` component, which leads outside the unpacked tree", id="inner-dotdot"),
        pytest.param(
            [("a", "symlink", "OUTSIDE", 0o777), ("a/passwd", "file", b"x", 0o644)],
            "refused member 'a': it is a symbolic link to the absolute path 'OUTSIDE'", id="absolute-symlink-dir",
        ),
        pytest.param(
            [("d/up", "symlink", "../../..", 0o777), ("d/up/escaped.txt", "file", b"x", 0o644)],
            "refused member 'd/up': its link target '../../..' resolves outside the unpacked tree", id="relative-symlink-out",
        ),
        pytest.param(
            # Inside when unpacked (x does not exist yet), outside once `x -> .` and `y/` exist.
            [("l", "symlink", "x/y/../..", 0o777), ("x", "symlink", ".", 0o777), ("y", "dir", None, 0o755),
             ("l/escaped.txt", "file", b"x", 0o644)],
            "refused member 'l/escaped.txt': its directory resolves outside the unpacked tree", id="link-whose-meaning-changed",
        ),
        pytest.param(
            [("l", "symlink", "x/y/../..", 0o777), ("x", "symlink", ".", 0o777), ("y", "dir", None, 0o755)],
            "refused member 'l': its link target 'x/y/../..' resolves outside the unpacked tree", id="link-left-pointing-out",
        ),
        pytest.param([("h", "hardlink", "OUTSIDE/secret", 0o644)], "refused member 'h': it is a hard link to 'OUTSIDE/secret', outside the unpacked tree", id="hardlink-absolute"),
        pytest.param([("h", "hardlink", "../secret", 0o644)], "refused member 'h': it is a hard link to '../secret', outside the unpacked tree", id="hardlink-dotdot"),
        pytest.param([("dev/null", "chr", None, 0o666)], "refused member 'dev/null': it is a device file or a FIFO", id="device"),
        pytest.param([("pipe", "fifo", None, 0o644)], "refused member 'pipe': it is a device file or a FIFO", id="fifo"),
        pytest.param([("bin/su", "file", b"x", 0o4755)], "refused member 'bin/su': it has the setuid or setgid bit set", id="setuid"),
        pytest.param([("bin/sg", "file", b"x", 0o2755)], "refused member 'bin/sg': it has the setuid or setgid bit set", id="setgid"),
    ],
)
def test_hostile_tarballs_are_refused_with_the_member_named(tmp_path: Path, members, message) -> None:
    outside = str(tmp_path / "outside")  # stands in for /etc: an escape would land where we look
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside/secret").write_text("s")
    fix = lambda v: v.replace("OUTSIDE", outside) if isinstance(v, str) else v  # noqa: E731
    result = fetch(tmp_path, tarball([(fix(n), k, fix(d), m) for n, k, d, m in members]))
    assert_refused(tmp_path, result, fix(message))
    assert sorted(os.listdir(tmp_path / "outside")) == ["secret"]


def test_hostile_members_outside_strip_prefix_are_refused_too(tmp_path: Path) -> None:
    result = fetch(tmp_path, tarball([("top/f", "file", b"x", 0o644), ("other/../../x", "file", b"x", 0o644)]), "top")
    assert_refused(tmp_path, result, "refused member 'other/../../x': it has a `..` component, which leads outside the unpacked tree")


@pytest.mark.parametrize(
    "members, message",
    [
        pytest.param([("l", "symlink", "../../escaped", 0o777)], "refused member 'l': its link target '../../escaped' resolves outside the unpacked tree", id="zip-symlink"),
        pytest.param([("../z.txt", "file", b"x", 0o644)], "refused member '../z.txt': it has a `..` component, which leads outside the unpacked tree", id="zip-dotdot"),
        pytest.param([("bin/su", "file", b"x", 0o4755)], "refused member 'bin/su': it has the setuid or setgid bit set", id="zip-setuid"),
    ],
)
def test_hostile_zips_are_refused_with_the_member_named(tmp_path: Path, members, message) -> None:
    assert_refused(tmp_path, fetch(tmp_path, zipped(members)), message)
