"""Starting a real server on 127.0.0.1 for a test: a free port, the server's process with its
output in a log, waited for until it answers, stopped on leaving (the REAPI cache, the registry,
Redis). No pytest here: bench/ imports it through reapi_server.py."""

from __future__ import annotations

import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Sequence


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int) -> Callable[[], bool]:
    """Whether something accepts connections on 127.0.0.1:`port`."""

    def accepting() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    return accepting


@contextmanager
def running(argv: Sequence[str], log: Path, ready: Callable[[], bool], timeout: float) -> Iterator[subprocess.Popen]:
    """`argv` running, its output in `log`, once `ready()` says it answers; a server that exits
    or does not answer within `timeout` seconds fails with its log's end."""
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while not ready():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{Path(argv[0]).name} did not start: {log.read_text()[-2000:]}")
            time.sleep(0.1)
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)
