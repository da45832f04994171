"""A real Redis server on 127.0.0.1 (Debian's redis-server, installed by ./setup): the
compiler cache that builds on several machines share through ccache."""

from __future__ import annotations

import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from e2e.local_server import free_port, running


@contextmanager
def redis_server(workdir: Path, password: str = "") -> Iterator[int]:
    """Starts redis-server (nothing persisted) and yields its port."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv = ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
            "--dir", str(workdir), *(["--requirepass", password] if password else [])]  # fmt: skip
    with running(argv, workdir / "redis.log", lambda: redis_cli(port, password, "PING") == "PONG", timeout=20):
        yield port


def redis_cli(port: int, password: str, *command: str) -> str:
    auth = ["--no-auth-warning", "-a", password] if password else []
    proc = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), *auth, *command], capture_output=True, text=True)
    return proc.stdout.strip()
