"""`[rocm-build] mirrors` in the fetch scripts: a package index served from a mirror, with real
HTTP on 127.0.0.1 and the scripts as the sandboxes run them."""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import json
import subprocess
import sys
import threading
import zipfile
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from rocm_build.sandbox_scripts import script_bytes

WHEEL = "demo-1.0-py3-none-any.whl"


def wheel() -> bytes:
    files = {"demo/__init__.py": b"", "demo-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n",
             "demo-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}  # fmt: skip
    record = "".join(
        f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}\n"
        for p, d in files.items()
    ) + "demo-1.0.dist-info/RECORD,,\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for path, data in {**files, "demo-1.0.dist-info/RECORD": record.encode()}.items():
            zf.writestr(path, data)
    return buf.getvalue()


@pytest.fixture
def mirror(tmp_path: Path):
    served = tmp_path / "served"
    (served / "simple/demo").mkdir(parents=True)
    data = wheel()
    (served / "simple/demo" / WHEEL).write_bytes(data)
    (served / "simple/demo/index.html").write_text(f'<a href="{WHEEL}">{WHEEL}</a>')
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(served))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/simple/", hashlib.sha256(data).hexdigest()
    httpd.shutdown()


def sandbox(tmp_path: Path, table: dict) -> Path:
    box = tmp_path / "box"
    (box / ".mirrors").mkdir(parents=True)
    (box / ".mirrors/mirrors.json").write_text(json.dumps(table))
    for name in ("simple_index.py", "mirrors.py"):
        (box / name).write_bytes(script_bytes(name))
    return box


def test_a_prebuilt_wheel_is_fetched_from_the_mirror_of_its_index(tmp_path, mirror) -> None:
    url, sha256 = mirror
    box = sandbox(tmp_path, {"https://index.example.invalid/simple/": url})
    args = [sys.executable, "simple_index.py", "fetch", "https://index.example.invalid/simple/", "demo", WHEEL]
    fetched = subprocess.run([*args, sha256], cwd=box, capture_output=True, text=True)
    assert fetched.returncode == 0, fetched.stderr
    assert hashlib.sha256((box / "wheel" / WHEEL).read_bytes()).hexdigest() == sha256
    # The pin's sha256 still decides: the mirror's file under another digest is refused.
    (box / "wheel" / WHEEL).unlink()
    wrong = subprocess.run([*args, "0" * 64], cwd=box, capture_output=True, text=True)
    assert wrong.returncode == 20 and f"got sha256:{sha256}" in wrong.stderr
