"""A pins file read through the engine, so that its content is what the rules depend on.

Every kind of pin is read the same way: git pins (tables.py), archive pins (archive_pins.py) and
prebuilt wheel pins (tables.py, read by prebuilt/wheel_rules.py) differ only in the parser.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Tuple

from pants.engine.fs import DigestContents, GlobMatchErrorBehavior, PathGlobs
from pants.engine.rules import Get

from rocm_build.errors import RocmBuildError
from rocm_build.pins.files import PinsFiles, glob_of
from rocm_build.pins.tables import PinsError, parse_pins


@dataclass(frozen=True)
class LoadedPins:
    path: str
    pins: Tuple[Tuple[str, Any], ...]  # (name, Pin or ArchivePin), sorted by name


async def load_pins(path: str, owner: str, parse: Callable[[str, str], Mapping[str, Any]] = parse_pins) -> LoadedPins:
    """The pins file or directory at `path` (git pins by default; `parse_archive_pins` for
    archive pins)."""
    contents = await Get(
        DigestContents,
        PathGlobs(
            [glob_of(path)],
            glob_match_error_behavior=GlobMatchErrorBehavior.error,
            description_of_origin=f"the `pins_file` field of {owner}",
        ),
    )
    files = PinsFiles.of(path, ((fc.path, fc.content) for fc in contents))
    try:
        pins = files.parse(parse)
    except PinsError as e:
        raise RocmBuildError(f"{owner}: {e}") from None
    return LoadedPins(path, tuple(sorted(pins.items())))
