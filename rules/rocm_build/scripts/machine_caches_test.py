"""scripts/machine_caches.sh with real bash, flock and find: entries of the machine's caches are
kept while used, pruned after 30 days unused, and never while another build holds the cache."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from rocm_build.sandbox_scripts import script_bytes

DAY = 24 * 3600


def age(cache: Path, entries: dict) -> None:
    for name, age_days in entries.items():
        (cache / name).mkdir(parents=True, exist_ok=True)
        (cache / name / "file").write_text(name)
        when = time.time() - age_days * DAY
        os.utime(cache / name, (when, when))


ENTRIES = {"old": 40, "recent": 3, "used": 40, ".new-half.x1": 2, ".new-filling.x2": 0}


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    (tmp_path / "__rocm_build").mkdir()
    (tmp_path / "__rocm_build/machine_caches.sh").write_bytes(script_bytes("machine_caches.sh"))
    (tmp_path / ".build-venvs").mkdir()
    return tmp_path / ".build-venvs"


def bash(cwd: Path, script: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        ["bash", "-c", f"set -euo pipefail; source __rocm_build/machine_caches.sh; {script}"],
        cwd=cwd, env={"PATH": "/usr/bin:/bin"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs,
    )  # fmt: skip


def finished(process: subprocess.Popen) -> str:
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    return out


def test_a_build_prunes_entries_unused_for_30_days_and_leftovers_but_the_one_it_uses(cache) -> None:
    age(cache, ENTRIES)
    finished(bash(cache.parent, "use_cache .build-venvs .build-venvs/used"))
    assert sorted(p.name for p in cache.iterdir()) == [".new-filling.x2", "recent", "used"]
    assert time.time() - (cache / "used").stat().st_mtime < 60  # marked used now


def test_no_entry_is_pruned_while_another_build_holds_the_cache(cache) -> None:
    # Another build uses the cache (its shared lock lasts as long as it runs): nothing goes,
    # though "old" is 40 days old; once it has ended, the next build prunes.
    other = bash(cache.parent, "use_cache .build-venvs .build-venvs/recent; echo holding; read _", stdin=subprocess.PIPE)
    assert other.stdout.readline().strip() == "holding"
    age(cache, ENTRIES)
    finished(bash(cache.parent, "use_cache .build-venvs .build-venvs/used"))
    assert (cache / "old").exists() and (cache / ".new-half.x1").exists()
    other.stdin.write("go\n")  # the other build ends
    finished(other)
    finished(bash(cache.parent, "use_cache .build-venvs .build-venvs/used"))
    assert not (cache / "old").exists() and not (cache / ".new-half.x1").exists()


def test_an_entry_is_renamed_into_place_whole_and_the_first_one_made_stays(cache) -> None:
    age(cache, ENTRIES)
    make = "write() { echo \"$1\" > \"$2/file\"; }; fill_cache_entry .build-venvs/new write"
    finished(bash(cache.parent, f"{make} first; {make} second"))
    assert (cache / "new/file").read_text() == "first\n"
    assert not [p for p in cache.iterdir() if p.name.startswith(".new-new")]  # the second one's aside is gone
    # A build killed while filling leaves its entry aside, never at the entry's name.
    killed = bash(cache.parent, "stop() { echo > \"$1/part\"; kill -9 $$; }; fill_cache_entry .build-venvs/cut stop")
    killed.communicate(timeout=30)
    assert killed.returncode == -9
    assert not (cache / "cut").exists() and [p for p in cache.iterdir() if p.name.startswith(".new-cut.")]
