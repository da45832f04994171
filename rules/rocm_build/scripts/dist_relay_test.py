"""dist_relay.py and dist_proxy.py as the builds run them, on real sockets: a scheduler and a
build server on 127.0.0.1 stand in for a farm (tests/e2e/sccache_dist_test.py has the real one)."""

from __future__ import annotations

import json
import re
import socket
import stat
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator, Tuple

import pytest

from rocm_build.sandbox_scripts import script_bytes
from rocm_build.scripts import dist_relay

TOKEN = "client-t0ken"


def echo_server() -> Tuple[socket.socket, int]:
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            conn, _ = listener.accept()
            conn.sendall(conn.recv(100))
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return listener, listener.getsockname()[1]


def scheduler(vouched: str) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/api/v1/scheduler/status" and self.headers["Authorization"] == f"Bearer {TOKEN}":
                body, code = json.dumps({"num_servers": 1, "num_cpus": 2, "in_progress": 0}).encode(), 200
            elif self.path == f"/api/v1/scheduler/server_certificate/{vouched}":
                body, code = b"certificate", 200
            else:
                body, code = b"no", 404
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def farm(tmp_path: Path) -> Iterator[dict]:
    for name in ("dist_relay.py", "dist_proxy.py", "ccache_remote.py"):
        (tmp_path / name).write_bytes(script_bytes(name))
    server, server_port = echo_server()
    sched = scheduler(f"127.0.0.1:{server_port}")
    url = f"http://127.0.0.1:{sched.server_address[1]}"
    dist_relay.store(str(tmp_path / "conf"), url, TOKEN)
    build = subprocess.Popen(["sleep", "600"])  # the build whose end stops the relays
    run = lambda *args: subprocess.run([sys.executable, *args], cwd=tmp_path, capture_output=True, text=True, check=True)  # noqa: E731
    run("dist_relay.py", "forward", "conf", "sock", str(build.pid))
    yield {"dir": tmp_path, "url": url, "server": f"127.0.0.1:{server_port}", "run": run, "build": build}
    build.kill()
    sched.shutdown()
    server.close()


def read_response(conn: socket.socket) -> bytes:
    """One whole response: a single recv may return the head before the body (seen in CI)."""
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = conn.recv(4096)
        if not chunk:
            return answer
        answer += chunk
    head = answer.split(b"\r\n\r\n", 1)[0]
    length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    if length is None:  # a tunnel's "200 Connection established", or a response ended by close
        return answer if b" 200 Connection established" in head else answer + read_to_close(conn)
    while len(answer) < len(head) + 4 + int(length.group(1)):
        chunk = conn.recv(4096)
        if not chunk:
            break
        answer += chunk
    return answer


def read_to_close(conn: socket.socket) -> bytes:
    rest = b""
    while chunk := conn.recv(4096):
        rest += chunk
    return rest


def through_relay(tmp_path: Path, request: bytes, then: bytes = b"") -> bytes:
    with socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(10)
        conn.connect(str(tmp_path / "sock" / "proxy.sock"))
        conn.sendall(request)
        answer = read_response(conn)
        if then:
            conn.sendall(then)
            answer += b"|" + conn.recv(100)
        return answer


def test_the_relay_passes_only_the_scheduler_and_the_servers_it_named(farm) -> None:
    tmp, server = farm["dir"], farm["server"]
    connect = f"CONNECT {server} HTTP/1.1\r\nHost: {server}\r\n\r\n".encode()
    assert through_relay(tmp, connect).startswith(b"HTTP/1.1 403 Forbidden")
    assert b"not a build server the scheduler named" in through_relay(tmp, connect)
    elsewhere = b"GET http://127.0.0.1:9/ HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n"
    assert b"only the scheduler" in through_relay(tmp, elsewhere)
    # A certificate the scheduler does not serve vouches for nothing.
    bogus = f"GET {farm['url']}/api/v1/scheduler/server_certificate/127.0.0.1:1 HTTP/1.1\r\n\r\n".encode()
    assert b" 404 " in through_relay(tmp, bogus)
    assert through_relay(tmp, b"CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 403")
    # Once the scheduler has served the server's certificate, the tunnel opens.
    certificate = f"GET {farm['url']}/api/v1/scheduler/server_certificate/{server} HTTP/1.1\r\nConnection: keep-alive\r\n\r\n"
    assert through_relay(tmp, certificate.encode()).endswith(b"certificate")
    assert through_relay(tmp, connect, then=b"job") == b"HTTP/1.1 200 Connection established\r\n\r\n|job"


def test_inside_the_build_a_proxy_and_a_client_configuration(farm) -> None:
    tmp = farm["dir"]
    (tmp / "toolchain.json").write_text(json.dumps({"archive": "toolchain.tar.gz", "compilers": {"/mnt/rocm-build/.rocm/root/bin/clang": "/toolchain/bin/clang"}}))
    settings = dict(
        line.split("=", 1)
        for line in farm["run"]("dist_proxy.py", "proxy", "sock", str(farm["build"].pid), "client.toml", "toolchain.json").stdout.splitlines()
    )
    assert settings["HTTP_PROXY"] == settings["HTTPS_PROXY"] and settings["NO_PROXY"] == ""
    config = Path(settings["SCCACHE_CONF"])
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert config.read_text() == (
        f'[dist]\nscheduler_url = "{farm["url"]}"\nrewrite_includes_only = true\n\n[dist.auth]\ntype = "token"\ntoken = "{TOKEN}"\n\n'
        '[[dist.toolchains]]\ntype = "path_override"\ncompiler_executable = "/mnt/rocm-build/.rocm/root/bin/clang"\n'
        f'archive = "{tmp}/toolchain.tar.gz"\narchive_compiler_executable = "/toolchain/bin/clang"\n'
    )
    port = settings["HTTP_PROXY"].rsplit(":", 1)[1]
    status = farm["run"]("dist_proxy.py", "status", "sock", port).stdout.strip()
    assert status == f"scheduler {farm['url']}, 1 build server(s), 2 cpu(s)"


def test_settings_are_checked_and_kept_private(tmp_path: Path) -> None:
    for url, token, why in [
        ("ftp://farm:10600", TOKEN, "`ftp://farm` is not an http:// or https:// URL with a host"),
        ("http://me:pw@farm:10600", TOKEN, "the URL carries credentials; give the token in the token file"),
        ("http://farm:port", TOKEN, "the port is not a number from 0 to 65535"),
        ("http://farm:10600", "", "the token file is empty or holds more than one line"),
    ]:
        with pytest.raises(dist_relay.BadSettings, match=f"^{re.escape(why)}$"):
            dist_relay.store(str(tmp_path), url, token)
    assert dist_relay.store(str(tmp_path), "https://farm.example", TOKEN) == "https://farm.example:443"
    assert stat.S_IMODE((tmp_path / "dist.json").stat().st_mode) == 0o600
    assert dist_relay.store(str(tmp_path), "", "") == "" and not (tmp_path / "dist.json").exists()
