"""A pin's patches (patches/<pin>/, or --patches-dir) against a checked-out tree, with the script the build
applies them with (scripts/apply_patches.py): update-pins moves a pin only if they still
apply at its new commit (with upstream/workspace_repo.py's `patches_apply`, which
patch-workspace applies them with too)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Dict, List, Tuple

from rocm_build.pins.tables import Pin, pin_path
from rocm_build.pins.update.commits import Move
from rocm_build.pins.update.host_git import checkout
from rocm_build.upstream.workspace_repo import patches_apply


def patch_files(patches_root: Path, name: str) -> List[str]:
    directory = Path(pin_path(str(patches_root), name, f"pin {name!r}"))
    if not directory.is_dir():
        return []
    return sorted(
        str(p) for p in directory.iterdir() if p.name.endswith((".patch", ".diff", ".edit.toml"))
    )


def python3() -> str:
    """The interpreter builds apply patches with (scripts/apply_patches.py needs tomllib, 3.11+)."""
    return shutil.which("python3", path="/usr/bin:/bin:/usr/local/bin") or "python3"


def keep_patchable(
    moves: List[Move], pins: Dict[str, Pin], patches_dir: Path, work: str, force: bool
) -> Tuple[List[Move], bool]:
    """The moves to make, and whether some were held back: a move whose patches fail at its
    new commit is reported, and dropped unless `force`."""
    failures = []
    unchecked = []
    for move in moves:
        patches = patch_files(patches_dir, move.name)
        if not patches:
            unchecked.append(move.name)
            continue
        tree = pin_path(work, move.name, f"pin {move.name!r}", prefix="check-")
        checkout(move.name, pins[move.name].url, move.new, tree)
        problem = patches_apply(python3(), tree, patches)
        if problem:
            failures.append((move, problem))
    if unchecked:
        # Patches belong to targets (upstream_repo's `patches`), which this program cannot read:
        # it looks in DIR/<pin>/ only, so a pin whose patch set lives elsewhere is said, not skipped.
        print(
            f"no patches checked for {', '.join(sorted(unchecked))}: no {patches_dir}/<pin>/ with patches; a patch set "
            "elsewhere (a target's `patches`) is checked after the move by `pants check <target>`", file=sys.stderr,
        )  # fmt: skip
    for move, problem in failures:
        print(f"[{move.name}] patches do not apply to {move.new}:\n  {problem}", file=sys.stderr)
    if not failures or force:
        return moves, False
    failed = {m.name for m, _ in failures}
    print(
        f"not moving {', '.join(sorted(failed))}: refresh the patches, or pass --force "
        "to move the pins anyway", file=sys.stderr,
    )  # fmt: skip
    return [m for m in moves if m.name not in failed], True
