"""wheel/build_lock.py: a build lock is resolved from the requirement lines and the files they name
in the patched tree (nested `-r` too), and only those files are given to pip; the lock records
the pin, its commit, the Python, each file's sha256 and what pip resolved. No `-r` line: the tree
is not fetched. A line naming a file the tree lacks is an error naming the pin."""

from __future__ import annotations

import hashlib
from typing import Any, Dict, List

import pytest
from pants.engine.fs import EMPTY_DIGEST, CreateDigest, Digest, DigestContents, FileContent, MergeDigests

from rocm_build.errors import RocmBuildError
from rocm_build.locks.build_requirements import PipResolved, PipResolveRequest
from rocm_build.locks.lockfile import LockedDist
from rocm_build.testutil.engine import drive
from rocm_build.testutil.specs import COMMIT, upstream_spec, wheel_spec
from rocm_build.toolchain.interpreters import BuildPython
from rocm_build.upstream.fetch import TREE_DIR
from rocm_build.upstream.source_tree import CheckedOut, SourceTree
from rocm_build.upstream.upstream_repo import ResolvedUpstream
from rocm_build.wheel.build_lock import REQUIREMENTS_IN, BuildLockRequest, resolve_build_lock
from rocm_build.wheel.build_spec import WheelBuildSpec

OWNER = "tests/mini/torch:wheel"
LOCK = "3rdparty/build/py3.11/mini-torch.lock"
PYTHON = BuildPython("/usr/bin/python3.11", "CPython", "3.11.2")
NINJA = LockedDist("ninja", "1.11.1", "a" * 64, "ninja-1.11.1-py3-none-any.whl")
PACK, READ, MERGED = Digest("1" * 64, 1), Digest("3" * 64, 3), Digest("4" * 64, 4)  # stand-ins the rule passes on


def resolve(requirements, tree: Dict[str, str]):
    """The lock of tests/mini/torch:wheel whose patched tree holds `tree`; returns the lock, the
    Gets asked and the files each CreateDigest made."""
    spec = wheel_spec(requirements=tuple(requirements), lock_path=LOCK)
    up = upstream_spec()
    resolved = ResolvedUpstream(up.address, up.pin_name, up.pin, (), SourceTree(PACK, EMPTY_DIGEST), "", 0)
    created: List[Dict[str, bytes]] = []
    checked_out: List[str] = []  # the paths of the last checkout, which the next DigestContents reads

    def answer(output_type: type, request: Any) -> Any:
        if isinstance(request, CreateDigest):
            created.append({fc.path: fc.content for fc in request})
            return Digest(str(len(created)) * 64, len(created))
        if isinstance(request, MergeDigests):
            return MERGED
        if output_type is CheckedOut:
            checked_out[:] = [p for p in request.paths if p in tree]
            return CheckedOut(READ, tuple((p, p) for p in checked_out))
        if output_type is DigestContents:
            return DigestContents([FileContent(f"{TREE_DIR}/{p}", tree[p].encode()) for p in checked_out])
        return {WheelBuildSpec: spec, BuildPython: PYTHON, ResolvedUpstream: resolved, PipResolved: PipResolved((NINJA,), ("cmake==3.31.6",))}[output_type]

    result, asked = drive(resolve_build_lock(BuildLockRequest(spec.address)), answer)
    return result, asked, created


def test_requirements_without_files_need_no_tree() -> None:
    result, asked, created = resolve(["ninja", "cmake"], {})
    assert ResolvedUpstream not in [t for t, _ in asked]
    assert result.path == LOCK
    lock = result.lock
    assert (lock.pin, lock.commit, lock.python, lock.requirements, lock.files) == ("mini-torch", COMMIT, "3.11", ("ninja", "cmake"), ())
    assert (lock.dists, lock.left_out, lock.regenerate) == ((NINJA,), ("cmake==3.31.6",), f"pants lock-build-requirements {OWNER}")
    assert created[-1] == {REQUIREMENTS_IN: b"ninja\ncmake\n"}
    pip = next(r for t, r in asked if t is PipResolved)
    assert pip == PipResolveRequest(OWNER, "", ("ninja", "cmake"), PYTHON, REQUIREMENTS_IN, MERGED, f"Resolving the build requirements of {OWNER}")


def test_nested_requirement_files_are_read_from_the_patched_tree_and_hashed() -> None:
    tree = {"requirements/build.txt": "-r common.txt\nninja\n", "requirements/common.txt": "packaging\n", "setup.py": "unused"}
    result, asked, created = resolve(["-r requirements/build.txt"], tree)
    assert result.lock.files == tuple((p, hashlib.sha256(tree[p].encode()).hexdigest()) for p in ("requirements/build.txt", "requirements/common.txt"))
    # pip gets those files and nothing else of the tree.
    assert created[0] == {f"{TREE_DIR}/{p}": tree[p].encode() for p in ("requirements/build.txt", "requirements/common.txt")}


def test_a_file_the_tree_lacks_names_the_line_and_the_pin() -> None:
    with pytest.raises(RocmBuildError) as e:
        resolve(["-r requirements/gone.txt"], {})
    assert str(e.value) == (
        f"{OWNER}: `build_requirements`: `-r requirements/gone.txt` names requirements/gone.txt, which is not in the "
        f"source tree (pin mini-torch at {COMMIT})"
    )
