"""`pants run rules:update-pins`: move pins forward from upstream, safely.

For every pin that follows a branch or tag (`track`), resolve it upstream (`git ls-remote`,
or the GitHub API for github.com URLs, honouring GITHUB_TOKEN); `track = "release"` takes the
newest final release among the tags matching the pin's `tags` glob and writes its `version`
too; set derived pins (e.g.
aotriton from torch's `cmake/External/aotriton.cmake`), check that each moved component's
patches still apply, and rewrite the pins file atomically, keeping comments and order.
Nothing is written unless every step succeeded.

With `--resolve` (a machine's first run, pins/update/resolve.py): fill every pin not resolved yet
(prebuilt wheels, archives, build images by digest) from what this machine reaches, list what it
cannot, and move nothing that is resolved.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

from rocm_build.pins.update.archive_moves import ArchiveMove, plan_archives
from rocm_build.pins.update.host_git import UpdateError, checkout
from rocm_build.programs.build_locks import read_locks, refresh_locks, stale_locks
from rocm_build.pins.update.commits import (
    RELEASE,
    Move,
    derived_commit_and_source,
    derived_value,
    resolve,
    resolve_ref,
    resolve_release,
)
from rocm_build.pins.archive_pins import ArchivePin, parse_archive_pins
from rocm_build.pins.files import PinsFiles, read_pins_files
from rocm_build.pins.tables import Pin, PinsError, PrebuiltPin, parse_pins, parse_prebuilt_pins, pin_path
from rocm_build.pins.update import resolve as resolve_pins
from rocm_build.pins.update.prebuilt_index import PrebuiltMove, derived_tracks, plan_prebuilt, with_tracks
from rocm_build.pins.update.rewrite import moved_archive_files, moved_pin_files, print_diff, write_if_changed
from rocm_build.programs.patch_check import keep_patchable


@dataclass
class Plan:
    """What update-pins moves, and whether it held moves back because their patches fail."""

    moves: List[Move]
    archive_moves: List[ArchiveMove]
    prebuilt_moves: List[PrebuiltMove]
    patch_failures: bool

    @property
    def moves_any(self) -> bool:
        return bool(self.moves or self.archive_moves or self.prebuilt_moves)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="update-pins", description=__doc__.splitlines()[0])
    parser.add_argument("--pins-file", default="components/pins", help="a pins directory (one file per pin) or file")
    parser.add_argument("--patches-dir", default="patches", help="patches of pin NAME are in DIR/NAME/")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="only these pins")
    parser.add_argument("--check", action="store_true", help="list outdated pins, exit 1 if any; change nothing")
    parser.add_argument("--dry-run", action="store_true", help="print the diff; change nothing")
    parser.add_argument("--force", action="store_true", help="move pins even if their patches fail")
    parser.add_argument("--no-patch-check", action="store_true", help="skip checking that patches apply")
    parser.add_argument("--locks-dir", default="3rdparty/build", help="build-requirements locks (py*/*.lock)")
    parser.add_argument("--archives-file", default="components/archives", help="archive pins (upstream_archive pin=): a directory or file")
    parser.add_argument("--no-lock-refresh", action="store_true", help="leave the locks of moved pins stale")
    parser.add_argument("--pants", default="./pants", help="the Pants launcher that refreshes locks")
    parser.add_argument(
        "--resolve", action="store_true",
        help="fill every pin not resolved yet (prebuilt wheels, archives, build images by digest); move none",
    )  # fmt: skip
    parser.add_argument(
        "--github-api",
        default=os.environ.get("ROCM_PANTS_GITHUB_API", "https://api.github.com"),
        help="GitHub API base URL (env ROCM_PANTS_GITHUB_API)",
    )
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parser().parse_args(argv)
    archives_path = Path(args.archives_file)
    try:
        pin_files = read_pins_files(Path(args.pins_file))
        pins = pin_files.parse(parse_pins)
        locks = read_locks(Path(args.locks_dir))
        archive_files = read_pins_files(archives_path, missing_ok=True)
        archives = archive_files.parse(parse_archive_pins)
        prebuilt = pin_files.parse(parse_prebuilt_pins)
        if args.resolve:
            return resolve_and_write(args, pin_files, pins, archive_files, archives, prebuilt)
        planned = plan(args, pins, archives, prebuilt)
    except (UpdateError, PinsError, OSError) as e:
        print(f"update-pins: {e}", file=sys.stderr)
        return 1
    report(planned)
    stale = stale_locks(locks, pins, planned.moves)
    if args.check:
        for lock in stale:
            print(f"{lock.path}: made at {lock.pin} {lock.commit[:12]}, stale; regenerate: "
                  f"pants lock-build-requirements {lock.target}")  # fmt: skip
        return 1 if planned.moves_any or planned.patch_failures or stale else 0
    changes = {
        **moved_pin_files(pin_files, planned.moves, planned.prebuilt_moves),
        **moved_archive_files(archive_files, planned.archive_moves),
    }
    if args.dry_run:
        for path, (before, after) in changes.items():
            print_diff(path, before, after)
        return 0
    for path, (before, after) in changes.items():
        write_if_changed(path, before, after)
    problem = None if args.no_lock_refresh else refresh_locks(args.pants, stale)
    if problem:
        print(f"update-pins: {problem}; the pins are moved, the locks are stale", file=sys.stderr)
    return 1 if planned.patch_failures or problem else 0


def resolve_and_write(
    args: argparse.Namespace, pin_files: PinsFiles, pins: Dict[str, Pin],
    archive_files: PinsFiles, archives: Dict[str, ArchivePin], prebuilt: Dict[str, PrebuiltPin],
) -> int:  # fmt: skip
    """--resolve: what this machine can reach, written; what it cannot, listed (exit 1)."""
    with tempfile.TemporaryDirectory(prefix="update-pins-") as tmp:
        builds = resolve_pins.build_files(Path(pin_files.path))  # the images of this chain: beside the pins and below
        done = resolve_pins.resolve(pins, archives, prebuilt, builds, checkouts(pins, {}, tmp), Path("."))
    resolve_pins.report(done)
    changes = {
        **moved_pin_files(pin_files, [], done.prebuilt_moves),
        **moved_archive_files(archive_files, done.archive_moves),
        **{path: (path.read_text(), new) for path, new in resolve_pins.pinned_build_files(done).items()},
    }
    for path, (before, after) in changes.items():
        if args.dry_run:
            print_diff(path, before, after)
        else:
            write_if_changed(path, before, after)
    return 1 if done.unreached else 0


def plan(
    args: argparse.Namespace, pins: Dict[str, Pin], archives: Dict[str, ArchivePin], prebuilt: Dict[str, PrebuiltPin]
) -> Plan:
    """Every move, decided before anything is written: git pins (tracked, then derived from
    their sources' new trees), the archives derived from them, then the prebuilt wheels."""
    selected = set(args.only or pins)
    unknown = selected - set(pins) - set(prebuilt)
    if unknown:
        raise UpdateError(f"--only: no pin named {', '.join(sorted(unknown))} in {args.pins_file}")
    new, moves = tracked_moves(pins, selected, args.github_api)
    held_back = False
    with tempfile.TemporaryDirectory(prefix="update-pins-") as tmp:
        tree_of = checkouts(pins, new, tmp)
        moves += derived_moves(pins, selected, new, tree_of, args.github_api)
        commits = {n: new.get(n, p.commit) for n, p in pins.items() if n in selected}
        commits.update({m.name: m.new for m in moves})
        archive_moves = plan_archives(archives, commits, tree_of)
        planned_prebuilt, tracks = derived_tracks(prebuilt, sorted(commits), tree_of)
        if not args.no_patch_check:
            moves, held_back = keep_patchable(moves, pins, Path(args.patches_dir), tmp, args.force)
    only = [*args.only, *tracks] if args.only else None  # a host the recipe moved is planned again
    prebuilt_moves = with_tracks(plan_prebuilt(planned_prebuilt, only), prebuilt, tracks)
    return Plan(moves, archive_moves, prebuilt_moves, held_back)


def tracked_moves(pins: Dict[str, Pin], selected: Set[str], github_api: str) -> Tuple[Dict[str, str], List[Move]]:
    """Each selected pin's commit upstream (where its `track` points, or its newest release),
    and the moves of those that are elsewhere now."""
    new: Dict[str, str] = {}
    moves: List[Move] = []
    for name, pin in pins.items():
        if pin.derived_from or name not in selected:
            continue
        if pin.track == RELEASE:
            sha, version = resolve_release(name, pin)
            new[name] = sha
            if sha != pin.commit or version != pin.version:
                moves.append(Move(name, pin.commit, sha, f"newest release {version} (tags {pin.tags!r})", version))
            continue
        sha = resolve(name, pin, github_api)
        new[name] = sha
        if sha != pin.commit:
            moves.append(Move(name, pin.commit, sha, f"{pin.track} moved" if pin.commit else f"new pin, {pin.track} is there"))
    return new, moves


def derived_moves(
    pins: Dict[str, Pin], selected: Set[str], new: Dict[str, str], tree_of: Callable[[str], str], github_api: str
) -> List[Move]:
    """The derived pins whose source's tree (at its new commit) names another commit."""
    moves = []
    for name, pin in pins.items():
        if not pin.derived_from:
            continue
        source = pin.derived_from.partition(":")[0]
        if source not in pins:
            raise UpdateError(f"[{name}] `derived_from` names `{source}`, which is not a pin")
        if source not in selected and name not in selected:
            continue
        commit = new.get(source, pins[source].commit)
        if "#" in pin.derived_from:  # a recipe line: a ref to resolve in this pin's repository
            try:
                line = derived_value(pin.derived_from, tree_of(source), name)
            except UpdateError as e:  # the recipe changed shape: say at which commit, and that nothing moved
                raise UpdateError(
                    f"{e} at {source} {commit[:12]}; nothing was moved and the pins file was not changed. Point "
                    f"`derived_from` of [{name}] at what that recipe names now, or pin [{name}] by hand without it."
                ) from None
            try:
                sha = resolve_ref(name, pin, line.value, github_api)
            except UpdateError as e:
                raise UpdateError(f"{line.where(f'{source} {commit[:12]}')} names {line.value!r} for [{name}]: {e}") from None
            if sha != pin.commit or line.value != pin.track:
                moves.append(Move(name, pin.commit, sha, f"{line.where(f'{source} {commit[:12]}')} names {line.value}", track=line.value))
            continue
        sha, read = derived_commit_and_source(pin.derived_from, tree_of(source), name)
        if sha != pin.commit:
            via = "" if read == pin.derived_from.partition(":")[2] else f", read from {read}, which it names"
            moves.append(Move(name, pin.commit, sha, f"{pin.derived_from} at {source} {commit[:12]} names it{via}"))
    return moves


def checkouts(pins: Dict[str, Pin], new: Dict[str, str], work: str) -> Callable[[str], str]:
    """The tree of a pin at its new commit, checked out under `work` the first time it is asked for."""
    trees: Dict[str, str] = {}

    def tree_of(source: str) -> str:
        if source not in trees:
            trees[source] = pin_path(work, source, f"derived_from {source!r}")
            checkout(source, pins[source].url, new.get(source, pins[source].commit), trees[source])
        return trees[source]

    return tree_of


def report(planned: Plan) -> None:
    for move in planned.moves:
        print(f"{move.name}: {move.old[:12] or '(no commit yet)'} -> {move.new[:12]} ({move.why})")
    for archive in planned.archive_moves:
        print(f"{archive.name}: {archive.values['url'] or '(no url)'} sha256 {archive.values['sha256'][:12] or '-'} ({archive.why})")
    for pmove in planned.prebuilt_moves:
        new = " ".join(pmove.values.get(k) or "" for k in ("version", "file")).strip() or f"track {pmove.values.get('track')}"
        print(f"{pmove.name}: {pmove.old or '(not resolved)'} -> {new} ({pmove.why})")
    if not planned.moves_any:
        print("all pins are up to date")


if __name__ == "__main__":
    sys.exit(main())
