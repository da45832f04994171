"""A real Redis server on 127.0.0.1 (Debian's redis-server, installed by ./setup): the
compiler cache that builds on several machines share through ccache."""

from __future__ import annotations

import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from e2e.reapi_server import free_port


@contextmanager
def redis_server(workdir: Path, password: str = "") -> Iterator[int]:
    """Starts redis-server (nothing persisted) and yields its port."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv = ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
            "--dir", str(workdir), *(["--requirepass", password] if password else [])]  # fmt: skip
    with open(workdir / "redis.log", "w") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 20
        while redis_cli(port, password, "PING") != "PONG":
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"redis-server did not start: {(workdir / 'redis.log').read_text()[-2000:]}")
            time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def redis_cli(port: int, password: str, *command: str) -> str:
    auth = ["--no-auth-warning", "-a", password] if password else []
    proc = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), *auth, *command], capture_output=True, text=True)
    return proc.stdout.strip()
