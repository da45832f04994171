"""What `package` writes to dist/, and what it says it did.

A wheel whose bytes are in dist/ already is left there as it is (its file, its build log,
their times); when it was built again in this run (Pants' cache off, say) only its new build
log is written. A target's folder whose wheel changed is written anew, the folder cleared
first: the old wheel has another version (build_process.version_key) and must not stay
beside the new one. The install set is written anew when any file of it changed, and left
as it is otherwise. Then one summary names each wheel of the chain: built in this run, taken
from Pants' cache, or unchanged, with the first reason `rocm-plan` would give
(wheel/rebuild.py), after Pants' own `Wrote dist/...` lines.

Pants' `package` writes every file of the digest a package rule returns, and first removes
each artifact's path: so the rule returns only the folders that changed, each as an artifact
(`Wrote dist/<folder>`), and the summary as an artifact without a path.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Sequence, Tuple

from pants.engine.fs import FileEntry

# (path, size, mtime, ctime in ns, inode) -> sha256 of the file: pantsd keeps it between runs,
# so an unchanged GB wheel in dist/ is hashed once, not on every `package`. A file changed
# within a timestamp tick of its last hashing could keep all five: a file whose mtime is
# younger than _RACY_NS is hashed, not remembered (git's "racy clean" rule).
_HASHES: Dict[Tuple[str, int, int, int, int], str] = {}
_RACY_NS = 2_000_000_000
# path -> (size, sha256, when `package` decided to write it, ns): what Pants is about to write
# (it writes what the package rule returns). The next run finds the file unchanged without
# reading it: it must, quickly, since Pants compares that run's result with this one's while
# it decides what to run again (a slow comparison there could outlast the checks and cancel a
# build they let start). Timestamps are coarser than the clock: a margin.
_WRITING: Dict[str, Tuple[int, str, int]] = {}
_MTIME_MARGIN_NS = 100_000_000

BUILT, CACHED, UNCHANGED, PINNED = "built", "cached", "unchanged", "pinned"


def expect_written(path: Path, sha256: str, size: int) -> None:
    _WRITING[str(path)] = (size, sha256, time.time_ns())


def file_sha256(path: Path) -> str:
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    if key in _HASHES:
        return _HASHES[key]
    pending = _WRITING.pop(str(path), None)
    if pending and pending[0] == st.st_size and st.st_mtime_ns >= pending[2] - _MTIME_MARGIN_NS:
        found = pending[1]
    else:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        found = digest.hexdigest()
    if time.time_ns() - st.st_mtime_ns >= _RACY_NS:
        _HASHES[key] = found
    return found


def holds_wheel(folder: Path, wheel_name: str, sha256: str, size: int) -> bool:
    """Whether `folder` holds this wheel, byte for byte, and no other wheel."""
    if sorted(p.name for p in folder.glob("*.whl")) != [wheel_name]:
        return False
    path = folder / wheel_name
    return path.stat().st_size == size and file_sha256(path) == sha256


def holds_file(path: Path, entry: FileEntry) -> bool:
    """Whether the file at `path` has the bytes of this digest entry."""
    size = entry.file_digest.serialized_bytes_length
    return path.is_file() and path.stat().st_size == size and file_sha256(path) == entry.file_digest.fingerprint


def holds_files(folder: Path, files: Mapping[str, Tuple[str, int]]) -> bool:
    """Whether `folder` holds exactly these files (relative path -> sha256 and size)."""
    if not folder.is_dir():
        return False
    found = {}
    for top, _, names in os.walk(folder):
        for name in names:
            path = Path(top, name)
            found[path.relative_to(folder).as_posix()] = path
    if set(found) != set(files):
        return False
    return all(p.stat().st_size == files[rel][1] and file_sha256(p) == files[rel][0] for rel, p in found.items())


@dataclass(frozen=True)
class WheelOutcome:
    target: str
    wheel_name: str
    status: str  # BUILT, CACHED, UNCHANGED or PINNED
    reason: str = ""  # why it differs from what dist/ held


def status_of(in_dist: bool, prebuilt: bool, ran_here: bool) -> str:
    if in_dist:
        return UNCHANGED
    if prebuilt:
        return PINNED
    return BUILT if ran_here else CACHED


def pinned_reason(previous_wheels: Sequence[str], wheel_name: str) -> str:
    if not previous_wheels:
        return "not in dist/ before"
    return f"its pin moved: {', '.join(previous_wheels)} -> {wheel_name}"


# How the summary counts each status.
_COUNTED = {BUILT: "built", CACHED: "from Pants' cache", PINNED: "prebuilt, new in dist/", UNCHANGED: "unchanged in dist/ (left as they are)"}


def summary_lines(
    owner: str, outcomes: Sequence[WheelOutcome], install: str, install_written: bool, loads: str = ""
) -> Tuple[str, ...]:
    """`package`'s account of one target: a count, then a line per wheel of its chain (`built`:
    its build ran in this run; `cached`: Pants' cache had it; `pinned`: a prebuilt wheel new
    in dist/; `unchanged`: dist/ held it, byte for byte), then the install set and, with
    `loads`, what its check found."""
    counts = [f"{n} {_COUNTED[status]}" for status in _COUNTED for n in [sum(1 for o in outcomes if o.status == status)] if n]
    lines: List[str] = [f"{owner}: {len(outcomes)} wheel(s) in its chain: {', '.join(counts)}"]
    width = max(len(o.status) for o in outcomes)
    for o in outcomes:
        why = f": {o.reason}" if o.reason else ""
        lines.append(f"  {o.status.ljust(width)}  {o.wheel_name} ({o.target}){why}")
    lines.append(f"  install set {install}/: " + ("written (its files changed)" if install_written else "unchanged (left as it is)"))
    if loads:
        lines.append(f"{owner}: the install set loads: {loads}")
    return tuple(lines)


def previous_wheels(folder: Path) -> List[str]:
    return sorted(p.name for p in folder.glob("*.whl")) if folder.is_dir() else []
