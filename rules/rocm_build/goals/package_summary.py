"""What `package` writes to dist/, and what it says it did.

A `rocm_wheel`'s package is the same whatever dist/ holds: every folder of its chain (each
target's wheels with their build logs, a generator's prebuilt wheels in one folder, the install
set), so an `archive`, a `docker_image` or a rule of a user's that asks for it gets the wheels.
What dist/ holds decides only two things: which folders Pants clears first and names
(`Wrote dist/<folder>`: those whose files changed; a folder whose wheel changed must not keep
the old wheel, which has another version, build_process.version_key), and the words of one
summary naming each wheel of the chain: built in this run, taken from Pants' cache, a prebuilt
wheel new in dist/, or unchanged, with the first reason `rocm-plan` would give
(wheel/rebuild.py), after Pants' own `Wrote dist/...` lines. Pants writes every file a package
returns, so an unchanged folder is written again with the same bytes (its files' times change;
a no-op of flash-attention's recipe rewrites ~770 MB in 1.2-1.7 s: docs/layout.md).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Collection, Dict, List, Mapping, Optional, Sequence, Tuple

from pants.engine.fs import FileEntry

from rocm_build.wheel.rebuild import first_reason, last_build_info

_RACY_NS = 2_000_000_000
_MTIME_MARGIN_NS = 100_000_000

BUILT, CACHED, UNCHANGED, PINNED = "built", "cached", "unchanged", "pinned"


class DistHashes:
    """What is known of the files in dist/ between runs: a value the package rule is handed (a
    rule result pantsd keeps, goals/package.py), so nothing of the module is changed at run time;
    its own lock keeps it whole when rules run on several threads.

    `hashes`: (path, size, mtime, ctime in ns, inode) -> sha256 of the file, so an unchanged GB
    wheel in dist/ is hashed once, not on every `package`. A file changed within a timestamp
    tick of its last hashing could keep all five: a file whose mtime is younger than _RACY_NS is
    hashed, not remembered (git's "racy clean" rule).
    `writing`: path -> (size, sha256, when `package` decided to write it, ns): what Pants is about
    to write (it writes what the package rule returns). The next run finds the file unchanged
    without reading it: it must, quickly, since Pants compares that run's result with this one's
    while it decides what to run again (a slow comparison there could outlast the checks and
    cancel a build they let start). Timestamps are coarser than the clock: a margin."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.hashes: Dict[Tuple[str, int, int, int, int], str] = {}
        self.writing: Dict[str, Tuple[int, str, int]] = {}

    def expect_written(self, path: Path, sha256: str, size: int) -> None:
        with self._lock:
            self.writing[str(path)] = (size, sha256, time.time_ns())

    def file_sha256(self, path: Path) -> str:
        st = path.stat()
        key = (str(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        with self._lock:
            known = self.hashes.get(key)
            pending = None if known is not None else self.writing.pop(str(path), None)
        if known is not None:
            return known
        if pending and pending[0] == st.st_size and st.st_mtime_ns >= pending[2] - _MTIME_MARGIN_NS:
            found = pending[1]
        else:
            found = _read_sha256(path)
        if time.time_ns() - st.st_mtime_ns >= _RACY_NS:
            with self._lock:
                self.hashes[key] = found
        return found


def _read_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def holds(path: Path, sha256: str, size: int, known: Optional[DistHashes] = None) -> bool:
    """Whether the file at `path` has these bytes (`known`: what is known of dist/, else nothing)."""
    return path.is_file() and path.stat().st_size == size and (known or DistHashes()).file_sha256(path) == sha256


def holds_file(path: Path, entry: FileEntry, known: Optional[DistHashes] = None) -> bool:
    """Whether the file at `path` has the bytes of this digest entry."""
    return holds(path, entry.file_digest.fingerprint, entry.file_digest.serialized_bytes_length, known)


def holds_files(folder: Path, files: Mapping[str, Tuple[str, int]], known: Optional[DistHashes] = None) -> bool:
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
    known = known or DistHashes()
    return all(p.stat().st_size == files[rel][1] and known.file_sha256(p) == files[rel][0] for rel, p in found.items())


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


def project_of(wheel_name: str) -> str:
    """A wheel file's project, as its file name spells it (normalized by the wheel's maker)."""
    return wheel_name.split("-")[0].lower()


def pinned_reason(previous_wheels: Sequence[str], wheel_name: str) -> str:
    """Why a prebuilt wheel is new in its folder: `previous_wheels`, the folder's wheels before
    (a generator's folder holds its siblings: only this project's other files are its pin's)."""
    before = [p for p in previous_wheels if project_of(p) == project_of(wheel_name) and p != wheel_name]
    if not before:
        return "not in dist/ before"
    return f"its pin moved: {', '.join(before)} -> {wheel_name}"


@dataclass(frozen=True)
class DistWheel:
    """One wheel of a chain as `package` writes it: its target's folder, its bytes and log."""

    target: str
    folder: str  # under dist/ (a generator's wheels share one)
    name: str
    sha256: str
    size: int
    prebuilt: bool
    ran_here: bool  # its build process ran in this Pants run
    build_info: Mapping[str, Any]
    log: Optional[Tuple[str, str, int]] = None  # its build log: name, sha256, size


def wheel_outcomes(
    root: Path, wheels: Sequence[DistWheel], held: Collection[str] = (), known: Optional[DistHashes] = None
) -> List[WheelOutcome]:
    """What each wheel is to dist/ (at `root`), in chain order: dependencies come first, so a
    wheel's reason can name the dependency that changed under it. `held`: the folders
    changed_folders found dist/ holding exactly (their wheels and logs are these bytes), whose
    files are not read a second time (a no-op of flash-attention's recipe reads ~770 MB once)."""
    outcomes: List[WheelOutcome] = []
    changed: List[str] = []
    for w in wheels:
        where = root / w.folder
        same = w.folder in held or holds(where / w.name, w.sha256, w.size, known)
        status = status_of(same, w.prebuilt, w.ran_here)
        reason = ""
        if status == UNCHANGED and w.ran_here and w.log and w.folder not in held and not holds(where / w.log[0], *w.log[1:], known):
            # Built in this run into the same bytes (Pants' cache off, say): its log is new.
            status, reason = BUILT, "the same bytes as the wheel in dist/ (its build log is new)"
        elif status == PINNED:
            reason = pinned_reason(previous_wheels(where), w.name)
        elif status != UNCHANGED:
            reason = first_reason(last_build_info(where), w.build_info, changed)
        if not same:
            changed.append(w.target)
        outcomes.append(WheelOutcome(w.target, w.name, status, reason))
    return outcomes


def unwritable(root: Path, cleared: Sequence[str], rewritten: Sequence[str]) -> List[Path]:
    """What would stop Pants from writing the package into dist/ (at `root`), found before it
    clears anything, so a failure leaves dist/ as it was: in a folder it clears (`cleared`), a
    directory whose entries cannot be removed; in one it writes over (`rewritten`), a directory or
    file that cannot be written; for a folder not there yet, the nearest directory above it."""
    found: List[Path] = []
    for relpath in (*cleared, *rewritten):
        path = root / relpath
        if not os.path.lexists(path):
            above = next(p for p in (path, *path.parents) if p.exists())
            found.extend([above] if not os.access(above, os.W_OK | os.X_OK) else [])
            continue
        if relpath in cleared and not os.access(path.parent, os.W_OK | os.X_OK):
            found.append(path.parent)
        if path.is_symlink() or not path.is_dir():
            continue  # Pants removes a link or a file where the folder goes
        for top, dirs, names in os.walk(path):
            if not os.access(top, os.W_OK | os.X_OK):
                found.append(Path(top))
            if relpath in rewritten:
                found.extend(Path(top, n) for n in names if not os.path.islink(Path(top, n)) and not os.access(Path(top, n), os.W_OK))
    return found


def unwritable_message(root: Path, found: Sequence[Path]) -> str:
    """One line: the first path that stops the write, how many more, and the fix."""
    first = found[0].relative_to(root.parent) if root.parent in found[0].parents else found[0]
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return (
        f"Cannot write the package into {root.name}/: {first}{more} is not writable by this user (left by `sudo`, or "
        f"immutable); nothing in {root.name}/ was changed. Fix: `sudo chown -R \"$USER\" {root.name}/` (or remove {first}), "
        f"then package again."
    )


def changed_folders(root: Path, folders: Mapping[str, Mapping[str, Tuple[str, int]]], known: Optional[DistHashes] = None) -> List[str]:
    """The folders (relative path -> its files' sha256 and size) whose files dist/ does not hold
    exactly: those Pants clears before it writes them, each named once."""
    return [relpath for relpath, files in folders.items() if not holds_files(root / relpath, files, known)]


# How the summary counts each status.
_COUNTED = {BUILT: "built", CACHED: "from Pants' cache", PINNED: "prebuilt, new in dist/", UNCHANGED: "unchanged in dist/"}


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
    lines.append(f"  install set {install}/: " + ("written (its files changed)" if install_written else "unchanged"))
    if loads:
        lines.append(f"{owner}: the install set loads: {loads}")
    return tuple(lines)


def previous_wheels(folder: Path) -> List[str]:
    return sorted(p.name for p in folder.glob("*.whl")) if folder.is_dir() else []
