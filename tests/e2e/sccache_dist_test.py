"""Distributed compiles on an sccache-dist farm (`[sccache] dist_scheduler_url`): a scheduler
and build servers on test hosts of their own (network namespaces on a bridge, sccache_farm.py),
builds that keep their own namespace and reach the farm only through the relay, servers that
compile with the build's toolchain archive. The wheel is the local build's, byte for byte; a
server lost in the middle and a scheduler that is down cost local compiles, not the build."""

from __future__ import annotations

import re
import struct
import threading
import time
import zipfile
from pathlib import Path
from typing import Dict, Optional

import pytest

import torch_sized  # bench/torch_sized.py's C component (MAX_JOBS compiles at a time)
from e2e.c_demo import everything_written
from e2e.sccache_farm import Farm
from e2e.workspace import Run, Workspace, make_fixture_upstreams, require_success


UNITS = 48


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    """The copy and the pins of its two upstreams. One copy, pantsd and store for the file's
    builds: each build is a component of its own (`component`), so its compiler cache (a named
    cache per component) starts empty and its build key is its own, as on a fresh machine; the
    farm's settings are in no key (caches/sccache_dist.py). A fresh copy per build would pay pantsd and the tool chain again
    and prove nothing more about where the units compile or what bytes they make."""
    root = tmp_path_factory.mktemp("sccache_dist")
    upstreams = make_fixture_upstreams(root / "upstreams")
    big = root / "upstreams" / "big"
    hip = root / "upstreams" / "hip"
    files = {"setup.py": HIP_SETUP.encode(), "farm_hip/__init__.py": b"",
             **{f"kernels/k{i}.hip": KERNEL.format(i=i).encode() for i in range(8)}}  # fmt: skip
    pins = {"big": (big, torch_sized.fast_import(big, torch_sized.big_tree_files(UNITS + 3, UNITS), f"{UNITS} units")),
            "hip": (hip, torch_sized.fast_import(hip, iter(files.items()), "8 kernels"))}  # fmt: skip
    ws = Workspace(root / "checkout", upstreams, root / "store", root / "named")
    yield ws, pins
    ws.stop()


@pytest.fixture
def ws(machine):
    copy, pins = machine
    for name, (repo, sha) in pins.items():
        copy.pin_extra(name, repo, sha)
    yield copy
    copy.reset()


def component(ws: Workspace, name: str, pin: str = "big") -> str:
    """A wheel target `name:wheel` of `pin`: the toolchain's clang (the archive holds it) for C,
    its clang++ for HIP, six compiles at a time."""
    compilers = '"CC": "$ROCM_PATH/bin/clang"' if pin == "big" else '"CXX": "$ROCM_PATH/bin/clang++"'
    ws.write(f"{name}/BUILD", f'upstream_repo(name="src", pin="{pin}", pins_file="tests/mini/pins")\n'
             f'rocm_wheel(name="wheel", source=":src", toolchain="tests/mini:llvm", gpu_targets=["gfx1151"], '
             f'env={{{compilers}, "MAX_JOBS": "6"}})\n')  # fmt: skip
    return name


HIP_SETUP = """\
import os, subprocess
from concurrent.futures import ThreadPoolExecutor
from setuptools import setup
from setuptools.command.build_py import build_py

class WithKernels(build_py):
    # Device code for gfx1151 through $CXX (sccache and the toolchain's clang++), four at a time.
    def run(self):
        super().run()
        out = os.path.join(self.build_lib, "farm_hip")
        def one(i):
            subprocess.check_call([*os.environ["CXX"].split(), "-x", "hip", "--offload-arch=gfx1151", "--cuda-device-only",
                                   "--no-gpu-bundle-output", "-nogpulib", "-nogpuinc", "-O2", *os.environ["HIPFLAGS"].split(),
                                   "-c", f"kernels/k{i}.hip", "-o", os.path.join(out, f"k{i}.co")])
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(one, range(8)))

setup(name="farm-hip", version="1.0", packages=["farm_hip"], cmdclass={"build_py": WithKernels})
"""
KERNEL = """\
#define __global__ __attribute__((global))
extern "C" __global__ void scale{i}(float *x, float a) {{ x[__builtin_amdgcn_workitem_id_x()] *= a + {i}; }}
"""


def log_of(ws: Workspace, component: str) -> str:
    return next(ws.path(f"dist/{component}").glob("*.build.log")).read_text()


def farm_line(ws: Workspace, component: str) -> str:
    return re.findall(r"^== sccache-dist: (.*)$", log_of(ws, component), re.M)[-1]


def compiles(ws: Workspace, component: str) -> Dict[str, int]:
    """Where the misses compiled, from the build log: each server's address, `local`, `fallbacks`."""
    line = re.findall(r"^== sccache-dist compiles: (.*)$", log_of(ws, component), re.M)[-1]
    return {k: int(v) for k, v in re.findall(r"(\S+)=(\d+)", line)}


def wheel_files(ws: Workspace, component: str, suffix: str) -> Dict[str, bytes]:
    (wheel,) = ws.path(f"dist/{component}").glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        return {n: z.read(n) for n in sorted(z.namelist()) if n.endswith(suffix)}


def wheel_bytes(ws: Workspace, component: str) -> bytes:
    return b"".join(wheel_files(ws, component, ".so").values())


def build(ws: Workspace, component: str, what: str, farm: Optional[Farm] = None) -> Run:
    """Builds `component` with sccache, through `farm` when one is given."""
    ws.pants_env_extra = {"PANTS_COMPILER_CACHE_LAUNCHER": "sccache"}
    if farm:
        ws.pants_env_extra.update(
            {"PANTS_SCCACHE_DIST_SCHEDULER_URL": farm.scheduler_url, "PANTS_SCCACHE_DIST_TOKEN_FILE": str(farm.token_file())}
        )
    return require_success(ws.package(f"{component}:wheel", extra_options=["--keep-sandboxes=on_failure"]), what)


def test_a_farm_compiles_the_units_and_the_wheel_is_the_local_one(ws: Workspace, tmp_path: Path) -> None:
    local, two, three = component(ws, "local"), component(ws, "two"), component(ws, "three")
    build(ws, local, "locally")
    assert "== sccache-dist" not in log_of(ws, local)
    with Farm(tmp_path / "farm") as farm:
        servers = [farm.add_server(), farm.add_server()]
        build(ws, two, "on two servers", farm)
        assert farm_line(ws, two) == f"scheduler {farm.scheduler_url}, 2 build server(s), 4 cpu(s)"
        spread = compiles(ws, two)
        # Each server compiles; a unit compiled here is one the farm could not take (the
        # scheduler refuses a busy server, as on a loaded machine), counted as a fallback. How
        # many the farm takes follows the machine's load (CI: 18 of 48 fell back, then 26 with
        # more beside it): the share is a speed figure, bench/run.py --only farm measures it.
        assert all(spread.get(s, 0) > 0 for s in servers), spread
        assert spread["local"] == spread["fallbacks"] and sum(spread[s] for s in servers) + spread["local"] == UNITS, spread
        assert wheel_bytes(ws, two) == wheel_bytes(ws, local)

        # A third server joins; `three`'s compiler cache is empty, as `two`'s was.
        servers.append(farm.add_server())
        build(ws, three, "on three servers", farm)
        spread = compiles(ws, three)
        assert all(spread.get(s, 0) > 0 for s in servers) and spread["local"] == spread["fallbacks"], spread
        assert sum(spread[s] for s in servers) + spread["local"] == UNITS, spread
        assert wheel_bytes(ws, three) == wheel_bytes(ws, local)
        # The token is in nothing the builds wrote.
        assert farm.client_token not in everything_written(ws)


def test_a_server_lost_in_the_middle_and_a_scheduler_down_cost_local_compiles(ws: Workspace, tmp_path: Path) -> None:
    lost_one, down = component(ws, "lost_one"), component(ws, "down")
    with Farm(tmp_path / "farm") as farm:
        kept, lost = farm.add_server(), farm.add_server()
        scheduler_log = farm.root / "scheduler.log"

        def kill_after_some_jobs() -> None:
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline and scheduler_log.read_text().count("updated state to Complete") < 4:
                time.sleep(0.05)
            farm.stop("server11")

        killer = threading.Thread(target=kill_after_some_jobs)
        killer.start()
        try:
            build(ws, lost_one, "with a server killed in the middle", farm)
        finally:
            killer.join()
        spread = compiles(ws, lost_one)
        assert spread["fallbacks"] > 0 and spread.get(kept, 0) > 0, spread
        assert spread.get(kept, 0) + spread.get(lost, 0) + spread["local"] == UNITS, spread
        local_bytes = wheel_bytes(ws, lost_one)

    # The farm is gone: the build still finishes, all here, and says so once.
    run = build(ws, down, "with the scheduler down", farm)
    assert "cannot be used" in farm_line(ws, down) and farm_line(ws, down).endswith("every unit compiles here")
    assert compiles(ws, down)["local"] == UNITS, compiles(ws, down)
    assert run.stderr.count(f"sccache-dist scheduler {farm.scheduler_url}") == 1, run.stderr
    assert wheel_bytes(ws, down) == local_bytes


def test_hip_kernels_from_the_farm_are_gfx1151_code_objects_with_the_local_bytes(ws: Workspace, tmp_path: Path) -> None:
    hip_local, hip_farm = component(ws, "hip_local", "hip"), component(ws, "hip_farm", "hip")
    build(ws, hip_local, "hip_local")
    local = wheel_files(ws, hip_local, ".co")
    with Farm(tmp_path / "farm") as farm:
        servers = [farm.add_server(), farm.add_server()]
        build(ws, hip_farm, "hip_farm", farm)
        remote = wheel_files(ws, hip_farm, ".co")
    spread = compiles(ws, hip_farm)
    shipped = sum(spread.get(s, 0) for s in servers)
    assert shipped >= 4 and shipped + spread["local"] == 8 and spread["local"] == spread["fallbacks"], spread
    assert len(remote) == 8 and remote == local
    for name, code in remote.items():
        # An AMDGPU code object (EM_AMDGPU) for gfx1151 (e_flags' mach 0x4a), from its ELF header.
        assert code[:4] == b"\x7fELF" and struct.unpack_from("<H", code, 18)[0] == 224, name
        assert struct.unpack_from("<I", code, 48)[0] & 0xFF == 0x4A, name
