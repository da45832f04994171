"""The harness's housekeeping (workspace.py): its pruning of the caches every copy shares, on real
directories and the real `flock`, as the build's own script (machine_caches.sh) holds them; what
it removes of a stopped pantsd's execution root; how a copy one file of a batch changed is put
back for the next; how a local server is started and stopped (local_server.py); and where the
scratch goes (scratch.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from e2e.local_server import free_port, port_open, running
from e2e.scratch import filesystem_type, ram_scratch, use_ram_scratch
from e2e.workspace import prune_unused_entries, put_tree_back, remove_daemon_leftovers, walk_tree

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


def execution_root_after_a_daemon(root: Path, kept_sandbox: bool) -> Path:
    """An execution root as a pantsd stopped by a signal leaves it: the two folders of immutable
    inputs (its bootstrap scheduler's, empty, and its main one's, holding an installed wheel), and
    a sandbox `--keep-sandboxes` kept, if asked."""
    execution_root = root / "rocm-e2e-x"
    (execution_root / "immutable_inputsAbC123").mkdir(parents=True)
    wheel = execution_root / "immutable_inputsDeF456" / ".tmpXyZ" / "0f3a" / "torch"
    wheel.mkdir(parents=True)
    (wheel / "__init__.py").write_text("")
    if kept_sandbox:
        (execution_root / "pants-sandbox-Qr7" / "__run.sh").parent.mkdir()
        (execution_root / "pants-sandbox-Qr7" / "__run.sh").write_text("#!/bin/sh\n")
    return execution_root


def test_a_stopped_daemons_immutable_inputs_go_and_so_does_its_root(tmp_path: Path) -> None:
    execution_root = execution_root_after_a_daemon(tmp_path, kept_sandbox=False)
    remove_daemon_leftovers(execution_root)
    assert not execution_root.exists()


def test_a_kept_sandbox_stays(tmp_path: Path) -> None:
    execution_root = execution_root_after_a_daemon(tmp_path, kept_sandbox=True)
    remove_daemon_leftovers(execution_root)
    assert sorted(p.name for p in execution_root.iterdir()) == ["pants-sandbox-Qr7"]
    assert (execution_root / "pants-sandbox-Qr7" / "__run.sh").read_text() == "#!/bin/sh\n"


def test_a_borrowed_copy_is_put_back_as_made_and_pants_own_folders_stay(tmp_path: Path) -> None:
    root = tmp_path / "checkout"
    (root / "tests/mini/pins").mkdir(parents=True)
    (root / "tests/mini/pins/mini-vllm.toml").write_text("[mini-vllm]\n")
    (root / "rules/rocm_build/__pycache__").mkdir(parents=True)
    (root / "rules/rocm_build/register.py").write_text("def rules(): ...\n")
    made = {path: path.read_bytes() for path in walk_tree(root)[1]}
    assert sorted(str(p.relative_to(root)) for p in made) == ["rules/rocm_build/register.py", "tests/mini/pins/mini-vllm.toml"]
    # What a file's cases leave: an edited pin, a removed file, a patch workspace (a git
    # checkout, with a link), a new recipe; and what Pants and Python keep there.
    (root / "tests/mini/pins/mini-vllm.toml").write_text("[mini-vllm]\ncommit = 'x'\n")
    (root / "rules/rocm_build/register.py").unlink()
    (root / "work/mini-vllm/.git").mkdir(parents=True)
    (root / "work/mini-vllm/.git/HEAD").write_text("ref: refs/heads/main\n")
    (root / "work/elsewhere").symlink_to(tmp_path)
    (root / "tests/mini/greet").mkdir()
    (root / "tests/mini/greet/BUILD").write_text("rocm_wheel()\n")
    for own in (".pids/abc/pantsd/pid", ".pants.d/pants.log", "rules/rocm_build/__pycache__/register.cpython-39.pyc"):
        (root / own).parent.mkdir(parents=True, exist_ok=True)
        (root / own).write_text("kept\n")
    put_tree_back(root, made)
    left = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    assert left == [
        ".pants.d", ".pants.d/pants.log", ".pids", ".pids/abc", ".pids/abc/pantsd", ".pids/abc/pantsd/pid",
        "rules", "rules/rocm_build", "rules/rocm_build/__pycache__", "rules/rocm_build/__pycache__/register.cpython-39.pyc",
        "rules/rocm_build/register.py", "tests", "tests/mini", "tests/mini/pins", "tests/mini/pins/mini-vllm.toml",
    ]
    assert (root / "tests/mini/pins/mini-vllm.toml").read_text() == "[mini-vllm]\n"
    assert (root / "rules/rocm_build/register.py").read_text() == "def rules(): ...\n"
    assert tmp_path.exists()  # the link went, not what it pointed at


def test_a_local_server_answers_while_running_and_is_stopped_on_leaving(tmp_path: Path) -> None:
    port = free_port()
    argv = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(tmp_path)]
    with running(argv, tmp_path / "server.log", port_open(port), timeout=30) as proc:
        assert port_open(port)()
    assert proc.poll() is not None and not port_open(port)()


def test_a_server_that_exits_fails_naming_it_with_its_log(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "print('cannot bind 127.0.0.1'); raise SystemExit(1)"]
    with pytest.raises(RuntimeError, match=f"^{Path(sys.executable).name} did not start: cannot bind 127.0.0.1\n$"):
        with running(argv, tmp_path / "server.log", lambda: False, timeout=30):
            pass


def mounts_naming(tmp_path: Path, fs_type: str) -> Path:
    """A mount table as /proc/self/mounts writes it, with tmp_path's folder mounted as `fs_type`."""
    table = tmp_path / "mounts"
    table.write_text(
        "/dev/vda / ext4 rw,relatime 0 0\n"
        f"scratch {str(tmp_path).replace(' ', chr(92) + '040')} {fs_type} rw,nosuid 0 0\n"
        "proc /proc proc rw 0 0\n"
    )
    return table


def test_the_longest_mount_point_holding_a_path_names_its_filesystem(tmp_path: Path) -> None:
    table = mounts_naming(tmp_path, "tmpfs")
    assert filesystem_type(tmp_path / "a" / "b", table) == "tmpfs"
    assert filesystem_type(tmp_path, table) == "tmpfs"
    assert filesystem_type(Path(str(tmp_path) + "-sibling"), table) == "ext4"
    assert filesystem_type(Path("/proc/self"), table) == "proc"


def test_scratch_goes_to_a_tmpfs_with_room_and_nowhere_else(tmp_path: Path) -> None:
    # tmp_path's real free space (statvfs), its filesystem as the table says.
    assert ram_scratch(tmp_path, needed=1, mounts=mounts_naming(tmp_path, "tmpfs")) == tmp_path
    assert ram_scratch(tmp_path, needed=2**62, mounts=mounts_naming(tmp_path, "tmpfs")) is None
    assert ram_scratch(tmp_path, needed=1, mounts=mounts_naming(tmp_path, "ext4")) is None
    assert ram_scratch(tmp_path / "missing", needed=1, mounts=mounts_naming(tmp_path, "tmpfs")) is None


def test_scratch_is_a_folder_of_this_user_on_the_ram_disk_unless_tmpdir_is_set(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", tempfile.tempdir)  # put back after the test
    monkeypatch.setenv("TMPDIR", "/var/tmp")
    assert use_ram_scratch(tmp_path, mounts_naming(tmp_path, "tmpfs")) is None and tempfile.gettempdir() != str(tmp_path)
    monkeypatch.delenv("TMPDIR")
    scratch = use_ram_scratch(tmp_path, mounts_naming(tmp_path, "tmpfs"))
    assert scratch == tmp_path / f"rocm-tests-{os.getuid()}" and scratch.is_dir() and scratch.stat().st_mode & 0o777 == 0o700
    assert os.environ["TMPDIR"] == str(scratch) and tempfile.gettempdir() == str(scratch)
    assert Path(tempfile.mkdtemp(prefix="rocm-e2e-")).parent == scratch


def test_a_scratch_folder_that_is_a_link_is_not_used(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", tempfile.tempdir)
    monkeypatch.delenv("TMPDIR", raising=False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / f"rocm-tests-{os.getuid()}").symlink_to(elsewhere)
    assert use_ram_scratch(tmp_path, mounts_naming(tmp_path, "tmpfs")) is None and "TMPDIR" not in os.environ
