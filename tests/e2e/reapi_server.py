"""A BuildGrid REAPI cache server for tests and benchmarks (no pytest here: bench/ imports it)."""

from __future__ import annotations

import os
import socket

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
