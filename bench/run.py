#!/usr/bin/env python3
"""Benchmarks: how much work the build avoids and where its time goes.

On the miniature chain and on torch-sized fixtures generated at run time (bench/torch_sized.py).

    ./pants run bench/run.py -- [--quick]    (after ./setup)

Its imports are modules of Pants' source roots (tests/ for e2e.* and mini.*, bench/,
rules/ for rocm_build.scripts.*), which `pants run` puts on the path from the repository
itself (bench/BUILD: not in a sandbox); they need nothing but the standard library.

Prints one table per question. Every figure is a count or a ratio measured in this run;
nothing here asserts a speed. Work happens under bench/out/ (ignored by Pants and git).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import zipfile
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Iterator

import torch_sized
from e2e.reapi_server import serving
from e2e.redis_server import redis_server
from e2e.workspace import Workspace, make_fixture_upstreams, require_success
from mini import make_upstreams
from rocm_build.scripts.ccache_remote import relay

REPO = Path(__file__).resolve().parent.parent

VLLM = "tests/mini/vllm:wheel"
AOT = "tests/mini/aotriton:wheel"
TABLES = ["rebuilds", "remote", "ccache", "capture"]  # the miniature chain
SCALE_TABLES = ["source", "incremental", "torchsize", "sharedccache", "bigwheel", "pulled", "farm"]  # torch-sized fixtures
CHAIN_SIZE = 4  # what the seeds' scripts rebuild every time
# Each machine here has its own build venvs and source trees (the suite's workspaces share them):
# the bench times cold builds.
OWN_CACHES: dict = {}


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def table(title: str, header: list, rows: list) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    print(f"\n## {title}\n")
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths)))
    sys.stdout.flush()


def rebuild_counts(out: Path) -> None:
    upstreams = make_fixture_upstreams(out / "upstreams")
    ws = Workspace(out / "checkout", upstreams, out / "store", out / "named", shared_caches=OWN_CACHES)
    try:
        require_success(ws.package(VLLM), "cold build")
        rows = []
        noop, noop_s = timed(lambda: require_success(ws.package(VLLM), "no-op"))
        rows.append(["no-op", len(noop.built), CHAIN_SIZE, f"{len(noop.built) / CHAIN_SIZE:.2f}"])
        patch = "tests/mini/patches/vllm/0001-report-gfx1151.patch"
        ws.write(patch, ws.read(patch).replace('"gfx1151"', '"gfx1151 bench"'))
        edit = require_success(ws.package(VLLM), "patch edit")
        rows.append(["one patch edit in vllm", len(edit.built), CHAIN_SIZE, f"{len(edit.built) / CHAIN_SIZE:.2f}"])
        # A patch that changes none of the files aotriton's wheel ships: aotriton rebuilds,
        # its payload comes out identical, and its dependents are cache hits (early cutoff).
        build = "tests/mini/aotriton/BUILD"
        ws.write(build, ws.read(build).replace('pins_file="tests/mini/pins")',
                 'pins_file="tests/mini/pins", patches=["tests/mini/patches/aotriton:notes"])'))  # fmt: skip
        ws.path("tests/mini/patches/aotriton").mkdir(parents=True, exist_ok=True)
        ws.write("tests/mini/patches/aotriton/BUILD", 'patch_set(name="notes")\n')
        ws.write("tests/mini/patches/aotriton/0001-notes.patch",
                 "--- /dev/null\n+++ b/NOTES.md\n@@ -0,0 +1 @@\n+bench\n")  # fmt: skip
        cutoff = require_success(ws.package(VLLM), "patch outside the package")
        rows.append(["aotriton patch that ships nothing new", len(cutoff.built), CHAIN_SIZE,
                     f"{len(cutoff.built) / CHAIN_SIZE:.2f}"])  # fmt: skip
        files = make_upstreams.component_files("aotriton", version="1.0.1")
        upstreams.new_commit("aotriton", {"setup.py": files["setup.py"]}, "bench: aotriton 1.0.1")
        ws.write_pins(upstreams)
        pin = require_success(ws.package(VLLM), "pin change")
        rows.append(["aotriton pin change", len(pin.built), CHAIN_SIZE, f"{len(pin.built) / CHAIN_SIZE:.2f}"])
        table("Wheel builds that ran (miniature chain of 4)",
              ["change", "builds run", "seeds' scripts", "ratio"], rows)  # fmt: skip

        times = [timed(lambda: require_success(ws.package(VLLM), "warm no-op"))[1] for _ in range(5)]
        times.sort()
        table("Warm no-op `pants package` of the mini vllm, pantsd running (5 runs)",
              ["min s", "median s", "max s"], [[f"{times[0]:.2f}", f"{times[2]:.2f}", f"{times[-1]:.2f}"]])  # fmt: skip
    finally:
        ws.stop()


def loopback_transfer_seconds(nbytes: int) -> float:
    """Time to push `nbytes` through a loopback TCP socket: the floor for any cache download."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    chunk = b"\0" * (1 << 20)

    def sink() -> None:
        conn, _ = server.accept()
        while conn.recv(1 << 20):
            pass
        conn.close()

    thread = threading.Thread(target=sink)
    thread.start()
    start = time.perf_counter()
    with socket.create_connection(server.getsockname()) as client:
        sent = 0
        while sent < nbytes:
            client.sendall(chunk[: min(len(chunk), nbytes - sent)])
            sent += min(len(chunk), nbytes - sent)
    thread.join()
    server.close()
    return time.perf_counter() - start


def remote_cache(out: Path) -> None:
    with buildgrid(out) as port:
        options = ["--pants-config-files=pants.remote-cache.toml", f"--remote-store-address=grpc://127.0.0.1:{port}"]
        upstreams = make_fixture_upstreams(out / "upstreams")
        a = Workspace(out / "a" / "checkout", upstreams, out / "a" / "store", out / "a" / "named", shared_caches=OWN_CACHES)
        b = Workspace(out / "b" / "checkout", upstreams, out / "b" / "store", out / "b" / "named", shared_caches=OWN_CACHES)
        try:
            require_success(a.pants("list", "tests/mini::"), "machine A pantsd")
            _, cold = timed(lambda: require_success(a.package(VLLM, extra_options=options), "machine A"))
            # Warm B's pantsd and scheduler first, so the figure is the build, not their start.
            require_success(b.pants("list", "tests/mini::"), "machine B pantsd")
            run, seconds = timed(lambda: require_success(b.package(VLLM, extra_options=options), "machine B"))
        finally:
            a.stop()
            b.stop()
        nbytes = sum(p.stat().st_size for p in (out / "cas").rglob("*") if p.is_file())
        raw = loopback_transfer_seconds(nbytes)
        table("Second machine, empty local store, warm remote cache (BuildGrid on loopback)",
              ["builds run", "wall s", "machine A cold s", "B / A", "CAS bytes", "raw loopback transfer s", "wall / raw"],
              [[len(run.built), f"{seconds:.2f}", f"{cold:.2f}", f"{seconds / cold:.2f}", nbytes,
                f"{raw:.4f}", f"{seconds / raw:.0f}x"]])  # fmt: skip


C_FILE = """\
/* bench file {i}: enough arithmetic for the optimiser to chew on. */
static double poly_{i}(double x, int n) {{
  double acc = 0;
  for (int k = 0; k < n; k++) acc += {i} * x * k / (k + 1.0);
  return acc;
}}
{more}
double entry_{i}(double x) {{ return poly_{i}(x, {i} + 10){calls}; }}
"""


def many_files_component(n: int, variant: int = 0) -> dict:
    files = {}
    for i in range(n):
        helpers = "\n".join(
            f"static double h_{i}_{j}(double x) {{ double s = 0; for (int k = 0; k < {j + 3}; k++) s += x / (k + {j + 1}.0); return s; }}"
            for j in range(150)
        )
        calls = "".join(f" + h_{i}_{j}(x)" for j in range(150))
        files[f"csrc/f{i}.c"] = C_FILE.format(i=i, more=helpers, calls=calls) + (f"/* v{variant} */\n" if i == 0 else "")
    sources = ", ".join(f'"csrc/f{i}.c"' for i in range(n))
    files["setup.py"] = (
        "from setuptools import Extension, setup\n"
        f"setup(name='many', version='1.0', ext_modules=[Extension('many', [{sources}], extra_compile_args=['-O2'])])\n"
    )
    return files


def compiler_cache(out: Path, n_files: int) -> None:
    upstreams = make_fixture_upstreams(out / "upstreams")
    repo = out / "upstreams" / "many"
    repo.mkdir()
    make_upstreams.git(repo, "init", "-q", "-b", "main")
    first = make_upstreams.commit(repo, many_files_component(n_files), "50 files")
    ws = Workspace(out / "checkout", upstreams, out / "store", out / "named", shared_caches=OWN_CACHES)

    def pin(sha: str) -> None:
        ws.pin_extra("many", repo, sha)

    ws.path("bench_many").mkdir()
    ws.write("bench_many/BUILD", (
        'upstream_repo(name="src", pin="many", pins_file="tests/mini/pins")\n'
        'rocm_wheel(name="wheel", source=":src", toolchain="tests/mini:llvm", gpu_targets=["gfx1151"], env={ENV})\n'
        'rocm_wheel(name="nocache", source=":src", toolchain="tests/mini:llvm", gpu_targets=["gfx1151"], '
        'env={"CCACHE_DISABLE": "1"})\n'
    ).replace("{ENV}", "{}"))  # fmt: skip
    try:
        pin(first)
        require_success(ws.pants("--version"), "pantsd")
        _, clean = timed(lambda: require_success(ws.package("bench_many:wheel"), "clean"))
        second = make_upstreams.commit(repo, {"csrc/f0.c": many_files_component(n_files, 1)["csrc/f0.c"]}, "one file")
        pin(second)
        _, warm = timed(lambda: require_success(ws.package("bench_many:wheel"), "one-file change, ccache"))
        _, nocache = timed(lambda: require_success(ws.package("bench_many:nocache"), "one-file change, no ccache"))
    finally:
        ws.stop()
    table(f"Compiler cache: {n_files} C files, one file changed (named cache per component and arch)",
          ["clean build s", "one-file rebuild with ccache s", "same without ccache s", "fraction of clean"],
          [[f"{clean:.2f}", f"{warm:.2f}", f"{nocache:.2f}", f"{warm / clean:.2f}"]])  # fmt: skip


def source_capture(out: Path, sizes: list) -> None:
    upstreams = make_fixture_upstreams(out / "upstreams")
    ws = Workspace(out / "checkout", upstreams, out / "store", out / "named", shared_caches=OWN_CACHES)
    rows = []
    try:
        require_success(ws.pants("--version"), "pantsd")
        for n in sizes:
            repo = out / "upstreams" / f"gen{n}"
            repo.mkdir()
            make_upstreams.git(repo, "init", "-q", "-b", "main")
            for i in range(n):
                path = repo / f"d{i // 500}" / f"f{i}.txt"
                path.parent.mkdir(exist_ok=True)
                path.write_text(f"file {i}\n")
            (repo / "setup.py").write_text("ARCHS = ['gfx90a']\n")
            sha = make_upstreams.commit(repo, {}, f"{n} files")
            ws.pin_extra(f"gen{n}", repo, sha)
            ws.path(f"bench_gen{n}").mkdir(exist_ok=True)
            ws.write(f"bench_gen{n}/edit.edit.toml", '[[edit]]\npath = "setup.py"\npattern = "gfx90a\'"\nreplace = "gfx90a\', \'gfx1151\'"\n')
            ws.write(f"bench_gen{n}/BUILD", (
                f'patch_set(name="p", sources=["edit.edit.toml"])\n'
                f'upstream_repo(name="src", pin="gen{n}", pins_file="tests/mini/pins", patches=[":p"])\n'
            ))  # fmt: skip
            _, seconds = timed(lambda: require_success(ws.package(f"bench_gen{n}:src"), f"{n} files"))
            rows.append([n, f"{seconds:.2f}", f"{seconds / n * 1e6:.0f}"])
    finally:
        ws.stop()
    base = float(rows[0][2])
    for row in rows:
        row.append(f"{float(row[2]) / base:.2f}")
    table("Source capture: fetch + patch + tarball of a generated upstream",
          ["files", "wall s", "µs per file", "per-file vs smallest"], rows)  # fmt: skip


# Torch scale -----------------------------------------------------------------------------

_EVENT = re.compile(r"^(\d\d):(\d\d):(\d\d\.\d+) \[\w+\] (Starting|Completed): (.*)$", re.M)
_PHASES = re.compile(r"^== phase times: (.*)$", re.M)


def clock(h: str, m: str, sec: str) -> float:
    return int(h) * 3600 + int(m) * 60 + float(sec)


def process_seconds(stderr: str) -> dict:
    """Wall time of each process Pants ran, from its `-ldebug` Starting/Completed lines."""
    started, took = {}, {}
    for h, m, sec, what, desc in _EVENT.findall(stderr):
        t = clock(h, m, sec)
        if what == "Starting":
            started[desc] = t
        elif desc in started:
            took[desc] = took.get(desc, 0.0) + t - started.pop(desc)
    return took


def seconds_of(took: dict, prefix: str) -> float:
    return sum(v for k, v in took.items() if k.startswith(prefix))


def build_log_phases(ws: Workspace, target_dir: str) -> dict:
    """The phase times the build printed at the end of its log (dist/<dir>/*.build.log)."""
    log = next(ws.path(f"dist/{target_dir}").glob("*.build.log")).read_text()
    found = _PHASES.findall(log)[-1]
    return {name: float(secs) for name, secs in re.findall(r"([a-z -]+?) ([\d.]+) s(?:, |$)", found)}


def big_upstream(out: Path, n_files: int, n_tus: int, library_bytes: int = 0, cmake: bool = False):
    upstreams = make_fixture_upstreams(out / "upstreams")
    repo = out / "upstreams" / "big"
    files = torch_sized.big_tree_files(n_files, n_tus, library_bytes=library_bytes, cmake=cmake)
    sha = torch_sized.fast_import(repo, files, f"{n_files} files")
    return upstreams, repo, sha


def big_workspace(out: Path, n_files: int, n_tus: int, upstream=None, env=None):
    """A machine (checkout, store, named caches under `out`) with the big upstream pinned."""
    upstreams, repo, sha = upstream or big_upstream(out, n_files, n_tus)
    ws = Workspace(out / "checkout", upstreams, out / "store", out / "named", shared_caches=OWN_CACHES)
    ws.pants_env_extra = env or {}
    ws.pin_extra("big", repo, sha)
    ws.path("bench_big").mkdir()
    ws.write("bench_big/arch.edit.toml", '[[edit]]\npath = "big_torch/__init__.py"\npattern = "gfx90a\'"\nreplace = "gfx90a\', \'gfx1151\'"\n')
    ws.write("bench_big/BUILD", (
        'patch_set(name="p", sources=["*.edit.toml"])\n'
        'upstream_repo(name="src", pin="big", pins_file="tests/mini/pins", patches=[":p"])\n'
        # Linked by lld: GNU ld took 3.3 s for the torch-sized library where lld took 1.4 s.
        'rocm_wheel(name="wheel", source=":src", toolchain="tests/mini:llvm", gpu_targets=["gfx1151"], env={"LDFLAGS": "-fuse-ld=lld"})\n'
        # The same tree, nothing compiled: what is left is the source stage and fixed costs.
        'rocm_wheel(name="probe", source=":src", toolchain="tests/mini:llvm", gpu_targets=["gfx1151"], '
        'env={"BIG_TORCH_NO_EXT": "1"})\n'
    ))  # fmt: skip
    require_success(ws.pants("--version"), "pantsd")
    return ws, repo


def source_stage(out: Path, n_files: int) -> None:
    ws, repo = big_workspace(out, n_files, 2000)
    try:
        run, wall = timed(lambda: require_success(ws.pants("-ldebug", "package", "bench_big:probe", timeout=3600), "probe"))
        phases = build_log_phases(ws, "bench_big.probe")
    finally:
        ws.stop()
    (out / "probe.stderr").write_text(run.stderr)  # -ldebug: every process, kept with --keep
    took = process_seconds(run.stderr)
    # The patch step: checking out the files the patches touch, and applying them.
    fetch, patch = seconds_of(took, "Fetching big"), seconds_of(took, "Checking out") + seconds_of(took, "Applying")
    # The build process's time less what its script measured: materializing the sandbox and
    # capturing outputs (the tree is in the machine's cache by then: the preflight made it).
    materialize = seconds_of(took, "Building rocm_wheel bench_big:probe") - sum(phases.values())
    # The preflight runs first, in the build's own sandbox: the tree is checked out there.
    preflight_log = (ws.named_caches / "rocm_build_logs" / "bench_big@probe.preflight.log").read_text()
    found = re.search(r"^== source tree: .*checked out of the pack.*, in ([\d.]+) s$", preflight_log, re.M)
    checkout = float(found.group(1)) if found else 0.0
    # This VM's disk swings within minutes (docs/performance.md): the clone's median of three.
    clones = []
    for i in range(3):
        clones.append(timed(lambda: subprocess.run(["git", "-c", "protocol.file.allow=always", "clone", "-q", "--depth", "1",
                                                    f"file://{repo}", str(out / f"clone{i}")], check=True))[1])  # fmt: skip
    clone = sorted(clones)[1]
    ours = fetch + patch + checkout + materialize
    table(f"Source stage of a {n_files}-file upstream: fetch + patch + checkout + materialize in the build sandbox",
          ["fetch s", "patch s", "checkout s (preflight)", "materialize s", "ours s", "git clone --depth 1 s (median of 3)",
           "ours / clone", "goal", "probe wall s"],
          [[f"{fetch:.1f}", f"{patch:.1f}", f"{checkout:.1f}", f"{materialize:.1f}", f"{ours:.1f}",
            f"{clone:.1f} ({', '.join(f'{c:.1f}' for c in clones)})", f"{ours / clone:.2f}", "<= 1.0", f"{wall:.1f}"]])  # fmt: skip


ONE_TU_EDIT = '[[edit]]\npath = "csrc/tu0.c"\npattern = "return acc"\nreplace = "return 2 * acc"\n'


_WHEEL_STEP = re.compile(r"^== wheel step, last written: (.*), of ([\d.]+) s$", re.M)


def wheel_step_split(ws: Workspace, target_dir: str) -> dict:
    """When the wheel command's objects, libraries and wheel were last written (build_wheel.sh)."""
    log = next(ws.path(f"dist/{target_dir}").glob("*.build.log")).read_text()
    found = _WHEEL_STEP.findall(log)[-1]
    marks = {kind: float(at) for kind, at in re.findall(r"(\w+) \+([\d.]+) s", found[0])}
    return {**marks, "end": float(found[1])}


def one_file_split(run_stderr: str, wall: float, ws: Workspace) -> str:
    """Where a one-file run's wall time went: Pants' processes, the build's phases and, within
    the wheel command, compiles (until the last object), link (until the last library) and
    archive (until the wheel)."""
    took, phases, step = process_seconds(run_stderr), build_log_phases(ws, "bench_big"), wheel_step_split(ws, "bench_big")
    build = seconds_of(took, "Building rocm_wheel bench_big:wheel")
    compiles = step.get("objects", 0.0)
    link = step.get("libraries", compiles) - compiles
    archive = step["end"] - step.get("libraries", compiles)
    parts = [
        ("fetch", seconds_of(took, "Fetching big")),
        ("patch", seconds_of(took, "Applying")),
        ("preflight", seconds_of(took, "Running the metadata hook of bench_big")),
        ("build: set-up + venv", phases["set-up"] + phases["venv and dependencies"]),
        ("compiles", compiles), ("link", link), ("archive", archive), ("labelling", phases["labelling"]),
        ("build: sandbox + capture", build - sum(phases.values())),
        # auditwheel, the build-info rewrite and dist/ (their workunits are not in the log)
        ("after the build", log_time(run_stderr, "Wrote dist/bench_big") - log_time(run_stderr, "Completed: Building rocm_wheel")),
    ]  # fmt: skip
    parts.append(("Pants' own and dist/", wall - sum(v for _, v in parts)))
    return ", ".join(f"{name} {v:.1f}" for name, v in parts)


def library_bytes_in(wheel: Path) -> int:
    with zipfile.ZipFile(wheel) as archive:
        return sum(i.file_size for i in archive.infolist() if re.search(r"\.so(\.|$)", i.filename))


def kept_dir_figures(ws: Workspace) -> str:
    """What the build's kept build directory said: how much of the tree changed, what it compiled."""
    log = next(ws.path("dist/bench_big").glob("*.build.log")).read_text()
    return "; ".join(re.findall(r"^== kept build directory build/: (.*)$", log, re.M))


def incremental(out: Path, n_files: int, n_tus: int, library_bytes: int = 0, goal: str = "<= 0.03") -> None:
    # Built as PyTorch is: setup.py runs CMake + ninja in build/, which is kept between builds.
    ws, _ = big_workspace(out, n_files, n_tus, big_upstream(out, n_files, n_tus, library_bytes, cmake=True))
    package = lambda what, *opts: require_success(ws.pants("-ldebug", *opts, "package", "bench_big:wheel", timeout=7200), what)  # noqa: E731
    try:
        clean_run, clean = timed(lambda: package("clean"))
        clean_split = one_file_split(clean_run.stderr, clean, ws)
        clean_wheel = ws.dist_wheels()["bench_big"]
        clean_bytes, lib_bytes = clean_wheel.read_bytes(), library_bytes_in(clean_wheel)
        # One translation unit changed, by a patch of ours: the fetch is a cache hit, the
        # patch and the build run again, ccache (the named cache) has the other objects.
        ws.write("bench_big/tu0.edit.toml", ONE_TU_EDIT)
        run, one = timed(lambda: package("one file"))
        split, kept = one_file_split(run.stderr, one, ws), kept_dir_figures(ws)
        # How often Pants started the edited wheel's build (once, or once more after the checks).
        starts = len(re.findall(r"Starting: Building rocm_wheel bench_big:wheel$", run.stderr, re.M))
        # The floor under any edit: the same command again, nothing changed, pantsd warm
        # (the launcher, Pants' client and its memoized graph, dist/ compared, not written).
        _, floor = timed(lambda: package("nothing changed"))
        # The edit undone, after a restart: Pants' own start, then the no-op rebuild.
        ws.path("bench_big/tu0.edit.toml").unlink()
        ws.stop()
        _, start = timed(lambda: require_success(ws.pants("--version"), "pantsd"))
        ws.stop()
        _, noop = timed(lambda: package("no-op after a restart"))
        # The clean build's inputs again, built incrementally (warm kept directory, compiler and
        # wheel-chunk caches; Pants' own cache off, in a fresh pantsd): the same bytes.
        ws.stop()
        package("again, incrementally", "--no-local-cache")
        same = ws.dist_wheels()["bench_big"].read_bytes() == clean_bytes
    finally:
        ws.stop()
    (out / "one.stderr").write_text(run.stderr)  # -ldebug: every process, kept with --keep
    what = f"{n_tus} translation units in one shared library of {lib_bytes / (1 << 30):.2f} GiB" if library_bytes else f"{n_tus} translation units in one shared library"
    table(f"Incremental rebuild: {what} (CMake + ninja), one changed (kept build directory)",
          ["clean s", "one-file s", "fraction", "goal", "build starts", "nothing changed s (floor)", "wheel bytes", "one-file run: where the time went (s)", "kept build directory",
           "no-op after a restart s (Pants' start s)", "goal", "incremental wheel = clean wheel"],
          [[f"{clean:.1f}", f"{one:.1f}", f"{one / clean:.3f}", goal, starts, f"{floor:.1f} ({floor / clean:.3f})", len(clean_bytes), split, kept,
            f"{noop:.1f} ({start:.1f}): +{noop - start:.1f}", "<= +2 s", "yes" if same else "NO"]])  # fmt: skip
    print(f"(the clean build: {clean_split})")


def cpu_seconds(pids=None) -> float:
    """CPU seconds used so far: by the whole machine (/proc/stat), or by processes `pids` and
    the children they reaped (a build server's compiles)."""
    tick = os.sysconf("SC_CLK_TCK")
    if pids is None:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
        return (sum(map(int, fields)) - int(fields[3]) - int(fields[4])) / tick  # less idle and iowait
    total = 0
    for pid in pids:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += sum(int(x) for x in stat[11:15])  # utime stime cutime cstime
    return total / tick


def farm_builds(out: Path, n_tus: int) -> None:
    """The n-TU component built clean with sccache: here alone, then on a farm of 1, 2 and 3
    build servers, each a test host of its own on this machine (tests/e2e/sccache_farm.py).
    On one machine the farm shares its cores, so wall time cannot fall below the cores' worth;
    what carries to real farms is the work each server took and the client's own CPU (the
    machine's CPU during the build less the servers')."""
    from e2e.sccache_farm import Farm

    upstream = big_upstream(out, n_tus + 3, n_tus)
    fields = 'env={"CC": "$ROCM_PATH/bin/clang", "MAX_JOBS": "8"}'

    def build(name: str, farm=None):
        env = {"PANTS_COMPILER_CACHE_LAUNCHER": "sccache"}
        if farm:
            env.update({"PANTS_SCCACHE_DIST_SCHEDULER_URL": farm.scheduler_url,
                        "PANTS_SCCACHE_DIST_TOKEN_FILE": str(farm.token_file())})
        ws = big_workspace(out / name, n_tus + 3, n_tus, upstream, env)[0]
        ws.write("bench_big/BUILD", ws.read("bench_big/BUILD").replace('gpu_targets=["gfx1151"])\n', f'gpu_targets=["gfx1151"], {fields})\n', 1))
        servers = [p.pid for n, p in farm.processes.items() if n.startswith("server")] if farm else []
        before = (cpu_seconds(), cpu_seconds(servers))
        try:
            _, wall = timed(lambda: require_success(ws.package("bench_big:wheel"), name))
        finally:
            ws.stop()
        machine, on_servers = cpu_seconds() - before[0], cpu_seconds(servers) - before[1]
        log = next(ws.path("dist/bench_big").glob("*.build.log")).read_text()
        where = dict(re.findall(r"(\S+)=(\d+)", (re.findall(r"^== sccache-dist compiles: (.*)$", log, re.M) or [""])[-1]))
        return wall, where, machine - on_servers, on_servers

    rows = []
    local_wall, _, local_cpu, _ = build("local")
    rows.append(["0 (here)", f"{local_wall:.1f}", "1.00", "-", f"{n_tus}", f"{local_cpu:.0f}", "0", f"{local_cpu / n_tus * 1000:.0f}"])
    with Farm(out / "farm") as farm:
        for n in (1, 2, 3):
            farm.add_server()
            wall, where, client, servers = build(f"farm{n}", farm)
            shipped = " + ".join(v for k, v in sorted(where.items()) if k not in ("local", "fallbacks"))
            rows.append([str(n), f"{wall:.1f}", f"{local_wall / wall:.2f}", shipped, where.get("local", "?"),
                         f"{client:.0f}", f"{servers:.0f}", f"{client / n_tus * 1000:.0f}"])
    table(f"Distributed compiles (sccache-dist), {n_tus} translation units, clean, on {os.cpu_count()} cores",
          ["servers", "wall s", "speedup", "compiles per server", "compiled here", "client CPU s", "servers' CPU s",
           "client CPU ms/TU"], rows)


def ccache_figures(ws: Workspace) -> str:
    log = next(ws.path("dist/bench_big").glob("*.build.log")).read_text()
    return re.findall(r"^== ccache: (.*)$", log, re.M)[-1].strip()


def shared_ccache(out: Path, n_files: int, n_tus: int) -> None:
    """Machine A builds clean with ccache's remote storage on a Redis server. Machine B has
    built before (the same tree without compiling, and the mini aotriton, so its store has
    the tree and the tools) but its compiler cache for the component is empty; it builds the
    component with one unit changed."""
    upstream = big_upstream(out, n_files, n_tus, cmake=True)
    with redis_server(out / "redis") as port:
        env = {"PANTS_COMPILER_CACHE_CCACHE_REMOTE_STORAGE": f"redis://127.0.0.1:{port}"}
        a = big_workspace(out / "a", n_files, n_tus, upstream, env)[0]
        try:
            _, clean = timed(lambda: require_success(a.package("bench_big:wheel"), "machine a, clean"))
        finally:
            a.stop()
        b = big_workspace(out / "b", n_files, n_tus, upstream, env)[0]
        try:
            # Its store has the tree and the tools a platform wheel needs (auditwheel's venv).
            # With the options of the measured run: other options reinitialize Pants' scheduler,
            # which drops the tree it materialized for the warm-up.
            require_success(b.pants("-ldebug", "package", "bench_big:probe", "tests/mini/aotriton:wheel", timeout=7200),
                            "machine b, warm-up")  # fmt: skip
            b.write("bench_big/tu0.edit.toml", ONE_TU_EDIT)
            run, second = timed(lambda: require_success(b.pants("-ldebug", "package", "bench_big:wheel", timeout=7200), "machine b"))
        finally:
            b.stop()
    (out / "b.stderr").write_text(run.stderr)  # -ldebug: every process, kept with --keep
    took = process_seconds(run.stderr)
    table(f"Compiler cache shared between machines: {n_tus} units (CMake + ninja), one changed, on another machine whose compiler cache and build directory are empty (Redis on 127.0.0.1)",
          ["A clean s", "B one-file s", "fraction", "goal", "B fetch / patch / build process s", "B ccache", "B kept build directory"],
          [[f"{clean:.1f}", f"{second:.1f}", f"{second / clean:.3f}", "<= 0.12",
            f"{seconds_of(took, 'Fetching big'):.1f} / {seconds_of(took, 'Applying'):.1f} / {seconds_of(took, 'Building rocm_wheel'):.1f}",
            ccache_figures(b), kept_dir_figures(b)]])  # fmt: skip


class CountingProxy:
    """A TCP proxy on 127.0.0.1 counting the bytes the server sends: what a client pulls."""

    def __init__(self, target_port: int) -> None:
        self.pulled = 0
        self._lock = threading.Lock()
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self._target = target_port
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self._target))
            relay(client, server, self._count)

    def _count(self, n: int) -> None:
        with self._lock:
            self.pulled += n

    def close(self) -> None:
        self._listener.close()


@contextmanager
def buildgrid(out: Path) -> Iterator[int]:
    """A BuildGrid cache server on loopback storing under out/cas (e2e's `serving`): its port."""
    with serving(out) as (address, _):
        yield int(address.rsplit(":", 1)[1])


def big_wheel_remote(out: Path, gib: float) -> None:
    """Machine A builds a GB wheel against BuildGrid. Two second machines with empty stores
    then package it from the cache: B through a proxy that counts the bytes the server
    sends, C straight to the server for the wall time (the proxy, Python, slows the stream)."""
    with buildgrid(out) as port, closing(CountingProxy(port)) as proxy:
        upstreams = make_fixture_upstreams(out / "upstreams")
        repo = out / "upstreams" / "bigwheel"
        sha = torch_sized.fast_import(repo, torch_sized.big_wheel_files(gib), "big wheel")
        machines = {}
        for name in ("a", "b", "c"):
            ws = machines[name] = Workspace(out / name / "checkout", upstreams, out / name / "store", out / name / "named", shared_caches=OWN_CACHES)
            ws.pin_extra("bigwheel", repo, sha)
            ws.path("bench_gb").mkdir()
            ws.write("bench_gb/BUILD", 'upstream_repo(name="src", pin="bigwheel", pins_file="tests/mini/pins")\n'
                     # Linked by lld: GNU ld took 3.3 s for the torch-sized library where lld took 1.4 s.
        'rocm_wheel(name="wheel", source=":src", toolchain="tests/mini:llvm", gpu_targets=["gfx1151"], env={"LDFLAGS": "-fuse-ld=lld"})\n')  # fmt: skip
        a, b, c = machines["a"], machines["b"], machines["c"]

        def options(server_port: int) -> list:
            return ["-ldebug", "--pants-config-files=pants.remote-cache.toml", f"--remote-store-address=grpc://127.0.0.1:{server_port}"]

        try:
            require_success(a.pants("--version"), "machine A pantsd")
            _, cold = timed(lambda: require_success(a.package("bench_gb:wheel", extra_options=options(port)), "A"))
            # Each second machine's Pants starts (and its scheduler) before the figure; then only the package.
            require_success(b.pants("list", "bench_gb:", extra_options=options(proxy.port)), "machine B start")
            proxy.pulled = 0
            counted = require_success(b.package("bench_gb:wheel", extra_options=options(proxy.port)), "B")
            _, startup = timed(lambda: require_success(c.pants("list", "bench_gb:", extra_options=options(port)), "machine C start"))
            run, warm = timed(lambda: require_success(c.package("bench_gb:wheel", extra_options=options(port)), "C"))
        finally:
            for ws in machines.values():
                ws.stop()
        written = sum(p.stat().st_size for p in c.path("dist/bench_gb").glob("*.whl"))
        raw = loopback_transfer_seconds(proxy.pulled)
        table(f"Second machine, warm remote cache, a {written / 2**30:.2f} GiB wheel (BuildGrid on loopback)",
              ["builds run (B / C)", "A cold s", "C s", "C Pants start s", "B pulled bytes", "dist/ wheel bytes", "pulled / written",
               "goal", "raw transfer s", "C / (start + 2 x raw)", "goal"],
              [[f"{len(counted.built)} / {len(run.built)}", f"{cold:.1f}", f"{warm:.1f}", f"{startup:.1f}", proxy.pulled, written,
                f"{proxy.pulled / written:.3f}", "<= 1.2", f"{raw:.2f}", f"{warm / (startup + 2 * raw):.2f}", "<= 1"]])  # fmt: skip
        rules, outputs = package_split(run.stderr)
        print(f"(C's package: {rules:.1f} s to its cache hits, then {outputs:.1f} s downloading the wheel and writing dist/)")


def disk_bytes(root: Path) -> int:
    """What a directory takes on disk (LMDB's files are sparse: their size is not their use)."""
    return sum(p.stat().st_blocks * 512 for p in root.rglob("*") if p.is_file())


def pack_bytes(out: Path, repo: Path, sha: str) -> int:
    """The size of the git pack a fetch of `sha` makes (scripts/source_pack.py): the source's cost."""
    out.mkdir()
    env = {"PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
    subprocess.run([sys.executable, str(REPO / "rules/rocm_build/scripts/source_pack.py"), "fetch", f"file://{repo}", sha, "0", "source"],
                   cwd=out, env=env, check=True)  # fmt: skip
    return (out / "source" / "objects.pack").stat().st_size


def pulled_per_wheel_byte(out: Path, n_files: int) -> None:
    """Machine A builds a small wheel from a big tree against BuildGrid; machine B packages it
    through a proxy that counts what the server sends. Every process is a cache hit on B, so
    what it pulls beyond the wheel is what its checks read. B first packages the mini aotriton
    from the cache: what any package brings (Pants' tools, the build venv's bootstrap wheels
    from PyPI, ~3 MB) is in its store before the figure, which is then the big tree's cost."""
    with buildgrid(out) as port, closing(CountingProxy(port)) as proxy:
        upstreams = make_fixture_upstreams(out / "upstreams")
        repo = out / "upstreams" / "tiny"
        sha = torch_sized.fast_import(repo, torch_sized.big_tree_tiny_wheel_files(n_files), f"{n_files} files")
        tree = sum(len(content) for _, content in torch_sized.big_tree_tiny_wheel_files(n_files))
        pack = pack_bytes(out / "pack", repo, sha)
        machines = {}
        for name in ("a", "b"):
            ws = machines[name] = Workspace(out / name / "checkout", upstreams, out / name / "store", out / name / "named", shared_caches=OWN_CACHES)
            ws.pin_extra("tiny", repo, sha)
            ws.path("bench_tiny").mkdir()
            # A patch, as every real component has: the patch step reads the tree too.
            ws.write("bench_tiny/arch.edit.toml", '[[edit]]\npath = "tiny_wheel/__init__.py"\npattern = "gfx90a\'"\nreplace = "gfx90a\', \'gfx942\'"\n')
            ws.write("bench_tiny/BUILD", 'patch_set(name="p", sources=["*.edit.toml"])\n'
                     'upstream_repo(name="src", pin="tiny", pins_file="tests/mini/pins", patches=[":p"])\n'
                     # Linked by lld: GNU ld took 3.3 s for the torch-sized library where lld took 1.4 s.
        'rocm_wheel(name="wheel", source=":src", toolchain="tests/mini:llvm", gpu_targets=["gfx1151"], env={"LDFLAGS": "-fuse-ld=lld"})\n')  # fmt: skip
        a, b = machines["a"], machines["b"]
        # B is another user too: its own HOME, so its own Pants bootstrap (as another machine's).
        home = out / "b" / "home"
        b.pants_env_extra = {"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"), "ROCM_PANTS_CACHE": str(home / ".cache" / "rocm-pants")}

        def options(server_port: int) -> list:
            return ["-ldebug", "--pants-config-files=pants.remote-cache.toml", f"--remote-store-address=grpc://127.0.0.1:{server_port}"]

        try:
            require_success(a.package("bench_tiny:wheel", AOT, extra_options=options(port)), "machine A")
            require_success(b.package(AOT, extra_options=options(proxy.port)), "machine B, warm-up")
            before, proxy.pulled = disk_bytes(b.store), 0
            run = require_success(b.package("bench_tiny:wheel", extra_options=options(proxy.port)), "machine B")
            grew, pulled = disk_bytes(b.store) - before, proxy.pulled
        finally:
            for ws in machines.values():
                ws.stop()
        (out / "b.stderr").write_text(run.stderr)  # -ldebug: every process, kept with --keep
        written = b.dist_wheels()["bench_tiny"].stat().st_size
        table(f"Second machine, warm remote cache, a {n_files}-file tree and a small wheel: what it pulls (BuildGrid on loopback)",
              ["builds run", "tree bytes", "pack bytes", "dist/ wheel bytes", "B pulled bytes", "bytes pulled per wheel byte",
               "B store growth bytes (after its warm-up)", "store growth / pack", "goal"],
              [[len(run.built), tree, pack, written, pulled, f"{pulled / written:.1f}", grew, f"{grew / pack:.3f}", "< 0.10"]])  # fmt: skip


_STAMP = re.compile(r"^(\d\d):(\d\d):(\d\d\.\d+) ")


def log_time(stderr: str, text: str = "") -> float:
    """The time of day, in seconds, of the first log line holding `text` (any line without)."""
    for line in stderr.splitlines():
        stamp = _STAMP.match(line)
        if stamp and text in line:
            return clock(*stamp.groups())
    raise AssertionError(f"no `{text}` in the log")


def package_split(stderr: str) -> tuple:
    """A package run's time up to the wheel build's cache hit, and from there until dist/ is
    written: with a remote hit the second part is the download."""
    begin, hit = log_time(stderr), log_time(stderr, "Completed: Building rocm_wheel")
    return hit - begin, log_time(stderr, "Wrote dist/") - hit


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller trees (for a smoke run)")
    parser.add_argument("--keep", action="store_true", help="keep bench/out for inspection")
    parser.add_argument("--only", choices=[*TABLES, *SCALE_TABLES], nargs="+")
    args = parser.parse_args()
    os.chdir(REPO)
    out = REPO / "bench" / "out"
    shutil.rmtree(out, ignore_errors=True)
    print(f"# rocm-pants benchmarks ({os.cpu_count()} cores, {time.strftime('%Y-%m-%d')})")
    chosen = args.only or [*TABLES, *SCALE_TABLES]
    if "rebuilds" in chosen:
        rebuild_counts(out / "rebuilds")
    if "remote" in chosen:
        remote_cache(out / "remote")
    if "ccache" in chosen:
        compiler_cache(out / "ccache", 10 if args.quick else 50)
    if "capture" in chosen:
        source_capture(out / "capture", [500, 2000, 5000] if args.quick else [5000, 20000, 50000])
    # Torch scale: --quick keeps each figure's shape on smaller fixtures.
    if "source" in chosen:
        source_stage(out / "source", 10_000 if args.quick else 100_000)
    if "incremental" in chosen:
        incremental(out / "incremental", 10_000 if args.quick else 100_000, 200 if args.quick else 2000)
    if "torchsize" in chosen:
        incremental(out / "torchsize", 10_000 if args.quick else 100_000, 200 if args.quick else 2000,
                     (1 << 27) if args.quick else (1 << 30), "<= 0.15")  # fmt: skip
    if "sharedccache" in chosen:
        shared_ccache(out / "sharedccache", 10_000 if args.quick else 100_000, 200 if args.quick else 2000)
    if "bigwheel" in chosen:
        big_wheel_remote(out / "bigwheel", 0.125 if args.quick else 1.0)
    if "pulled" in chosen:
        pulled_per_wheel_byte(out / "pulled", 5_000 if args.quick else 20_000)
    if "farm" in chosen:
        farm_builds(out / "farm", 200 if args.quick else 2000)
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
