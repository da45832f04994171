"""sccache as the compiler launcher (`[compiler-cache] launcher = "sccache"`), on the
C component of ccache_remote_test: its local cache in a named cache makes a one-unit change
one compile; its server lives inside the build process (a Unix socket in the sandbox, so two
builds never share one) and is gone when the build is; the objects are the ones ccache's
build makes."""

from __future__ import annotations

import os
import time
import zipfile
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest

from e2e.c_demo import UNITS, WHEEL, c_component, demo_upstream, everything_written, launcher_stats, machine, remote_storage
from e2e.redis_server import redis_cli, redis_server
from e2e.workspace import Workspace, require_success
from mini import make_upstreams


def sccache_processes() -> List[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            continue
        if os.path.basename(exe) == "sccache":
            found.append(f"{pid} {exe}")
    return found


def left_running(before: List[str], wait: float = 120) -> List[str]:
    """sccache processes started since `before` and still running after up to `wait` s: a
    build's server left behind (SCCACHE_IDLE_TIMEOUT=0, it would never end by itself). Other
    tests running beside this one start and stop their builds' servers (CI: one of theirs
    ended during this test), so only this test's leftovers count, and theirs get time to end."""
    deadline = time.monotonic() + wait
    while True:
        new = sorted(set(sccache_processes()) - set(before))
        if not new or time.monotonic() > deadline:
            return new
        time.sleep(2)


def extension_bytes(ws: Workspace) -> Dict[str, bytes]:
    (wheel,) = ws.path("dist/ccache_demo").glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        return {n: z.read(n) for n in z.namelist() if n.endswith(".so")}


def launcher(ws: Workspace, name: str) -> Workspace:
    ws.pants_env_extra = {**ws.pants_env_extra, "PANTS_COMPILER_CACHE_LAUNCHER": name}
    return ws


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Iterator[Tuple[Path, str, Workspace]]:
    """The demo upstream (its repository, its first commit) and machine a, which both the local
    case and the Redis case build on: each pins commits of its own, so neither finds the other's
    build in a's store (the remote storage is not in the build's key: it changes where objects
    are kept, not what is built); and sccache with remote storage keeps nothing on the machine
    (the local case's first build misses all)."""
    root = tmp_path_factory.mktemp("sccache")
    upstreams, repo, first = demo_upstream(root)
    a = machine(root, upstreams, "a", repo, first, "")
    yield repo, first, a
    a.stop()


def test_sccache_caches_objects_and_leaves_no_server(demo) -> None:
    repo, first, a = demo
    before = sccache_processes()
    launcher(remote_storage(a, ""), "sccache").pin_extra("demo", repo, first)
    require_success(a.package(WHEEL), "with sccache")
    assert launcher_stats(a, "sccache") == {"hits": 0, "misses": UNITS, "errors": 0}, launcher_stats(a, "sccache")
    assert left_running(before) == []
    sccache_objects = extension_bytes(a)
    # The same objects as a ccache build of the same inputs. On a's store: the launcher is
    # in the build's key and each has a compiler cache of its own, so this is a full ccache
    # build (its counts say so), and another machine would prove nothing more.
    require_success(launcher(a, "ccache").package(WHEEL), "with ccache")
    assert launcher_stats(a, "ccache")["cache_miss"] == UNITS, launcher_stats(a, "ccache")
    assert extension_bytes(a) == sccache_objects and sccache_objects

    launcher(a, "sccache").pin_extra("demo", repo, make_upstreams.commit(repo, {"csrc/u0.c": "int u0(int x) { return x - 1; }\n"}, "one unit"))
    require_success(a.package(WHEEL), "one unit changed")
    assert launcher_stats(a, "sccache") == {"hits": UNITS - 1, "misses": 1, "errors": 0}, launcher_stats(a, "sccache")
    assert left_running(before) == []


def test_sccache_in_a_build_image(tmp_path: Path) -> None:
    # The pinned binary is a link into this machine's store: mounted read-only in the
    # container, as its named cache is.
    upstreams, repo, first = demo_upstream(tmp_path)
    ws = launcher(machine(tmp_path, upstreams, "box", repo, first, "", ', python="3.11", environment="mini-box"'), "sccache")
    try:
        require_success(ws.package(WHEEL), "with sccache in mini-box")
    finally:
        ws.stop()
    assert launcher_stats(ws, "sccache") == {"hits": 0, "misses": UNITS, "errors": 0}, launcher_stats(ws, "sccache")


def test_a_second_machine_reuses_objects_through_redis(demo, tmp_path: Path) -> None:
    # The same Redis server as ccache's remote storage ([compiler-cache] ccache_remote_storage),
    # reached from builds that have no network through the forwarder's socket and a relay on
    # the build's own loopback. Machine a is the local case's; b is new, its sccache store empty.
    password = "sccache-s3cret"
    repo, _, a = demo
    # The first commit's units again, and a file the build does not compile: a build new to a.
    for_a = make_upstreams.commit(repo, {"csrc/u0.c": c_component(0)["csrc/u0.c"], "NOTES": "machine a's build\n"}, "the units again")
    second = make_upstreams.commit(repo, {"csrc/u0.c": c_component(1)["csrc/u0.c"]}, "one unit changed")
    b = None
    before = sccache_processes()
    try:
        with redis_server(tmp_path / "redis", password) as port:
            address = f"redis://:{password}@127.0.0.1:{port}"
            launcher(remote_storage(a, address), "sccache").pin_extra("demo", repo, for_a)
            b = launcher(machine(tmp_path, a.upstreams, "b", repo, second, address), "sccache")
            run_a = require_success(a.package(WHEEL), "machine a")
            assert launcher_stats(a, "sccache") == {"hits": 0, "misses": UNITS, "errors": 0}, launcher_stats(a, "sccache")
            assert int(redis_cli(port, password, "DBSIZE")) >= UNITS
            run_b = require_success(b.package(WHEEL), "machine b, its own empty sccache store")
            assert launcher_stats(b, "sccache") == {"hits": UNITS - 1, "misses": 1, "errors": 0}, launcher_stats(b, "sccache")
            for ws, run in ((a, run_a), (b, run_b)):
                assert password not in run.stdout + run.stderr + everything_written(ws)
        assert left_running(before) == []
    finally:
        remote_storage(a, "")
        if b:
            b.stop()
