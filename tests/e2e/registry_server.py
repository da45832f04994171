"""A container registry on 127.0.0.1 for tests: Debian's docker-registry (the CNCF distribution
registry, `./setup` installs it), storing under a directory of the test, plain HTTP."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from e2e.local_server import free_port, port_open, running

REGISTRY = "/usr/bin/docker-registry"
CONFIG = """\
version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: {storage}
  delete:
    enabled: true
http:
  addr: 127.0.0.1:{port}
"""


@contextlib.contextmanager
def registry(root: Path) -> Iterator[str]:
    """The registry's host:port while it runs."""
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = root / "config.yml"
    config.write_text(CONFIG.format(storage=root / "storage", port=port))
    with running([REGISTRY, "serve", str(config)], root / "registry.log", port_open(port), timeout=30):
        yield f"127.0.0.1:{port}"
