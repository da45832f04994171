"""The build-requirements locks (3rdparty/build/py*/<pin>.lock, see locks/lockfile.py) as
the pin programs see them: the pin commit each was made at, which are stale once pins move,
and regenerating them with a nested Pants."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from rocm_build.programs.host_git import UpdateError
from rocm_build.programs.new_commits import Move
from rocm_build.upstream.pins import Pin
from rocm_build.locks import lockfile


@dataclass
class LockState:
    path: Path
    pin: str
    commit: str
    target: str  # the rocm_wheel the lock belongs to


def read_locks(locks_dir: Path) -> List[LockState]:
    """The build-requirements locks (see lockfile.py), with the pin commit each was made at."""
    states = []
    for path in sorted(locks_dir.rglob("*.lock")):  # py3.12/<pin>.lock: one per Python
        try:
            lock = lockfile.parse(path.read_text(), str(path))
        except lockfile.LockError as e:
            raise UpdateError(str(e)) from None
        states.append(LockState(path, lock.pin, lock.commit, lock.regenerate.rpartition(" ")[2]))
    return states


def stale_locks(locks: Sequence[LockState], pins: Dict[str, Pin], moves: Sequence[Move]) -> List[LockState]:
    """Locks whose pin is at another commit now, or will be once `moves` are written."""
    after = {name: pin.commit for name, pin in pins.items()}
    after.update({m.name: m.new for m in moves})
    return [lock for lock in locks if lock.pin in after and lock.commit != after[lock.pin]]


def refresh_locks(pants: str, locks: Sequence[LockState]) -> Optional[str]:
    """Regenerates `locks` with a nested Pants (`--concurrent`: this program runs under one)."""
    if not locks:
        return None
    targets = [lock.target for lock in locks]
    print(f"refreshing {len(locks)} lock(s): {pants} lock-build-requirements {' '.join(targets)}")
    result = subprocess.run([pants, "--concurrent", "--no-dynamic-ui", "lock-build-requirements", *targets])
    return None if result.returncode == 0 else f"`{pants} lock-build-requirements {' '.join(targets)}` failed"
