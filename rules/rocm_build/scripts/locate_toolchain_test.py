"""The therock provider's install under concurrency and interruption.

TheRock's SDK cannot exist here, so a test double stands in for it: a `rocm` wheel whose
`rocm_sdk` module answers `path --root` with a directory holding a fake clang, and whose
`device-gfx1151` extra pulls a `rocm-sdk-device-gfx1151` wheel, as TheRock's multi-arch
SDK does. Both are served from a PEP 503 index on 127.0.0.1; the install script is the real one.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import signal
import subprocess
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from rocm_build.sandbox_scripts import script_bytes

WHEEL_NAME = "rocm-7.99.0-py3-none-any.whl"
FAKE_SDK = {
    "rocm_sdk/__init__.py": b"",
    "rocm_sdk/__main__.py": b"import os, sys\nassert sys.argv[1:] == ['path', '--root']\n"
    b"print(os.path.join(os.path.dirname(__file__), '_root'))\n",
    "rocm_sdk/_root/.info/version": b"7.99.0\n",
    "rocm_sdk/_root/lib/llvm/bin/clang": b"#!/bin/sh\necho 'clang version 19.0.0 (TheRock test double)'\n",
}


DEVICE_WHEEL_NAME = "rocm_sdk_device_gfx1151-7.99.0-py3-none-any.whl"


def fake_wheel(dist: str, files: dict, metadata: bytes) -> bytes:
    info_dir = f"{dist}-7.99.0.dist-info"
    files = {
        **files,
        f"{info_dir}/METADATA": b"Metadata-Version: 2.1\n" + metadata,
        f"{info_dir}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(
        f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}\n"
        for p, d in files.items()
    ) + f"{info_dir}/RECORD,,\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for path, data in {**files, f"{info_dir}/RECORD": record.encode()}.items():
            info = zipfile.ZipInfo(path)
            info.external_attr = (0o100755 if path.endswith("/clang") else 0o100644) << 16
            zf.writestr(info, data)
    return buf.getvalue()


def fake_rocm_wheel() -> bytes:
    return fake_wheel(
        "rocm",
        FAKE_SDK,
        b"Name: rocm\nVersion: 7.99.0\nProvides-Extra: libraries\nProvides-Extra: devel\n"
        b"Provides-Extra: device-gfx1151\nRequires-Dist: rocm-sdk-device-gfx1151==7.99.0; extra == \"device-gfx1151\"\n",
    )


def fake_device_wheel() -> bytes:
    return fake_wheel(
        "rocm_sdk_device_gfx1151",
        {"_rocm_sdk_device_gfx1151/gfx1151.kpack": b"device code"},
        b"Name: rocm-sdk-device-gfx1151\nVersion: 7.99.0\n",
    )


class Index:
    """A PEP 503 index with one project; `delay` slows the wheel download down."""

    def __init__(self) -> None:
        self.wheel = fake_rocm_wheel()
        self.device_wheel = fake_device_wheel()
        self.downloads = 0
        self.delay = 0.0
        index = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path.rstrip("/") == "/simple/rocm":
                    sha = hashlib.sha256(index.wheel).hexdigest()
                    body = f'<html><body><a href="/files/{WHEEL_NAME}#sha256={sha}">{WHEEL_NAME}</a></body></html>'.encode()
                    kind = "text/html"
                elif self.path.rstrip("/") == "/simple/rocm-sdk-device-gfx1151":
                    sha = hashlib.sha256(index.device_wheel).hexdigest()
                    body = f'<html><body><a href="/files/{DEVICE_WHEEL_NAME}#sha256={sha}">{DEVICE_WHEEL_NAME}</a></body></html>'.encode()
                    kind = "text/html"
                elif self.path == f"/files/{DEVICE_WHEEL_NAME}":
                    body, kind = index.device_wheel, "application/octet-stream"
                elif self.path == f"/files/{WHEEL_NAME}":
                    index.downloads += 1
                    time.sleep(index.delay)
                    body, kind = index.wheel, "application/octet-stream"
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/simple/"


@pytest.fixture
def index():
    served = Index()
    yield served
    served.httpd.shutdown()


def start_locate(workdir: Path, index: Index, targets: str = "gfx1151") -> subprocess.Popen:
    script = workdir / "locate_toolchain.sh"
    script.write_bytes(script_bytes("locate_toolchain.sh"))
    return subprocess.Popen(
        ["bash", str(script), "therock", "", "7.99.0", index.url, targets, "/usr/bin/python3"],
        cwd=workdir,
        env={"PATH": "/usr/bin:/bin", "PIP_CONFIG_FILE": "/dev/null", "PIP_NO_CACHE_DIR": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def sandbox(tmp_path: Path, name: str, cache: Path) -> Path:
    """A directory whose `.rocm` links to the shared named cache, as Pants sets it up."""
    box = tmp_path / name
    box.mkdir()
    (box / ".rocm").symlink_to(cache)
    return box


def test_two_concurrent_installs_share_one_complete_install(tmp_path, index) -> None:
    cache = tmp_path / "named_cache"
    cache.mkdir()
    index.delay = 1.0  # both runs are inside the install at once without the lock
    runs = [start_locate(sandbox(tmp_path, f"run{i}", cache), index) for i in range(2)]
    outputs = [run.communicate(timeout=300) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    roots = {out.splitlines()[0] for out, _ in outputs}
    assert roots == {str(cache / "therock-venv" / "lib/python3.11/site-packages/rocm_sdk/_root")}
    # The system cmake is part of the toolchain too (seed 000: never pip's).
    cmake = subprocess.run(["/usr/bin/cmake", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    assert outputs[0][0].splitlines()[1:] == ["rocm 7.99.0", "clang version 19.0.0 (TheRock test double)", cmake]
    assert index.downloads == 1  # the second run waited and found the first one's install
    assert sorted(p.name for p in cache.iterdir()) == ["install.lock", "therock-venv"]
    # The target's device code came with the SDK, through the `device-gfx1151` extra.
    site = cache / "therock-venv/lib/python3.11/site-packages"
    assert (site / "_rocm_sdk_device_gfx1151/gfx1151.kpack").read_bytes() == b"device code"


def test_an_sdk_without_device_code_for_a_target_is_refused(tmp_path, index) -> None:
    cache = tmp_path / "named_cache"
    cache.mkdir()
    run = start_locate(sandbox(tmp_path, "run", cache), index, targets="gfx1151,gfx1100")
    out, err = run.communicate(timeout=300)
    assert run.returncode == 3
    assert "installing rocm[libraries,devel,device-gfx1151,device-gfx1100]==7.99.0" in err
    assert (
        "rocm-sdk-device-gfx1100==7.99.0 is not installed (found: none); the SDK at 7.99.0 has no device code for gfx1100"
        in err
    )
    assert not (cache / "therock-venv").exists()  # nothing half-right kept in place


def test_an_install_killed_midway_is_redone(tmp_path, index) -> None:
    cache = tmp_path / "named_cache"
    cache.mkdir()
    index.delay = 30.0
    run = start_locate(sandbox(tmp_path, "killed", cache), index)
    deadline = time.time() + 120
    while index.downloads == 0 and time.time() < deadline:
        time.sleep(0.2)
    assert index.downloads == 1, "the install never reached the download"
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    assert not (cache / "therock-venv").exists()  # nothing half-installed in place
    # Only the temporary dir, and pip's scratch beside it, not in /tmp (the env has no TMPDIR).
    assert sorted(p.name for p in cache.glob("therock-venv.tmp.*")) == [f"therock-venv.tmp.{run.pid}", f"therock-venv.tmp.{run.pid}.pip"]
    assert [p.name for p in (cache / f"therock-venv.tmp.{run.pid}.pip").iterdir() if p.name.startswith("pip-")]

    index.delay = 0.0
    again = start_locate(sandbox(tmp_path, "again", cache), index)
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err
    assert out.splitlines()[1] == "rocm 7.99.0"
    assert sorted(p.name for p in cache.iterdir()) == ["install.lock", "therock-venv"]
