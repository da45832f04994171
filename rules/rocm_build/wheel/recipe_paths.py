"""The files a rocm_wheel recipe names in its upstream tree, found without running anything.

A recipe that names a file its pinned tree does not have (a requirement file upstream moved,
a script renamed since the pin) fails hours into a chain build. These are read from the
recipe's own words, so the preflight can look for them in the patched tree first:

- `-r FILE` / `-c FILE` in `build_requirements`;
- scripts that `build_command` runs: the first operand of `python`/`python3`/`bash`/`sh`/
  `source`/`.` and commands spelled `./x`, relative to the directory the steps `cd` into;
- the project a `pip wheel .` / `python -m build` wheel command builds: its directory needs a
  `setup.py` or a `pyproject.toml`.

Operands that hold `$` are skipped: they are known only at run time. A step that runs a file
an earlier step writes names it through a variable (`python $PWD/generated.py`).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence, Tuple

from rocm_build.locks.lockfile import INCLUDE_OPTIONS

INTERPRETERS = {"python", "python3", "bash", "sh", "source", "."}
# Interpreter options that take the next word as their value, not a script.
TAKES_VALUE = {"-c", "-m", "-W", "-X", "-o", "-O"}
PROJECT_FILES = ("setup.py", "pyproject.toml")
_SEPARATORS = re.compile(r"&&|\|\||;|\|")


@dataclass(frozen=True)
class NamedPath:
    path: str  # tree-relative; for a project, its directory ("" is the root)
    named_by: str  # the recipe's words that name it
    is_project: bool = False  # a directory that needs setup.py or pyproject.toml

    def candidates(self) -> Tuple[str, ...]:
        """The tree files any one of which satisfies it."""
        if self.is_project:
            return tuple(posixpath.join(self.path, f) for f in PROJECT_FILES)
        return (self.path,)


def _simple_commands(step: str) -> List[List[str]]:
    commands = []
    for part in _SEPARATORS.split(step):
        try:
            words = shlex.split(part)
        except ValueError:  # an unbalanced quote across separators: not ours to parse
            return []
        if words:
            commands.append(words)
    return commands


def _script_operand(words: Sequence[str]) -> Optional[str]:
    if words[0].startswith("./"):
        return words[0]
    if words[0] not in INTERPRETERS:
        return None
    rest = list(words[1:])
    while rest:
        word = rest.pop(0)
        if word in ("-c", "-m"):
            return None  # inline code or a module, not a file
        if word in TAKES_VALUE:
            rest = rest[1:]
        elif not word.startswith("-"):
            return word
    return None


def named_paths(requirements: Sequence[str], steps: Sequence[str], wheel_command: str) -> Tuple[NamedPath, ...]:
    found: List[NamedPath] = []
    for line in requirements:
        parts = line.split()
        if len(parts) == 2 and parts[0] in INCLUDE_OPTIONS:
            found.append(NamedPath(posixpath.normpath(parts[1]), f"build_requirements `{line}`"))
    cwd: Optional[str] = ""
    for step in steps:
        for words in _simple_commands(step):
            if cwd is None:
                break
            if words[0] == "cd":
                target = words[1] if len(words) > 1 else ""
                cwd = None if "$" in target or target.startswith("/") else _join(cwd, target)
                continue
            script = _script_operand(words)
            if script and "$" not in script and not script.startswith("/"):
                found.append(NamedPath(_join(cwd, script), f"build_command `{step}`"))
    if cwd is not None and _builds_project(wheel_command):
        found.append(NamedPath(cwd, f"wheel_command `{wheel_command}`", is_project=True))
    return tuple(found)


def _builds_project(command: str) -> bool:
    words = command.split()
    return ("wheel" in words and "." in words) or "build" in words


def _join(cwd: str, path: str) -> str:
    joined = posixpath.normpath(posixpath.join(cwd, path)) if path else ""
    return "" if joined == "." else joined


def missing_paths(paths: Iterable[NamedPath], files: Sequence[str]) -> Tuple[NamedPath, ...]:
    """The named paths that the tree, given as its list of files, does not have."""
    present = set(files)
    return tuple(p for p in paths if not any(c in present for c in p.candidates()))
