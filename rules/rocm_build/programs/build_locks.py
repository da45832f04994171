"""The build-requirements locks (3rdparty/build/py*/<pin>.lock, see locks/lockfile.py) as
the pin programs see them: the pin commit each was made at, which are stale once pins move,
and regenerating them with a nested Pants' `generate-lockfiles`, the one way locks are made.

Also `pants run rules:lock-build-requirements -- [--only PIN ...] [TARGET ...]`, for scripts
and CI: the locks of pins by name (`--only`), those of targets, or (neither) every lock in
3rdparty/build. It only picks the locks: the nested Pants writes them (`refresh_locks`), a
lock by its resolve of `generate-lockfiles` and a target by the `lock-build-requirements`
goal, so there is one implementation, the goals'.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from rocm_build.locks import lockfile
from rocm_build.pins.tables import Pin
from rocm_build.pins.update.commits import Move
from rocm_build.pins.update.host_git import UpdateError



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


def resolve_of(lock: LockState) -> str:
    """The lock's resolve of `generate-lockfiles` (lockfile.resolve_name), from its path as
    given here (relative to the repository, `./`, or absolute under it)."""
    return lockfile.resolve_name("build", Path(os.path.relpath(lock.path)).as_posix())


def refresh_commands(
    pants: str, locks: Sequence[LockState], new_targets: Sequence[str] = ()
) -> List[Tuple[int, List[str]]]:
    """The nested Pants runs that write `locks` and the first locks of `new_targets`. A lock
    that exists is written as Pants writes every lock, by its resolve of `generate-lockfiles`;
    a target without one yet has no resolve name here (its path is its target's to say), so
    it goes through the alias by target, `lock-build-requirements`: both render the same
    bytes (`RocmLockRequest`). `--concurrent`: this program runs under a Pants itself."""
    nested = [pants, "--concurrent", "--no-dynamic-ui"]
    commands = []  # (how many locks, the command)
    if locks:
        resolves = sorted({f"--resolve={resolve_of(lock)}" for lock in locks})
        commands.append((len(resolves), [*nested, "generate-lockfiles", *resolves]))
    if new_targets:
        commands.append((len(new_targets), [*nested, "lock-build-requirements", *new_targets]))
    return commands


def refresh_locks(pants: str, locks: Sequence[LockState], new_targets: Sequence[str] = ()) -> Optional[str]:
    """Regenerates `locks` (and makes the first locks of `new_targets`) with a nested Pants."""
    for count, command in refresh_commands(pants, locks, new_targets):
        shown = " ".join(command[:1] + command[3:])  # without the nested run's own flags
        print(f"refreshing {count} lock(s): {shown}")
        if subprocess.run(command).returncode != 0:
            return f"`{shown}` failed"
    return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="lock-build-requirements", description="Regenerate build-requirements locks by pin name or target, with a nested Pants.")
    parser.add_argument("targets", nargs="*", help="rocm_wheel targets to lock (also ones without a lock yet)")
    parser.add_argument("--only", nargs="+", metavar="PIN", help="regenerate the locks of these pins")
    parser.add_argument("--locks-dir", default="3rdparty/build")
    parser.add_argument("--pants", default="./pants")
    args = parser.parse_args(argv)
    try:
        locks = read_locks(Path(args.locks_dir))
    except UpdateError as e:
        print(f"lock-build-requirements: {e}", file=sys.stderr)
        return 1
    # --only picks locks by pin; targets add themselves; neither means every lock.
    chosen: List[LockState] = [lock for lock in locks if lock.pin in args.only] if args.only else []
    if not args.only and not args.targets:
        chosen = locks
    missing = set(args.only or ()) - {lock.pin for lock in locks}
    if missing:
        print(f"lock-build-requirements: no lock in {args.locks_dir} for pin(s) {', '.join(sorted(missing))}; "
              "name the rocm_wheel target instead", file=sys.stderr)  # fmt: skip
        return 1
    problem = refresh_locks(args.pants, chosen, args.targets)
    if problem:
        print(f"lock-build-requirements: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
