"""A port on 127.0.0.1 that nothing listens on: where a test points a setting to stand for a
server that is down (the connection is refused at once, as a real server's would be)."""

from __future__ import annotations

import socket


def closed_port() -> int:
    # Bound, then released: nothing listens there unless another process takes it meanwhile.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
