"""A build process needs no other process to have run on its machine: under remote execution
the processes that locate the toolchain and the Python (and link them into named caches) may
run on one worker and the build on another. Here the links are removed between two builds in
one pantsd, so the locating processes do not run again and the build must link them itself."""

from __future__ import annotations

import os
import re
from pathlib import Path

from e2e.workspace import Workspace, borrowed, require_success

AOT = "tests/mini/aotriton:wheel"


def test_a_build_links_its_toolchain_and_python_where_the_links_are_missing(tmp_path: Path, batch_copy: Workspace) -> None:
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    with borrowed(batch_copy, tmp_path / "upstreams") as ws:
        require_success(ws.package(AOT), "the first build")
        links = [*ws.named_caches.glob("rocm_toolchain_*/root"), *ws.named_caches.glob("rocm_python_*/root")]
        assert len(links) == 2, links
        made_by_locating = {link: os.readlink(link) for link in links}
        pantsd = sorted(p.read_text() for p in ws.root.glob(".pids/*/pantsd/pid"))
        for link in links:
            link.unlink()
        # The search path is in the build's key: the build runs again, in the same pantsd.
        ws.pants_env_extra = {"PANTS_BUILD_ISOLATION_WORKER_SEARCH_PATH": repr(["/usr", *map(str, sorted(pyenv.glob("3.*")))])}
        run = require_success(ws.package(AOT), "the build, links gone")
        assert run.built == [AOT]
        assert {link: os.readlink(link) for link in links} == made_by_locating
        log = next(ws.path("dist/tests.mini.aotriton").glob("*.build.log")).read_text()
        # The same pantsd, so no locating process ran again: the links came back from build
        # processes of this run, each linking what its key names, and saying so in its log. The
        # build waits for its chain's checks, whose metadata hook is the build's own process
        # stopped after the venv (the same script, keyed by the same search path): it runs first
        # and may link them before the build looks. Its log is kept in the named cache.
        assert sorted(p.read_text() for p in ws.root.glob(".pids/*/pantsd/pid")) == pantsd
        (hook_log,) = ws.named_caches.glob("rocm_build_logs/tests.mini.aotriton@wheel.preflight.log")  # build_process.LOG_CACHE
        logs = f"{hook_log.read_text()}\n{log}"
        said = {name: (target, version) for name, target, version in re.findall(r"(\.rocm/root|\.python/root) -> (\S+) \(([^)]*)\)", logs)}
        assert set(said) == {".rocm/root", ".python/root"}, logs[:4000]
        expected = {".rocm/root": ("/usr/lib/llvm-19", "Debian clang version 19."), ".python/root": (made_by_locating[links[1]], "CPython 3.11.")}
        for name, (target, version) in said.items():
            assert target == expected[name][0] and version.startswith(expected[name][1]), (name, target, version)
        # (The tree is the machine's checkout of the fetched pack, made by the first build and
        # shared read-only, under the patched files.)
        assert "== source tree: the fetched source (from the machine's cache) and the patched files, stacked (overlayfs), in " in log
        # So is the build venv, made once by the first build for the same Python, wheels and lock.
        assert re.search(r"^== build venv \(.*\): the machine's, stacked \(overlayfs\)$", log, re.M), log[:2000]
        # Nothing answers where it looks: the build says what it needs and where it looked.
        pantsd = sorted(p.read_text() for p in ws.root.glob(".pids/*/pantsd/pid"))
        for link in links:
            link.unlink()
        ws.pants_env_extra = {"PANTS_BUILD_ISOLATION_WORKER_SEARCH_PATH": "['/nowhere']"}
        run = ws.package(AOT)
        assert run.returncode != 0
        assert 'rocm_build: cannot build tests/mini/aotriton:wheel on this machine: nothing answers "CPython 3.11.' in run.stderr
        assert "under any of: /nowhere. Install it at one of those roots, or add its root to [build-isolation] worker_search_path." in run.stderr
