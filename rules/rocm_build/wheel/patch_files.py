"""Files our patches add must reach the wheel, whatever the upstream's build backend does with
them: scikit-build-core leaves out a file the tree's `.gitignore` covers (PyTorch after its
2.13 cut, pytorch#191632: `torch/_rocm_init.py`, which our torch patch adds, went missing;
TheRock passes `-Cwheel.force-include`), setuptools leaves out data files no `package_data`
names. The wheel still builds and imports; what the patch was for is gone.

An added file is expected in the wheel when the wheel ships the directory it is in (or, for a
src/ layout, the directory its path names below a leading folder) and it is not a build input
(sources, headers, CMake and packaging files, which a build consumes rather than ships).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import FrozenSet, List, Optional, Sequence, Tuple

from pants.engine.fs import Digest, DigestEntries, FileEntry
from pants.engine.rules import Get, collect_rules, rule
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.upstream.fetch import TREE_DIR
from rocm_build.upstream.source_tree import CheckedOut, CheckoutRequest, SourceTree
from rocm_build.upstream import source_tree

BUILD_INPUT_SUFFIXES = (
    ".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".hip", ".h", ".hh", ".hpp", ".inc", ".cmake", ".in", ".pyx",
    ".pxd", ".rs", ".s", ".S", ".patch", ".diff", ".md", ".rst",
)  # fmt: skip
BUILD_INPUT_NAMES = ("setup.py", "setup.cfg", "pyproject.toml", "CMakeLists.txt", "Makefile", "MANIFEST.in", "Cargo.toml", "Cargo.lock")


@dataclass(frozen=True)
class PatchAddedFilesRequest:
    source: SourceTree
    owner: str


@dataclass(frozen=True)
class PatchAddedFiles:
    paths: Tuple[str, ...]  # files the patches wrote that the pinned commit does not have


@rule(desc="Listing the files our patches add")
async def patch_added_files(request: PatchAddedFilesRequest) -> PatchAddedFiles:
    source = request.source
    if not source.touched:
        return PatchAddedFiles(())
    entries = await Get(DigestEntries, Digest, source.changes)
    written = tuple(e.path[len(TREE_DIR) + 1 :] for e in entries if isinstance(e, FileEntry))
    base = await Get(CheckedOut, CheckoutRequest(source.pack, request.owner, "read", written))
    existing = {path for path, _ in base.named}
    return PatchAddedFiles(tuple(sorted(p for p in written if p not in existing)))


# Folders a tree keeps its Python packages under (src/ layouts; triton's python/).
PACKAGE_ROOTS = ("src/", "python/")


def _wheel_path(added: str, directories: FrozenSet[str]) -> Optional[str]:
    """Where the wheel would hold `added`: its path, or its path below a package root."""
    candidates = [added] + [added[len(root) :] for root in PACKAGE_ROOTS if added.startswith(root)]
    return next((c for c in candidates if "/" in c and posixpath.dirname(c) in directories), None)


def missing_patch_files(owner: str, wheel_name: str, patches: str, added: Sequence[str], members: Sequence[str]) -> List[str]:
    """One problem per file our patches add that the wheel should ship and does not."""
    shipped = set(members)
    directories = frozenset(posixpath.dirname(m) for m in members if "/" in m)
    problems = []
    for path in added:
        name = posixpath.basename(path)
        if name in BUILD_INPUT_NAMES or name.endswith(BUILD_INPUT_SUFFIXES):
            continue
        expected = _wheel_path(path, directories)
        if expected and expected not in shipped:
            problems.append(
                f"{owner}: {path}, which our patches add ({patches}), is not in {wheel_name}, although the wheel ships "
                f"{posixpath.dirname(expected)}/: the build backend left it out (a file the tree's .gitignore covers "
                "under scikit-build-core, or data no `package_data` names). Make the build include it (e.g. "
                "`-Cwheel.force-include` for scikit-build-core, `package_data` for setuptools) in the patch"
            )
    return problems


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *source_tree.rules()])
