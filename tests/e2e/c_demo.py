"""A C component of twelve translation units, pinned from a local git repository, for the
compiler-cache tests (ccache_remote_test, sccache_test): each machine a checkout of its own."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict

from e2e.workspace import Workspace, make_fixture_upstreams
from mini import make_upstreams

UNITS = 12
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
    ws.write("ccache_demo/BUILD", 'upstream_repo(name="src", pin="demo", pins_file="tests/mini/pins")\n'
             'rocm_wheel(name="wheel", source=":src", toolchain="tests/mini:llvm", gpu_targets=["gfx1151"]' + fields + ')\n')  # fmt: skip
    return remote_storage(ws, address)


def remote_storage(ws: Workspace, address: str) -> Workspace:
    """The compiler cache's remote storage of `ws`'s builds ("" none), kept beside its other variables."""
    ws.pants_env_extra = {**ws.pants_env_extra, "PANTS_COMPILER_CACHE_CCACHE_REMOTE_STORAGE": address}
    return ws


def demo_upstream(tmp_path: Path):
    upstreams = make_fixture_upstreams(tmp_path / "upstreams")
    repo = tmp_path / "upstreams" / "demo"
    repo.mkdir()
    make_upstreams.git(repo, "init", "-q", "-b", "main")
    return upstreams, repo, make_upstreams.commit(repo, c_component(0), "12 units")


def launcher_stats(ws: Workspace, launcher: str) -> Dict[str, int]:
    """The counts on the build log's `== ccache: ...` or `== sccache: ...` line."""
    log = next(ws.path("dist/ccache_demo").glob("*.build.log")).read_text()
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", re.findall(rf"^== {launcher}: (.*)$", log, re.M)[-1])}


def everything_written(ws: Workspace) -> str:
    """What the builds left in dist/ besides the wheels: logs, build info, the install set."""
    return "".join(p.read_text(errors="replace") for p in ws.path("dist").rglob("*") if p.is_file() and p.suffix != ".whl")
