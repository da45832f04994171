"""`pants run rules:lock-build-requirements -- [--only PIN ...] [TARGET ...]`.

The `lock-build-requirements` goal as a program, for scripts and CI: with `--only`, the
locks of those pins in 3rdparty/build are regenerated; with targets, those targets'; with
neither, every lock there. A thin entry: a nested Pants (`--concurrent`, since this program
itself runs under one) writes them, a lock by its resolve of `generate-lockfiles` and a
target by the goal (build_locks.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional, Sequence

from rocm_build.pins.update.host_git import UpdateError
from rocm_build.programs.build_locks import LockState, read_locks, refresh_locks


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="lock-build-requirements", description=__doc__.splitlines()[0])
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
