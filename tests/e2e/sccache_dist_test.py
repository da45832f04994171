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
from typing import Dict, Optional, Tuple

import torch_sized  # bench/torch_sized.py's C component (MAX_JOBS compiles at a time)
from e2e.c_demo import everything_written
from e2e.sccache_farm import Farm
from e2e.workspace import Workspace, make_fixture_upstreams, require_success


UNITS = 48
WHEEL = "farm_demo:wheel"


def demo(tmp_path: Path):
    upstreams = make_fixture_upstreams(tmp_path / "upstreams")
    repo = tmp_path / "upstreams" / "big"
    return upstreams, repo, torch_sized.fast_import(repo, torch_sized.big_tree_files(UNITS + 3, UNITS), f"{UNITS} units")


def machine(tmp_path: Path, name: str, upstream, farm: Optional[Farm] = None) -> Workspace:
    upstreams, repo, sha = upstream
    ws = Workspace(tmp_path / name / "checkout", upstreams, tmp_path / name / "store", tmp_path / name / "named")
    ws.pin_extra("big", repo, sha)
    ws.path("farm_demo").mkdir()
    # The toolchain's clang for C (the archive holds it), six compiles at a time.
    ws.write("farm_demo/BUILD", 'upstream_repo(name="src", pin="big", pins_file="tests/mini/pins")\n'
             'rocm_wheel(name="wheel", source=":src", toolchain="tests/mini:llvm", gpu_targets=["gfx1151"], '
             'env={"CC": "$ROCM_PATH/bin/clang", "MAX_JOBS": "6"})\n')  # fmt: skip
    ws.pants_env_extra = {"PANTS_COMPILER_CACHE_LAUNCHER": "sccache"}
    if farm:
        ws.pants_env_extra.update(
            {"PANTS_SCCACHE_DIST_SCHEDULER_URL": farm.scheduler_url, "PANTS_SCCACHE_DIST_TOKEN_FILE": str(farm.token_file())}
        )
    return ws


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


def log_of(ws: Workspace, component: str = "farm_demo") -> str:
    return next(ws.path(f"dist/{component}").glob("*.build.log")).read_text()


def farm_line(ws: Workspace) -> str:
    return re.findall(r"^== sccache-dist: (.*)$", log_of(ws), re.M)[-1]


def compiles(ws: Workspace, component: str = "farm_demo") -> Dict[str, int]:
    """Where the misses compiled, from the build log: each server's address, `local`, `fallbacks`."""
    line = re.findall(r"^== sccache-dist compiles: (.*)$", log_of(ws, component), re.M)[-1]
    return {k: int(v) for k, v in re.findall(r"(\S+)=(\d+)", line)}


def wheel_bytes(ws: Workspace) -> bytes:
    (wheel,) = ws.path("dist/farm_demo").glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        return b"".join(z.read(n) for n in sorted(z.namelist()) if n.endswith(".so"))


def build(ws: Workspace, what: str) -> None:
    try:
        require_success(ws.package(WHEEL, extra_options=["--keep-sandboxes=on_failure"]), what)
    finally:
        ws.stop()


def test_a_farm_compiles_the_units_and_the_wheel_is_the_local_one(tmp_path: Path) -> None:
    upstream = demo(tmp_path)
    local = machine(tmp_path, "local", upstream)
    build(local, "locally")
    assert "== sccache-dist" not in log_of(local)
    with Farm(tmp_path / "farm") as farm:
        servers = [farm.add_server(), farm.add_server()]
        two = machine(tmp_path, "two", upstream, farm)
        build(two, "on two servers")
        assert farm_line(two) == f"scheduler {farm.scheduler_url}, 2 build server(s), 4 cpu(s)"
        spread = compiles(two)
        # Each server compiles; a unit compiled here is one the farm could not take (the
        # scheduler refuses a busy server, as on a loaded machine), counted as a fallback. How
        # many the farm takes follows the machine's load (CI: 18 of 48 fell back, then 26 with
        # more beside it): the share is a speed figure, bench/run.py --only farm measures it.
        assert all(spread.get(s, 0) > 0 for s in servers), spread
        assert spread["local"] == spread["fallbacks"] and sum(spread[s] for s in servers) + spread["local"] == UNITS, spread
        assert wheel_bytes(two) == wheel_bytes(local)

        servers.append(farm.add_server())
        three = machine(tmp_path, "three", upstream, farm)
        build(three, "on three servers")
        spread = compiles(three)
        assert all(spread.get(s, 0) > 0 for s in servers) and spread["local"] == spread["fallbacks"], spread
        assert sum(spread[s] for s in servers) + spread["local"] == UNITS, spread
        assert wheel_bytes(three) == wheel_bytes(local)
        # The token is in nothing the build wrote.
        assert farm.client_token not in everything_written(two) + everything_written(three)


def test_a_server_lost_in_the_middle_and_a_scheduler_down_cost_local_compiles(tmp_path: Path) -> None:
    upstream = demo(tmp_path)
    with Farm(tmp_path / "farm") as farm:
        kept, lost = farm.add_server(), farm.add_server()
        ws = machine(tmp_path, "a", upstream, farm)
        scheduler_log = tmp_path / "farm" / "scheduler.log"

        def kill_after_some_jobs() -> None:
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline and scheduler_log.read_text().count("updated state to Complete") < 4:
                time.sleep(0.05)
            farm.stop("server11")

        killer = threading.Thread(target=kill_after_some_jobs)
        killer.start()
        build(ws, "with a server killed in the middle")
        killer.join()
        spread = compiles(ws)
        assert spread["fallbacks"] > 0 and spread.get(kept, 0) > 0, spread
        assert spread.get(kept, 0) + spread.get(lost, 0) + spread["local"] == UNITS, spread
        local_bytes = wheel_bytes(ws)

    # The farm is gone: the build still finishes, all here, and says so once.
    down = machine(tmp_path, "down", upstream, farm)
    run = None
    try:
        run = require_success(down.package(WHEEL), "with the scheduler down")
    finally:
        down.stop()
    assert "cannot be used" in farm_line(down) and farm_line(down).endswith("every unit compiles here")
    assert compiles(down)["local"] == UNITS, compiles(down)
    assert run.stderr.count(f"sccache-dist scheduler {farm.scheduler_url}") == 1, run.stderr
    assert wheel_bytes(down) == local_bytes


def test_hip_kernels_from_the_farm_are_gfx1151_code_objects_with_the_local_bytes(tmp_path: Path) -> None:
    upstreams = make_fixture_upstreams(tmp_path / "upstreams")
    repo = tmp_path / "upstreams" / "hip"
    files = {"setup.py": HIP_SETUP.encode(), "farm_hip/__init__.py": b"",
             **{f"kernels/k{i}.hip": KERNEL.format(i=i).encode() for i in range(8)}}  # fmt: skip
    sha = torch_sized.fast_import(repo, iter(files.items()), "8 kernels")

    def hip_machine(name: str, farm: Optional[Farm] = None) -> Tuple[Dict[str, bytes], Workspace]:
        ws = machine(tmp_path, name, (upstreams, repo, sha), farm)
        ws.write("farm_demo/BUILD", ws.read("farm_demo/BUILD").replace('"CC": "$ROCM_PATH/bin/clang"', '"CXX": "$ROCM_PATH/bin/clang++"'))
        build(ws, name)
        (wheel,) = ws.path("dist/farm_demo").glob("*.whl")
        with zipfile.ZipFile(wheel) as z:
            objects = {n: z.read(n) for n in z.namelist() if n.endswith(".co")}
        return objects, ws

    local, _ = hip_machine("local")
    with Farm(tmp_path / "farm") as farm:
        servers = [farm.add_server(), farm.add_server()]
        remote, ws = hip_machine("farm", farm)
    spread = compiles(ws)
    shipped = sum(spread.get(s, 0) for s in servers)
    assert shipped >= 4 and shipped + spread["local"] == 8 and spread["local"] == spread["fallbacks"], spread
    assert len(remote) == 8 and remote == local
    for name, code in remote.items():
        # An AMDGPU code object (EM_AMDGPU) for gfx1151 (e_flags' mach 0x4a), from its ELF header.
        assert code[:4] == b"\x7fELF" and struct.unpack_from("<H", code, 18)[0] == 224, name
        assert struct.unpack_from("<I", code, 48)[0] & 0xFF == 0x4A, name
