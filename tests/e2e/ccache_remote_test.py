"""ccache's remote storage on a real Redis server (127.0.0.1): a second machine whose compiler
cache is empty reuses the objects the first one compiled, through builds that have no
network; the address and its password reach no log and no key; a server that does not
answer costs a warning, not the build."""

from __future__ import annotations

from pathlib import Path

from e2e.redis_server import redis_cli, redis_server
from e2e.c_demo import UNITS, WHEEL, c_component, demo_upstream, everything_written, launcher_stats, machine
from e2e.workspace import require_success
from mini import make_upstreams

PASSWORD = "s3cret-for-this-test"


def test_a_second_machine_reuses_the_first_machines_objects(tmp_path: Path) -> None:
    upstreams, repo, first = demo_upstream(tmp_path)
    second = make_upstreams.commit(repo, {"csrc/u0.c": c_component(1)["csrc/u0.c"]}, "one unit changed")
    a = b = None
    try:
        with redis_server(tmp_path / "redis", PASSWORD) as port:
            address = f"redis://:{PASSWORD}@127.0.0.1:{port}"
            a = machine(tmp_path, upstreams, "a", repo, first, address)
            b = machine(tmp_path, upstreams, "b", repo, second, address)
            run_a = require_success(a.package(WHEEL), "machine a")
            stats_a = launcher_stats(a, "ccache")
            assert (stats_a["cache_miss"], stats_a["remote_storage_hit"]) == (UNITS, 0), stats_a
            assert int(redis_cli(port, PASSWORD, "DBSIZE")) >= UNITS
            # Machine b: an empty compiler cache, one unit changed since a's build.
            run_b = require_success(b.package(WHEEL), "machine b")
            stats_b = launcher_stats(b, "ccache")
            assert (stats_b["cache_miss"], stats_b["remote_storage_hit"]) == (1, UNITS - 1), stats_b
            for ws, run in ((a, run_a), (b, run_b)):
                assert PASSWORD not in run.stderr + run.stdout + everything_written(ws)
        # The server is gone: b's next build warns, uses its own cache, and succeeds.
        b.pin_extra("demo", repo, make_upstreams.commit(repo, {"csrc/u1.c": "int u1(int x) { return -x; }\n"}, "another"))
        run = require_success(b.package(WHEEL), "machine b, server down")
        assert f"ccache remote storage redis://127.0.0.1:{port} ([compiler-cache] ccache_remote_storage" in run.stderr
        assert "does not answer: cannot connect" in run.stderr
        stats = launcher_stats(b, "ccache")
        assert stats["cache_miss"] == 1 and stats["remote_storage_error"] >= 1, stats
    finally:
        for ws in (a, b):
            if ws:
                ws.stop()


def test_a_build_in_a_container_reaches_the_server_through_its_sandbox(tmp_path: Path) -> None:
    # The container has no network either: the forwarder runs outside it, the socket is in
    # the sandbox that is mounted in.
    upstreams, repo, first = demo_upstream(tmp_path)
    with redis_server(tmp_path / "redis") as port:
        ws = machine(tmp_path, upstreams, "box", repo, first, f"redis://127.0.0.1:{port}", ', python="3.11", environment="mini-box"')
        try:
            require_success(ws.package(WHEEL), "in mini-box")
        finally:
            ws.stop()
        stats = launcher_stats(ws, "ccache")
        assert stats["remote_storage_error"] == 0 and stats["remote_storage_miss"] == UNITS, stats
        assert int(redis_cli(port, "", "DBSIZE")) >= UNITS
