"""Where the end-to-end files put their scratch (copies, stores, fixture repositories, their
nested Pants' sandboxes): a RAM-backed filesystem when the machine has one with room, else the
system's temporary directory.

Why: the suite creates and deletes files by the million (each nested Pants process gets a
sandbox of its own). On a disk-backed ext4 without a journal, as this workplace's root is,
every new inode is checked against the ones deleted in the last `dirty_expire_centisecs`
(ext4's `recently_deleted`), so under that churn each file created costs more: 12 % of a whole
run's CPU samples were in `__ext4_new_inode` (perf, docs/performance.md). On tmpfs it costs nothing.
A user's TMPDIR wins: set, it is used as it is.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional

RAM_DISK = Path("/dev/shm")
MOUNTS = Path("/proc/self/mounts")
# The most one run's scratch held at once (measured on a full run, docs/performance.md), with room.
NEEDED_BYTES = 8 * 2**30


def filesystem_type(path: Path, mounts: Path = MOUNTS) -> str:
    """The type of the filesystem `path` is on: the longest mount point holding it."""
    target, best, kind = str(path), "", ""
    for line in mounts.read_text().splitlines():
        _, point, fs_type = line.split()[:3]
        point = point.replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fs_type
    return kind


def ram_scratch(root: Path = RAM_DISK, needed: int = NEEDED_BYTES, mounts: Path = MOUNTS) -> Optional[Path]:
    """`root` if it is a tmpfs with at least `needed` bytes free, else None."""
    try:
        if filesystem_type(root.resolve(), mounts) != "tmpfs":
            return None
        stat = os.statvfs(root)
    except OSError:
        return None
    return root if stat.f_bavail * stat.f_frsize >= needed else None


def use_ram_scratch(root: Path = RAM_DISK, mounts: Path = MOUNTS) -> Optional[Path]:
    """Point this process's temporary files (tempfile, pytest's tmp_path, the processes it
    starts) at a folder of its own on the RAM disk; nothing when TMPDIR is set or there is none."""
    if os.environ.get("TMPDIR"):
        return None
    ram = ram_scratch(root, mounts=mounts)
    if ram is None:
        return None
    scratch = ram / f"rocm-tests-{os.getuid()}"
    try:
        scratch.mkdir(mode=0o700, exist_ok=True)
        if scratch.is_symlink() or scratch.stat().st_uid != os.getuid():  # a shared folder: not another user's
            return None
    except OSError:  # a dangling link or a file there
        return None
    os.environ["TMPDIR"] = str(scratch)
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    return scratch
