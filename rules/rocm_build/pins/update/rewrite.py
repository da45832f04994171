"""update-pins' writes: the pins files with the planned moves, rewritten in place (comments,
order and layout kept; pins/text_fields.py), each move in the file that holds its table,
printed as a diff or written atomically."""

from __future__ import annotations

import difflib
import os
import sys
from pathlib import Path
from typing import Dict, Sequence, Tuple

from rocm_build.pins.files import PinsFiles
from rocm_build.pins.text_fields import set_commit_in_text, set_fields_in_text
from rocm_build.pins.update.archive_moves import ArchiveMove
from rocm_build.pins.update.commits import Move
from rocm_build.pins.update.prebuilt_index import PrebuiltMove


def moved_pins(text: str, moves: Sequence[Move], prebuilt_moves: Sequence[PrebuiltMove]) -> str:
    """The pins file with the git pins' new commits (and a release pin's version), and the
    prebuilt pins' new files."""
    for move in moves:
        text = set_commit_in_text(text, move.name, move.new)
        if move.version:
            text = set_fields_in_text(text, move.name, {"version": move.version}, add_missing=True)
        if move.track:
            text = set_fields_in_text(text, move.name, {"track": move.track}, add_missing=True)
    for pmove in prebuilt_moves:
        text = set_fields_in_text(text, pmove.table, pmove.values, add_missing=True)
    return text


def moved_archives(text: str, archive_moves: Sequence[ArchiveMove]) -> str:
    for archive in archive_moves:
        text = set_fields_in_text(text, archive.name, archive.values)
    return text


def moved_pin_files(
    files: PinsFiles, moves: Sequence[Move], prebuilt_moves: Sequence[PrebuiltMove]
) -> Dict[Path, Tuple[str, str]]:
    """Each file of a pins file or directory, before and after the moves of the tables it holds."""
    return {
        Path(path): (text, moved_pins(
            text, [m for m in moves if files.file_of(m.name) == path], [m for m in prebuilt_moves if files.file_of(m.table) == path]
        ))
        for path, text in files.files
    }  # fmt: skip


def moved_archive_files(files: PinsFiles, archive_moves: Sequence[ArchiveMove]) -> Dict[Path, Tuple[str, str]]:
    return {
        Path(path): (text, moved_archives(text, [m for m in archive_moves if files.file_of(m.name) == path]))
        for path, text in files.files
    }


def print_diff(path: Path, before: str, after: str) -> None:
    sys.stdout.writelines(difflib.unified_diff(before.splitlines(True), after.splitlines(True), str(path), str(path)))


def write_if_changed(path: Path, before: str, after: str) -> None:
    """Replaces the file at once (a temporary file beside it, renamed), so it is never half written."""
    if after == before:
        return
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(after)
    os.replace(tmp, path)
    print(f"wrote {path}")
