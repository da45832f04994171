"""ccache's remote storage on a real Redis server (127.0.0.1): a second machine whose compiler
cache is empty reuses the objects the first one compiled, through builds that have no
network; the address and its password reach no log and no key; a server that does not
answer costs a warning, not the build."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict

from e2e.redis_server import redis_cli, redis_server
from e2e.workspace import Workspace, make_fixture_upstreams, require_success
from mini import make_upstreams

UNITS = 12
PASSWORD = "s3cret-for-this-test"
WHEEL = "ccache_demo:wheel"


def c_component(variant: int) -> Dict[str, str]:
    files = {f"csrc/u{i}.c": f"int u{i}(int x) {{ return x * {i + 1} + {variant if i == 0 else 0}; }}\n" for i in range(UNITS)}
    sources = ", ".join(f"'csrc/u{i}.c'" for i in range(UNITS))
    files["setup.py"] = f"from setuptools import Extension, setup\nsetup(name='demo', version='1.0', ext_modules=[Extension('demo', [{sources}])])\n"
    return files


def machine(tmp_path: Path, upstreams, name: str, repo: Path, sha: str, address: str, fields: str = "") -> Workspace:
    # Its own checkout, local store and named caches (ccache's among them): another machine.
    ws = Workspace(tmp_path / name / "checkout", upstreams, tmp_path / name / "store", tmp_path / name / "named")
    ws.pin_extra("demo", repo, sha)
    ws.path("ccache_demo").mkdir()
    ws.write("ccache_demo/BUILD", 'upstream_repo(name="src", pin="demo", pins_file="tests/mini/pins.toml")\n'
             'rocm_wheel(name="wheel", source=":src", toolchain="tests/mini:llvm", gpu_targets=["gfx1151"]' + fields + ')\n')  # fmt: skip
    ws.pants_env_extra = {"PANTS_ROCM_BUILD_CCACHE_REMOTE_STORAGE": address}
    return ws


def ccache_stats(ws: Workspace) -> Dict[str, int]:
    log = next(ws.path("dist/ccache_demo").glob("*.build.log")).read_text()
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", re.findall(r"^== ccache: (.*)$", log, re.M)[-1])}


def everything_written(ws: Workspace) -> str:
    return "".join(p.read_text(errors="replace") for p in ws.path("dist").rglob("*") if p.is_file() and p.suffix != ".whl")


def demo_upstream(tmp_path: Path):
    upstreams = make_fixture_upstreams(tmp_path / "upstreams")
    repo = tmp_path / "upstreams" / "demo"
    repo.mkdir()
    make_upstreams.git(repo, "init", "-q", "-b", "main")
    return upstreams, repo, make_upstreams.commit(repo, c_component(0), "12 units")


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
            stats_a = ccache_stats(a)
            assert (stats_a["cache_miss"], stats_a["remote_storage_hit"]) == (UNITS, 0), stats_a
            assert int(redis_cli(port, PASSWORD, "DBSIZE")) >= UNITS
            # Machine b: an empty compiler cache, one unit changed since a's build.
            run_b = require_success(b.package(WHEEL), "machine b")
            stats_b = ccache_stats(b)
            assert (stats_b["cache_miss"], stats_b["remote_storage_hit"]) == (1, UNITS - 1), stats_b
            for ws, run in ((a, run_a), (b, run_b)):
                assert PASSWORD not in run.stderr + run.stdout + everything_written(ws)
        # The server is gone: b's next build warns, uses its own cache, and succeeds.
        b.pin_extra("demo", repo, make_upstreams.commit(repo, {"csrc/u1.c": "int u1(int x) { return -x; }\n"}, "another"))
        run = require_success(b.package(WHEEL), "machine b, server down")
        assert f"ccache remote storage redis://127.0.0.1:{port} ([rocm-build] ccache_remote_storage" in run.stderr
        assert "does not answer: cannot connect" in run.stderr
        stats = ccache_stats(b)
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
        stats = ccache_stats(ws)
        assert stats["remote_storage_error"] == 0 and stats["remote_storage_miss"] == UNITS, stats
        assert int(redis_cli(port, "", "DBSIZE")) >= UNITS
