"""A BuildGrid REAPI cache server for tests and benchmarks (no pytest here: bench/ imports it)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator, Tuple

from e2e.local_server import free_port, port_open, running

BGD_CONFIG = """\
server:
  - !channel
    address: "127.0.0.1:{port}"
    insecure-mode: true
instances:
  - name: ''
    storages:
      - !disk-storage &cas
        path: {storage}
    caches:
      - !lru-action-cache &ac
        storage: *cas
        max-cached-refs: 100000
        allow-updates: true
        cache-failed-actions: false
    services:
      - !cas
        storage: *cas
      - !bytestream
        storage: *cas
      - !action-cache
        cache: *ac
"""


def bgd_binary() -> str:
    cache = os.environ.get("ROCM_PANTS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rocm-pants"
    )
    path = os.path.join(cache, "buildgrid-0.4.4", "bin", "bgd")
    assert os.path.exists(path), f"BuildGrid is not installed at {path}: run ./setup"
    return path


@contextlib.contextmanager
def serving(root: Path) -> Iterator[Tuple[str, Path]]:
    """A BuildGrid cache server storing under root/cas, its log in root/bgd.log: its address and
    that folder; stopped on leaving."""
    port = free_port()
    storage = root / "cas"
    storage.mkdir(parents=True)
    config = root / "bgd.yml"
    config.write_text(BGD_CONFIG.format(port=port, storage=storage))
    with running([bgd_binary(), "server", "start", str(config)], root / "bgd.log", port_open(port), timeout=60):
        yield f"grpc://127.0.0.1:{port}", storage
