"""`pants run rules:patch-workspace`: the patch workspace for scripts, by pin name.

    pants run rules:patch-workspace -- checkout vllm        # work/vllm: pinned commit + patches/vllm/
    (edit, `git commit` in work/vllm with Why:, Upstream:, Drop when: in the message)
    pants run rules:patch-workspace -- save vllm            # new commits -> patches/vllm/NNNN-*.patch

Prefer the goal, `./pants patch-workspace <upstream target>`: it reads the pin and the patch
sets from the target, as the build does, and runs in Pants' own process (no pex to build). This
program knows only a pins file and a patches directory, so it refuses a patch directory that is
not there (DIR/NAME must be the patch_set's directory: `--patches-dir tests/mini/patches` and a
pin named as that directory) rather than check out or save beside what the build reads. The
workspace itself is the goal's (upstream/workspace_repo.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional, Sequence

from rocm_build.pins.files import read_pins_files
from rocm_build.pins.tables import PinsError, check_pin_name, lookup_pin, parse_pins, pin_path
from rocm_build.pins.update.host_git import UpdateError, checkout, git
from rocm_build.programs.patch_check import patch_files, python3
from rocm_build.upstream import workspace_repo
from rocm_build.upstream.workspace_repo import PatchToApply, WorkspaceError

GOAL_HINT = "`./pants patch-workspace <target>`, which reads them from the upstream target itself"


def patch_directory(patches_dir: Path, name: str) -> Path:
    directory = Path(pin_path(str(patches_dir), name, "patch-workspace"))
    if not (directory / "BUILD").is_file():
        raise WorkspaceError(
            f"{directory} is not a patch set's directory (no BUILD file with a patch_set there), so no build "
            f"reads patches from it; pass --patches-dir so that DIR/{name} is one, or use {GOAL_HINT}"
        )
    return directory


def do_checkout(name: str, pins_file: Path, patches_dir: Path, dest: Path) -> None:
    pin = lookup_pin(read_pins_files(pins_file).parse(parse_pins), name, str(pins_file), "patch-workspace")
    patch_directory(patches_dir, name)
    patches = patch_files(patches_dir, name)
    if workspace_repo.clear_saved(dest, f"pin:{name}", f"pants run rules:patch-workspace -- save {name}"):
        print(f"{dest}: every commit of it was saved as a patch file; checking it out afresh")
    workspace_repo.init(dest, f"pin:{name}")
    checkout(name, pin.url, pin.commit, str(dest))
    if pin.submodules:
        # git's own submodule code, with only the schemes the pin allows (a file:// fixture's
        # submodules are file:// too; an https pin's may not be). They stay submodules here;
        # the goal puts their files in the base commit, as the build's tree has them.
        result = git("-C", str(dest), "submodule", "update", "--init", "--recursive", "--depth", "1", pin_url=pin.url)
        if result.returncode != 0:
            raise WorkspaceError(f"git submodule update failed in {dest}: {result.stderr.strip()}")
    workspace_repo.base_tagged(dest)
    fix = f"Fix it there, commit it, then `pants run rules:patch-workspace -- save {name}`."
    workspace_repo.commit_patches(dest, python3(), [PatchToApply(p, p) for p in patches], fix)
    print(f"{dest}: {name} @ {pin.commit[:12]} with {len(patches)} patch file(s) of {patches_dir / name} as commits.")
    print(f"Commit your changes there (Why:, Upstream:, Drop when: in the message), then: "
          f"pants run rules:patch-workspace -- save {name}")  # fmt: skip


def do_save(name: str, patches_dir: Path, dest: Path) -> List[str]:
    directory = patch_directory(patches_dir, name)
    if not (dest / ".git").is_dir():
        raise WorkspaceError(f"there is no workspace at {dest}; make it first: pants run rules:patch-workspace -- checkout {name}")
    if workspace_repo.made_for(dest) not in ("", f"pin:{name}"):
        raise WorkspaceError(f"{dest} is a workspace of {workspace_repo.made_for(dest)}, not of pin {name}")
    new = workspace_repo.new_patches(dest, workspace_repo.next_number([p.name for p in directory.iterdir()], str(directory)))
    if not new.files:
        print(f"no new commits in {dest} since the last save; nothing written")
        return []
    # Checked out again with the set's files (before them, by number) before anything is written.
    before = [PatchToApply(p, p) for p in patch_files(patches_dir, name)]
    workspace_repo.check_saved_set(dest, python3(), before, [], new, str(directory))
    written = []
    for file_name, data in new.files:
        (directory / file_name).write_bytes(data)  # git's bytes, a CRLF file's `\r` too
        written.append(str(directory / file_name))
    workspace_repo.mark_saved(dest, new)
    for path in written:
        print(f"wrote {path}")
    return written


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="patch-workspace", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["checkout", "save"])
    parser.add_argument("pin", help="the pin's name in the pins file, e.g. vllm")
    parser.add_argument("--pins-file", default="components/pins", help="a pins directory (one file per pin) or file")
    parser.add_argument("--patches-dir", default="patches", help="patches of pin NAME are in DIR/NAME/ (a patch_set's directory)")
    parser.add_argument("--dest", help="the workspace (default: work/NAME)")
    args = parser.parse_args(argv)
    try:
        check_pin_name(args.pin, "the command line")
        if args.dest:
            dest = Path(args.dest)
        else:  # work/NAME of the current directory, as the goal's: no link followed out of it
            workspace_repo.refuse_links(Path.cwd(), f"work/{args.pin}")
            dest = Path(f"work/{args.pin}")
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
