"""A pins file, or a pins directory read as one: the `pins_file` of a target may name either.

A directory holds one file per component (`vllm.toml` with `[vllm]`; `therock-torch.toml` with
`[prebuilt.therock-torch]` and its device pins; `prebuilt.toml` with what every `[prebuilt.*]`
table shares). Its `*.toml` files, read in name order, mean what one file holding them all would
mean; the split exists for Pants: `--changed-since` knows which files changed, so a moved pin
selects the targets of its own file, not those of every pin (graph/edges.py).

Pure code (no engine): the rules (load.py) and update-pins read pins through it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterable, Mapping, Tuple, TypeVar

from rocm_build.pins.tables import PREBUILT, PinsError, load_toml

T = TypeVar("T")
SUFFIX = ".toml"


def is_directory(pins_file: str) -> bool:
    """A `pins_file` that does not end in `.toml` names a pins directory."""
    return not pins_file.endswith(SUFFIX)


def glob_of(pins_file: str) -> str:
    return f"{pins_file.rstrip('/')}/*{SUFFIX}" if is_directory(pins_file) else pins_file


@dataclass(frozen=True)
class PinsFiles:
    """The files of a pins file or directory: (path, text) in name order."""

    path: str  # as `pins_file` gives it
    files: Tuple[Tuple[str, str], ...]

    @classmethod
    def of(cls, path: str, contents: Iterable[Tuple[str, bytes]]) -> "PinsFiles":
        """From the engine's file contents, in name order."""
        return cls(path, tuple(sorted((name, decoded(name, data)) for name, data in contents)))

    @property
    def text(self) -> str:
        return "".join(text if text.endswith("\n") or not text else text + "\n" for _, text in self.files)

    def tables(self) -> Dict[str, str]:
        """Each table's name (`vllm`, `prebuilt.therock-torch`, `prebuilt` for the shared keys)
        to the file holding it. Syntax errors name their file and line; a table in two files is
        refused, as one file cannot hold it twice."""
        where: Dict[str, str] = {}
        for path, text in self.files:
            for table in table_names(load_toml(path, text)):
                if table in where:
                    raise PinsError(f"{path}: [{table}] is in {where[table]} too; a pin is in one file of {self.path}")
                where[table] = path
        return where

    def file_of(self, table: str) -> str:
        """The file that holds `table` (the directory's `<table>.toml` when none does yet)."""
        found = self.tables().get(table)
        if found:
            return found
        return f"{self.path.rstrip('/')}/{table.rpartition('.')[2]}{SUFFIX}" if is_directory(self.path) else self.path

    def parse(self, parse: Callable[[str, str], Mapping[str, T]]) -> Dict[str, T]:
        """The pins `parse` reads from all files together; an error about one table names the
        file that holds it instead of the directory."""
        where = self.tables()
        try:
            return dict(parse(self.path, self.text))
        except PinsError as e:
            found = re.match(rf"{re.escape(self.path)}: \[([^\]]+)\]", str(e))
            if not is_directory(self.path) or not found or found.group(1) not in where:
                raise
            raise PinsError(where[found.group(1)] + str(e)[len(self.path) :]) from None


def decoded(path: str, data: bytes) -> str:
    """A pins file's text: UTF-8 (TOML's encoding), else one line naming the file and the fix."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PinsError(
            f"{path}: not UTF-8 (byte {data[e.start]:#04x} at offset {e.start}); TOML files are UTF-8: save it as "
            "UTF-8 (`iconv -f latin1 -t utf-8`)"
        ) from None


def table_names(document: Mapping[str, object]) -> Tuple[str, ...]:
    names = []
    for key, value in document.items():
        if key != PREBUILT:
            names.append(key)
            continue
        shared = {k: v for k, v in value.items() if not isinstance(v, Mapping)} if isinstance(value, Mapping) else {}
        names += [PREBUILT] if shared else []
        names += [f"{PREBUILT}.{k}" for k, v in (value.items() if isinstance(value, Mapping) else ()) if isinstance(v, Mapping)]
    return tuple(names)


def read_pins_files(path: Path, missing_ok: bool = False) -> PinsFiles:
    """From disk (update-pins, patch-workspace): a file, or a directory's `*.toml` files, read
    as the build reads the engine's bytes of them (`PinsFiles.of`). `missing_ok`: a path that
    does not exist holds no pins (a chain without archives)."""
    if missing_ok and not path.exists():
        return PinsFiles(str(path), ())
    if path.is_dir():
        files = sorted(path.glob(f"*{SUFFIX}"))
        if not files:
            raise PinsError(f"{path}: a pins directory with no *{SUFFIX} file")
        return PinsFiles.of(str(path), ((str(f), f.read_bytes()) for f in files))
    return PinsFiles.of(str(path), ((str(path), path.read_bytes()),))
