"""bench/: starts with the Python ./setup installs, and its measuring parts measure."""

from __future__ import annotations

import re
import socket
import subprocess
import threading
import zlib

import run as bench  # bench/run.py, a module of the source root bench/
import torch_sized


def test_bench_starts_with_the_system_python_alone() -> None:
    # A fresh machine after ./setup: Debian's python3, no pytest, no venv, nothing exported but
    # the source roots `./pants run bench/run.py` puts on the path (its imports are their modules).
    proc = subprocess.run(["/usr/bin/python3", "bench/run.py", "--help"], env={"PATH": "/usr/bin:/bin", "PYTHONPATH": "rules:tests:bench"},
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "{rebuilds,remote,ccache,capture,source,incremental,torchsize,sharedccache,bigwheel,pulled,farm}" in proc.stdout


def test_process_times_are_read_from_pants_log() -> None:
    log = (
        "10:54:52.73 [INFO] Starting: Fetching big @ a45ffda0848c for bench_big:src\n"
        "10:54:53.00 [DEBUG] something else\n"
        "10:55:00.79 [INFO] Completed: Fetching big @ a45ffda0848c for bench_big:src\n"
        "10:55:01.56 [INFO] Starting: Applying 1 patch file(s) for bench_big:src\n"
        "10:55:16.68 [INFO] Completed: Applying 1 patch file(s) for bench_big:src\n"
    )
    took = bench.process_seconds(log)
    assert round(bench.seconds_of(took, "Fetching big"), 2) == 8.06
    assert round(bench.seconds_of(took, "Applying"), 2) == 15.12


def test_the_proxy_counts_what_the_server_sends() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def serve() -> None:
        conn, _ = server.accept()
        conn.recv(5)
        conn.sendall(b"x" * 3_000_000)
        conn.close()

    threading.Thread(target=serve, daemon=True).start()
    proxy = bench.CountingProxy(server.getsockname()[1])
    with socket.create_connection(("127.0.0.1", proxy.port)) as client:
        client.sendall(b"hello")
        got = 0
        while chunk := client.recv(1 << 20):
            got += len(chunk)
    proxy.close()
    assert got == proxy.pulled == 3_000_000


def test_the_torch_sized_tree_is_one_commit_of_the_asked_size(tmp_path) -> None:
    sha = torch_sized.fast_import(tmp_path / "big", torch_sized.big_tree_files(500, 40), "big")
    files = subprocess.run(["git", "ls-tree", "-r", "--name-only", sha], cwd=tmp_path / "big",
                           capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    assert len(files) == 500
    assert sum(f.startswith("csrc/tu") for f in files) == 40 and "setup.py" in files


def test_a_torch_sized_unit_carries_its_share_of_device_code(tmp_path) -> None:
    """Compiled for real: the object's section holds the unit's share, and it does not deflate."""
    files = dict(torch_sized.big_tree_files(8, 4, library_bytes=4 << 20))
    for name in ("csrc/tu1.c", "csrc/big.h"):
        (tmp_path / name.split("/")[1]).write_bytes(files[name])
    subprocess.run(["cc", "-O2", "-c", "tu1.c", "-o", "tu1.o"], cwd=tmp_path, check=True)
    sections = subprocess.run(["readelf", "-SW", "tu1.o"], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    (size,) = re.findall(r"\.rodata\.kernels_1\s+PROGBITS\s+\w+\s+\w+\s+(\w+)", sections)
    assert int(size, 16) == (4 << 20) // 4 // torch_sized.LINE_BYTES * torch_sized.LINE_BYTES >= 1 << 20
    data = (tmp_path / "tu1.o").read_bytes()
    assert len(zlib.compress(data, 6)) > 0.95 * len(data)
