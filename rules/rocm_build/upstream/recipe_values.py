"""A value an upstream's own recipe names, for pins derived from it.

`derived_from = "<pin>:<path>#<NAME>"` reads one value of a file of that pin's tree:

- a Dockerfile's `ARG NAME=value` (vLLM's docker/Dockerfile.rocm_base: `ARG PYTORCH_BRANCH="733fca1"`);
- a requirement file's exact pin, `NAME==version` (vLLM's requirements/build/rocm.txt:
  `torch==2.12.0+rocm7.14.0`; the name compared as PEP 503 normalizes it, packaging's
  canonicalize_name);
- a CMake variable, `set(NAME "value")`, or the `GIT_TAG` of the FetchContent/ExternalProject
  whose name is NAME (vLLM's cmake/external_projects/triton_kernels.cmake).

Without `#NAME` the file's first full commit SHA is the value (derived_from's first form, e.g.
PyTorch's cmake/External/aotriton.cmake).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import List, Optional, Pattern, Tuple

from packaging.utils import canonicalize_name


@dataclass(frozen=True)
class RecipeValue:
    path: str
    line: int
    name: str
    value: str
    text: str  # the line as the file writes it

    def where(self, source: str) -> str:
        return f"{self.path} line {self.line} of {source} (`{self.text}`)"


def split_spec(spec: str) -> Tuple[str, str, str]:
    """`vllm:docker/Dockerfile.rocm_base#PYTORCH_BRANCH` -> (vllm, docker/Dockerfile.rocm_base, PYTORCH_BRANCH)."""
    source, _, rest = spec.partition(":")
    path, _, name = rest.partition("#")
    return source, path, name


def recipe_value(path: str, text: str, name: str) -> Optional[RecipeValue]:
    """The value `name` has in the file at `path`, with its line; None when the file does not set it."""
    base = posixpath.basename(path)
    lines = text.splitlines()
    if base.startswith("Dockerfile") or base.endswith((".Dockerfile", ".dockerfile", "Containerfile")):
        return _first_line(path, lines, name, re.compile(rf"""^\s*(?i:ARG)\s+{re.escape(name)}\s*=\s*["']?([^"'\s#]+)["']?"""))
    if base.endswith((".cmake", "CMakeLists.txt")):
        # The first `set(NAME ...)` of the file, whatever branch it is in (vLLM's triton_kernels.cmake
        # sets the ROCm tag first); a commented-out line does not count.
        found = _first_line(path, lines, name, re.compile(rf'^\s*(?i:set)\(\s*{re.escape(name)}\s+"?([^"\s)]+)"?'))
        block = re.compile(rf'(?:FetchContent_Declare|ExternalProject_Add)\(\s*{re.escape(name)}\b[^)]*?GIT_TAG\s+"?([^"\s)]+)"?', re.S)
        match = None if found else block.search(text)
        if match:
            number = text.count("\n", 0, match.start(1)) + 1
            return RecipeValue(path, number, name, match.group(1), lines[number - 1].strip())
        return found
    wanted = canonicalize_name(name)  # a requirement file
    for number, line in enumerate(lines, 1):
        found = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*==\s*([^\s;#,]+)", line)
        if found and canonicalize_name(found.group(1)) == wanted:
            return RecipeValue(path, number, name, found.group(2), line.strip())
    return None


def _first_line(path: str, lines: List[str], name: str, pattern: Pattern[str]) -> Optional[RecipeValue]:
    for number, line in enumerate(lines, 1):
        found = pattern.search(line)
        if found:
            return RecipeValue(path, number, name, found.group(1), line.strip())
    return None
