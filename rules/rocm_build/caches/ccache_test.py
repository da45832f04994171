"""ccache's remote storage: the address is parsed, written where builds find it, kept out of
every key, and a server that does not answer is a warning."""

from __future__ import annotations

import json
import subprocess
import sys
import re
import socket
import stat
from pathlib import Path

import pytest
from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import QueryRule, RuleRunner

from e2e.local_server import free_port  # a port nothing listens on: a server that is down
from rocm_build.caches import ccache
from rocm_build.caches.ccache import CCACHE_REMOTE_CACHE, CcacheRemote
from rocm_build.sandbox_scripts import script_bytes
from rocm_build.scripts import ccache_remote
from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner


@pytest.mark.parametrize(
    "address, target, shown, url",
    [
        ("redis://cache.example.com", ["tcp", "cache.example.com", 6379], "redis://cache.example.com:6379",
         "redis+unix://@SOCKET@"),
        ("redis://alice:s3cret@10.0.0.5:7000/2|read-only=true", ["tcp", "10.0.0.5", 7000], "redis://10.0.0.5:7000",
         "redis+unix://alice:s3cret@localhost@SOCKET@?db=2|read-only=true"),
        # A password alone: ccache 4.7 authenticates only with `PASSWORD@`, not `:PASSWORD@`.
        ("redis://:pw@cache", ["tcp", "cache", 6379], "redis://cache:6379", "redis+unix://pw@localhost@SOCKET@"),
        ("redis+unix:/run/redis/redis.sock?db=1", ["unix", "/run/redis/redis.sock"], "redis+unix:/run/redis/redis.sock",
         "redis+unix://@SOCKET@?db=1"),
    ],
)  # fmt: skip
def test_the_address_becomes_a_server_to_relay_to_and_a_url_for_ccache(address, target, shown, url) -> None:
    parsed = ccache_remote.parse(address)
    assert (parsed["target"], parsed["shown"], parsed["url"]) == (target, shown, url)


@pytest.mark.parametrize(
    "address, why",
    [
        ("http://cache.example.com/ccache", "the scheme `http` is not redis or redis+unix"),
        ("redis://host:notaport", "the port is not a number from 0 to 65535"),
        # Whatever was mistyped may be a password: the refusal never quotes the address.
        ("redis://cache:s3cret", "the port is not a number from 0 to 65535"),
        (":s3cret@cache:6379", "no scheme"),
        ("redis://host/zero", "the database `zero` is not a number"),
        ("redis+unix:relative.sock", "the socket path is not absolute"),
    ],
)
def test_a_bad_address_is_refused(address, why) -> None:
    with pytest.raises(ccache_remote.BadAddress, match=re.escape(why)) as e:
        ccache_remote.parse(address)
    assert "s3cret" not in str(e.value)


@pytest.fixture
def rule_runner(tmp_path: Path) -> RuleRunner:
    return isolated_rule_runner(
        rules=[*ccache.rules(), QueryRule(CcacheRemote, [])],
        named_caches=tmp_path / "named",
    )


def test_the_address_goes_to_a_private_file_in_a_named_cache_and_a_silent_server_is_a_warning(
    rule_runner: RuleRunner, tmp_path: Path, caplog
) -> None:
    port = free_port()
    rule_runner.set_options([f"--compiler-cache-ccache-remote-storage=redis://:pw@127.0.0.1:{port}"])
    remote = rule_runner.request(CcacheRemote, [])
    assert remote.shown == f"redis://127.0.0.1:{port}"
    assert remote.problem.startswith("cannot connect: [Errno 111] Connection refused")
    assert f"ccache remote storage redis://127.0.0.1:{port} ([compiler-cache] ccache_remote_storage" in caplog.text
    assert "pw" not in caplog.text
    stored = tmp_path / "named" / CCACHE_REMOTE_CACHE / "storage.json"
    assert json.loads(stored.read_text())["url"] == "redis+unix://pw@localhost@SOCKET@"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    # Unset: builds find nothing and use only their local cache.
    rule_runner.set_options([])
    assert rule_runner.request(CcacheRemote, []) == CcacheRemote("", "")
    assert not stored.exists()


def test_a_bad_address_names_the_option(rule_runner: RuleRunner) -> None:
    rule_runner.set_options(["--compiler-cache-ccache-remote-storage=memcached://cache:11211"])
    with pytest.raises(ExecutionError) as e:
        rule_runner.request(CcacheRemote, [])
    assert (
        "[compiler-cache] ccache_remote_storage (PANTS_COMPILER_CACHE_CCACHE_REMOTE_STORAGE): the scheme `memcached` is "
        "not redis or redis+unix; expected redis://[[USER:]PASSWORD@]HOST[:PORT][/DB] or redis+unix:/PATH/TO/SOCKET"
    ) in str(e.value)


@pytest.mark.parametrize(
    "auth, db, expected",
    [
        ("alice:s3cret", "2", {"SCCACHE_REDIS_USERNAME": "alice", "SCCACHE_REDIS_PASSWORD": "s3cret", "SCCACHE_REDIS_DB": "2"}),
        ("pw", "", {"SCCACHE_REDIS_PASSWORD": "pw"}),
        ("", "", {}),
    ],
)
def test_sccache_reaches_the_forwarders_socket_through_a_loopback_relay(tmp_path: Path, auth, db, expected) -> None:
    # A stand-in for the forwarder's socket that answers what it is sent, upper-cased.
    forward_dir = tmp_path / "fwd"
    forward_dir.mkdir()
    (forward_dir / "redis.json").write_text(json.dumps({"auth": auth, "db": db}))
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(forward_dir / "redis.sock"))
    server.listen(1)
    (tmp_path / "ccache_remote.py").write_bytes(script_bytes("ccache_remote.py"))
    sleeper = subprocess.Popen(["sleep", "30"])  # the build: the relay stops when it has ended
    try:
        out = subprocess.run(
            [sys.executable, str(tmp_path / "ccache_remote.py"), "sccache-relay", str(forward_dir), str(sleeper.pid)],
            capture_output=True, text=True, check=True, timeout=30,
        ).stdout
        settings = dict(line.split("=", 1) for line in out.splitlines())
        endpoint = settings.pop("SCCACHE_REDIS_ENDPOINT")
        assert settings == expected
        host, port = re.fullmatch(r"tcp://(127\.0\.0\.1):(\d+)", endpoint).groups()
        with socket.create_connection((host, int(port)), timeout=10) as client:
            conn, _ = server.accept()
            client.sendall(b"ping")
            conn.sendall(conn.recv(4).upper())
            assert client.recv(4) == b"PING"
            conn.close()
    finally:
        sleeper.kill()
        server.close()
