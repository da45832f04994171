"""scripts/simple_index.py fetch on real wheels from an index on 127.0.0.1: a wheel with the
pinned sha256 is still refused, naming the member, unless its names are safe and every
member matches its own RECORD; a refused wheel leaves nothing behind."""

from __future__ import annotations

import base64
import functools
import hashlib
import os
import stat
import subprocess
import sys
import threading
import zipfile
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Tuple

import pytest

from rocm_build.sandbox_scripts import script_bytes

# The duplicate-member cases are made on purpose.
pytestmark = pytest.mark.filterwarnings("ignore:Duplicate name")

FILE = "mini_torch-1.0-py3-none-any.whl"
RECORD = "mini_torch-1.0.dist-info/RECORD"
FILES = {
    "mini_torch/__init__.py": b"VERSION = '1.0'\n",
    "mini_torch-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: mini-torch\nVersion: 1.0\n",
    "mini_torch-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}


def b64(digest: bytes) -> str:
    """As RECORD writes a hash: urlsafe base64 without padding."""
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def record_line(name: str, data: bytes) -> str:
    return f"{name},sha256={b64(hashlib.sha256(data).digest())},{len(data)}"


Entry = Tuple[str, bytes, int]  # name, bytes, unix mode (with its file type)


def wheel(path: Path, entries: List[Entry], record: str) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data, mode in [*entries, (RECORD, record.encode(), 0o100644)]:
            info = zipfile.ZipInfo(name)
            info.create_system, info.external_attr = 3, mode << 16
            zf.writestr(info, data)


def sound(extra: Dict[str, bytes] = {}) -> Tuple[List[Entry], List[str]]:  # noqa: B006 - read only
    files = {**FILES, **extra}
    return [(n, d, 0o100644) for n, d in files.items()], [record_line(n, d) for n, d in files.items()]


@pytest.fixture
def index(tmp_path: Path) -> Iterator[Tuple[str, Callable[[List[Entry], List[str]], str]]]:
    """An index URL, and a function that puts a wheel on it and returns its sha256."""
    (tmp_path / "serve/simple/mini-torch").mkdir(parents=True)
    (tmp_path / "serve/simple/mini-torch/index.html").write_text(f'<a href="../../files/{FILE}">{FILE}</a>\n')
    (tmp_path / "serve/files").mkdir()

    def publish(entries: List[Entry], record: List[str]) -> str:
        wheel(tmp_path / "serve/files" / FILE, entries, "\n".join([*record, f"{RECORD},,", ""]))
        return hashlib.sha256((tmp_path / "serve/files" / FILE).read_bytes()).hexdigest()

    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(tmp_path / "serve"))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/simple/", publish
    httpd.shutdown()


def fetch(tmp_path: Path, index_url: str, sha256: str) -> subprocess.CompletedProcess:
    work = tmp_path / "work"
    work.mkdir()
    (work / "simple_index.py").write_bytes(script_bytes("simple_index.py"))
    argv = [sys.executable, "simple_index.py", "fetch", index_url, "mini-torch", FILE, sha256]
    return subprocess.run(argv, cwd=work, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})


def test_a_sound_wheel_is_kept_and_its_signature_need_not_be_listed(tmp_path, index) -> None:
    url, publish = index
    entries, record = sound()
    sha = publish([*entries, ("mini_torch-1.0.dist-info/RECORD.jws", b"{}", 0o100644)], record)
    result = fetch(tmp_path, url, sha)
    assert (result.returncode, result.stderr) == (0, "")
    assert hashlib.sha256((tmp_path / "work/wheel" / FILE).read_bytes()).hexdigest() == sha
    assert sorted(p.name for p in (tmp_path / "work/wheel").iterdir()) == [FILE]


EVIL = b"import os; os.system('touch /tmp/pwned')\n"
MD5 = b64(hashlib.md5(FILES["mini_torch/__init__.py"]).digest())
SHA = b64(hashlib.sha256(FILES["mini_torch/__init__.py"]).digest())


def test_a_record_in_hex_is_accepted(tmp_path, index) -> None:
    # PEP 376 says urlsafe base64, but wheels on PyPI (gmsh 4.15.2) write hex digests.
    url, publish = index
    entries, _ = sound()
    sha = publish(entries, [f"{n},sha256={hashlib.sha256(d).hexdigest()},{len(d)}" for n, d, _ in entries])
    assert fetch(tmp_path, url, sha).returncode == 0


def tampered() -> Tuple[List[Entry], List[str]]:
    entries, record = sound()
    return [(n, EVIL if n == "mini_torch/__init__.py" else d, m) for n, d, m in entries], record


def size_lie() -> Tuple[List[Entry], List[str]]:
    entries, record = sound()
    return entries, [line.replace(",16", ",17") if line.startswith("mini_torch/__init__.py") else line for line in record]


def md5_record() -> Tuple[List[Entry], List[str]]:
    entries, record = sound()
    return entries, [f"mini_torch/__init__.py,md5={MD5},16" if line.startswith("mini_torch/") else line for line in record]


def with_entry(name: str, data: bytes, mode: int, listed: bool = True) -> Tuple[List[Entry], List[str]]:
    entries, record = sound()
    return [*entries, (name, data, mode)], [*record, *([record_line(name, data)] if listed else [])]


@pytest.mark.parametrize(
    "make, problem",
    [
        pytest.param(tampered, f"member 'mini_torch/__init__.py' has sha256={b64(hashlib.sha256(EVIL).digest())}, but {RECORD} says sha256={SHA}", id="tampered-member"),
        pytest.param(size_lie, f"member 'mini_torch/__init__.py' is 16 bytes, but {RECORD} says 17", id="size"),
        pytest.param(md5_record, f"member 'mini_torch/__init__.py' has no sha256 (or stronger) hash in {RECORD} (it says 'md5={MD5}')", id="weak-hash"),
        pytest.param(lambda: with_entry("mini_torch/evil.py", b"x", 0o100644, listed=False), f"member 'mini_torch/evil.py' is not listed in {RECORD}", id="missing-record-line"),
        pytest.param(lambda: (sound()[0], [*sound()[1], record_line("mini_torch/gone.py", b"")]), f"{RECORD} lists 'mini_torch/gone.py', which is not in the wheel", id="record-lists-absent-file"),
        pytest.param(lambda: (sound()[0], []), f"member 'mini_torch/__init__.py' is not listed in {RECORD}", id="empty-record"),
        pytest.param(lambda: with_entry("../evil.py", b"x", 0o100644), "member '../evil.py' has a `..` component, which leads outside the install directory", id="dotdot"),
        pytest.param(lambda: with_entry("mini_torch/../../evil.py", b"x", 0o100644), "member 'mini_torch/../../evil.py' has a `..` component, which leads outside the install directory", id="inner-dotdot"),
        pytest.param(lambda: with_entry("/tmp/evil.py", b"x", 0o100644), "member '/tmp/evil.py' has an absolute path", id="absolute"),
        pytest.param(lambda: with_entry("C:/evil.py", b"x", 0o100644), "member 'C:/evil.py' has an absolute path", id="drive-letter"),
        pytest.param(lambda: with_entry("mini_torch\\..\\..\\evil.py", b"x", 0o100644), "member 'mini_torch\\\\..\\\\..\\\\evil.py' has a backslash in its name (a path separator on Windows)", id="backslash"),
        pytest.param(lambda: with_entry("mini_torch/etc", b"/etc", stat.S_IFLNK | 0o777), "member 'mini_torch/etc' is a symbolic link", id="symlink"),
        pytest.param(lambda: with_entry("mini_torch/fifo", b"", stat.S_IFIFO | 0o644), "member 'mini_torch/fifo' is a device file, FIFO or socket", id="fifo"),
        pytest.param(lambda: with_entry("mini_torch/su", b"x", 0o104755), "member 'mini_torch/su' has the setuid or setgid bit set", id="setuid"),
        pytest.param(lambda: with_entry("mini_torch/__init__.py", b"x", 0o100644), "member 'mini_torch/__init__.py' is in the wheel twice", id="duplicate"),
        pytest.param(lambda: ([*sound()[0], (RECORD, b"", 0o100644)], sound()[1]), f"member {RECORD!r} is in the wheel twice", id="second-record"),
    ],
)
def test_a_wheel_with_the_pinned_sha256_is_still_refused_naming_the_member(tmp_path, index, make, problem) -> None:
    url, publish = index
    sha = publish(*make())
    result = fetch(tmp_path, url, sha)
    assert (result.returncode, result.stderr) == (24, f"refused {FILE}: {problem}\n")
    assert list((tmp_path / "work/wheel").iterdir()) == []  # nothing for the rule to capture


def test_a_wheel_without_record_or_not_a_zip_is_refused(tmp_path, index) -> None:
    url, _ = index
    served = tmp_path / "serve/files" / FILE
    with zipfile.ZipFile(served, "w") as zf:
        for name, data in FILES.items():
            zf.writestr(name, data)
    result = fetch(tmp_path, url, hashlib.sha256(served.read_bytes()).hexdigest())
    assert (result.returncode, result.stderr) == (24, f"refused {FILE}: has no *.dist-info/RECORD at its top; a wheel has exactly one\n")
    served.write_bytes(b"not a zip")
    (tmp_path / "work/simple_index.py").unlink()
    (tmp_path / "work").rename(tmp_path / "first")
    result = fetch(tmp_path, url, hashlib.sha256(b"not a zip").hexdigest())
    assert (result.returncode, result.stderr) == (24, f"refused {FILE}: is not a readable wheel: File is not a zip file\n")


def test_a_link_to_a_local_file_or_a_pinned_name_with_a_path_is_refused(tmp_path, index) -> None:
    # An https or http index may not hand us a host file (file://) as the wheel; a file name
    # from the pins may not lead out of the download directory.
    url, publish = index
    sha = publish(*sound())
    page = tmp_path / "serve/simple/mini-torch/index.html"
    page.write_text(f'<a href="file://{tmp_path}/serve/files/{FILE}">{FILE}</a>\n')
    result = fetch(tmp_path, url, sha)
    assert (result.returncode, result.stderr) == (
        24, f"refused {FILE}: the index links it to 'file://{tmp_path}/serve/files/{FILE}'; an http index may link only to http or https URLs\n",
    )  # fmt: skip
    (tmp_path / "work").rename(tmp_path / "first")
    work = tmp_path / "work"
    work.mkdir()
    (work / "simple_index.py").write_bytes(script_bytes("simple_index.py"))
    argv = [sys.executable, "simple_index.py", "fetch", url, "mini-torch", f"../../{FILE}", sha]
    result = subprocess.run(argv, cwd=work, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert (result.returncode, result.stderr) == (
        24, f"refused ../../{FILE}: not a wheel's file name (no `/`, `\\` or leading `.`, ends in .whl)\n",
    )  # fmt: skip
    assert sorted(os.listdir(tmp_path)) == ["first", "serve", "work"] and os.listdir(work) == ["simple_index.py"]
