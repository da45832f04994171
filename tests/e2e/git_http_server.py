"""Git over HTTP on 127.0.0.1, GitHub's stand-in for tests: git's own `git http-backend` (the
smart HTTP protocol, v2 included) run as a CGI program by a small server, over the repositories
of one directory. Counts the repositories fetched from."""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator, List, Set, Tuple


def _chunked(rfile) -> bytes:
    body = b""
    while True:
        size = int(rfile.readline().split(b";")[0].strip() or b"0", 16)
        if size == 0:
            rfile.readline()
            return body
        body += rfile.read(size)
        rfile.readline()


@contextlib.contextmanager
def serving_git(root: Path, delay: float = 0.0) -> Iterator[Tuple[str, List[str]]]:
    """(base URL, the repository paths fetched from so far): http://127.0.0.1:PORT/<dir> is root/<dir>.
    With `delay`, a slow network's stand-in: each repository's first pack request (its fetch)
    is answered that many seconds late."""
    fetched: List[str] = []
    delayed: Set[str] = set()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self._backend()

        def do_POST(self) -> None:  # noqa: N802
            self._backend()

        def _backend(self) -> None:
            path, _, query = self.path.partition("?")
            if delay and "git-upload-pack" in path and self.command == "POST":
                with lock:
                    first = path not in delayed
                    delayed.add(path)
                if first:
                    time.sleep(delay)
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                body = _chunked(self.rfile)
            else:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            env = {
                "PATH": "/usr/bin:/bin",
                "GIT_PROJECT_ROOT": str(root),
                "GIT_HTTP_EXPORT_ALL": "1",
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_CONFIG_GLOBAL": "/dev/null",
                "REQUEST_METHOD": self.command,
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
                "REMOTE_ADDR": "127.0.0.1",
                "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
            }
            proc = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True)
            head, _, payload = proc.stdout.partition(b"\r\n\r\n")  # CGI headers, as http-backend ends them
            headers = [line.split(":", 1) for line in head.decode(errors="replace").splitlines() if ":" in line]
            status = next((v.strip() for k, v in headers if k.lower() == "status"), "200 OK")
            self.send_response(int(status.split()[0]), status.partition(" ")[2])
            for key, value in headers:
                if key.lower() != "status":
                    self.send_header(key, value.strip())
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            if "git-upload-pack" in path and self.command == "POST":
                fetched.append(path.rsplit("/git-upload-pack", 1)[0])

        def log_message(self, *args) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", fetched
    finally:
        httpd.shutdown()
