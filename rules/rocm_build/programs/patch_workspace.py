"""`pants run rules:patch-workspace`: edit a component's patched tree with git, save patches.

    pants run rules:patch-workspace -- checkout vllm        # work/vllm: pinned commit + patches
    (edit, `git commit` in work/vllm)
    pants run rules:patch-workspace -- save vllm            # new commits -> patches/vllm/*.patch

`checkout` makes one commit per patch file on top of the pinned commit, so `git log`
shows our patch stack; `save` writes the commits made after it as numbered patch files
after the existing ones (like TheRock's save-patches), then marks them as saved.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import List, Optional, Sequence

from rocm_build.upstream.pins import PinsError, lookup_pin, parse_pins
from rocm_build.upstream.pins_dir import read_pins_files
from rocm_build.programs.host_git import UpdateError, checkout, git
from rocm_build.programs.patch_check import patch_files, patches_apply

BASE_TAG = "rocm-pants/pinned"
SAVED_TAG = "rocm-pants/saved"
COMMITTER = ["-c", "user.name=rocm-pants", "-c", "user.email=rocm-pants@localhost"]


class WorkspaceError(Exception):
    pass


def _run(dest: Path, *args: str, pin_url: str = "") -> str:
    result = git("-C", str(dest), *args, pin_url=pin_url)
    if result.returncode != 0:
        raise WorkspaceError(f"git {' '.join(args)} failed in {dest}: {result.stderr.strip()}")
    return result.stdout.strip()


def do_checkout(name: str, pins_file: Path, patches_dir: Path, dest: Path) -> None:
    pin = lookup_pin(read_pins_files(pins_file).parse(parse_pins), name, str(pins_file), "patch-workspace")
    if dest.exists() and any(dest.iterdir()):
        raise WorkspaceError(f"{dest} already exists and is not empty; remove it or pass --dest")
    checkout(name, pin.url, pin.commit, str(dest))
    if pin.submodules:
        # git's own submodule code, with only the schemes the pin allows (a file:// fixture's
        # submodules are file:// too; an https pin's may not be).
        _run(dest, "submodule", "update", "--init", "--recursive", "--depth", "1", pin_url=pin.url)
    _run(dest, "tag", BASE_TAG)
    for patch in patch_files(patches_dir, name):
        problem = patches_apply(name, str(dest), [patch])
        if problem:
            raise WorkspaceError(f"{problem}\n(the workspace in {dest} has the patches before this one)")
        _run(dest, "add", "-A")
        _run(dest, *COMMITTER, "commit", "-q", "--allow-empty", "-m", f"rocm-pants patch: {Path(patch).name}")
    _run(dest, "tag", SAVED_TAG)
    print(f"{dest}: {name} @ {pin.commit[:12]} with {len(patch_files(patches_dir, name))} patch file(s) as commits.")
    print(f"Commit your changes there, then: pants run rules:patch-workspace -- save {name}")


def next_number(directory: Path) -> int:
    numbers = [int(m.group(1)) for p in directory.glob("*") if (m := re.match(r"^(\d{4})-", p.name))]
    return max(numbers, default=0) + 1


def do_save(name: str, patches_dir: Path, dest: Path) -> List[str]:
    count = int(_run(dest, "rev-list", "--count", f"{SAVED_TAG}..HEAD"))
    if count == 0:
        print(f"no new commits in {dest} since the last save; nothing written")
        return []
    if _run(dest, "status", "--porcelain"):
        raise WorkspaceError(f"{dest} has uncommitted changes; commit them (or stash them) first")
    target = patches_dir / name
    target.mkdir(parents=True, exist_ok=True)
    written = _run(
        dest, "format-patch", "--zero-commit", "--no-signature", "--no-stat",
        "--start-number", str(next_number(target)), "-o", str(target.resolve()), f"{SAVED_TAG}..HEAD",
    ).splitlines()  # fmt: skip
    _run(dest, "tag", "-f", SAVED_TAG)
    for path in written:
        print(f"wrote {path}")
    return written


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="patch-workspace", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["checkout", "save"])
    parser.add_argument("pin", help="the pin's name in the pins file, e.g. vllm")
    parser.add_argument("--pins-file", default="components/pins", help="a pins directory (one file per pin) or file")
    parser.add_argument("--patches-dir", default="patches", help="patches of pin NAME are in DIR/NAME/")
    parser.add_argument("--dest", help="the workspace (default: work/NAME)")
    args = parser.parse_args(argv)
    dest = Path(args.dest or f"work/{args.pin}")
    try:
        if args.action == "checkout":
            do_checkout(args.pin, Path(args.pins_file), Path(args.patches_dir), dest)
        else:
            do_save(args.pin, Path(args.patches_dir), dest)
    except (WorkspaceError, UpdateError, PinsError, OSError) as e:
        print(f"patch-workspace: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
