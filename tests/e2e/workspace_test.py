"""The harness's pruning of the caches every copy shares (workspace.py): plain pytest on real
directories and the real `flock`, as the build's own script (machine_caches.sh) holds them."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from e2e.workspace import prune_unused_entries

KEPT_FOR = 3600.0


def cache_with_entries(root: Path) -> Path:
    """A shared cache with one entry a past run left (two hours untouched) and one in use."""
    cache = root / "rocm_build_venvs"
    for name in ("old-venv", "young-venv"):
        (cache / name / "bin").mkdir(parents=True)
        (cache / name / "bin" / "python").write_text("#!/bin/sh\n")
    two_hours_ago = time.time() - 2 * KEPT_FOR
    os.utime(cache / "old-venv", (two_hours_ago, two_hours_ago))
    return cache


def test_entries_untouched_for_longer_than_kept_go_and_the_others_stay(tmp_path: Path) -> None:
    cache = cache_with_entries(tmp_path)
    prune_unused_entries(cache, KEPT_FOR)
    assert sorted(p.name for p in cache.iterdir()) == ["young-venv"]
    assert (cache / "young-venv" / "bin" / "python").read_text() == "#!/bin/sh\n"


def test_nothing_goes_while_a_build_holds_the_cache_shared(tmp_path: Path) -> None:
    cache = cache_with_entries(tmp_path)
    # What a build does for as long as it runs (machine_caches.sh's use_cache: `flock -s`). With
    # -o the lock is flock's own, not also its command's: it is gone once flock is reaped.
    build = subprocess.Popen(["flock", "-o", "-s", str(cache), "sh", "-c", "echo locked; exec sleep 60"],
                             stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert build.stdout.readline() == "locked\n"
        prune_unused_entries(cache, KEPT_FOR)
        assert sorted(p.name for p in cache.iterdir()) == ["old-venv", "young-venv"]
    finally:
        os.killpg(build.pid, signal.SIGKILL)
        build.wait()
    prune_unused_entries(cache, KEPT_FOR)
    assert sorted(p.name for p in cache.iterdir()) == ["young-venv"]
