"""A plain HTTP server on 127.0.0.1 for tests: serves a directory, counts what it is asked."""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator, List, Tuple


@contextlib.contextmanager
def serving(directory: Path, delay: float = 0.0) -> Iterator[Tuple[str, List[str]]]:
    """(base URL, the paths requested so far) while the server runs. With `delay`, a slow
    network's stand-in: each file (not a directory's index page) is served that many seconds late."""
    seen: List[str] = []

    class Handler(SimpleHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            seen.append(self.path)
            if delay and not self.path.endswith("/"):
                time.sleep(delay)
            super().do_GET()

        def log_message(self, *args) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(directory)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    finally:
        httpd.shutdown()
