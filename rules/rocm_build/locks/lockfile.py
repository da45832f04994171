"""The build-requirements lock: a pip requirements file with a sha256 for every distribution.

pip enforces it (`--require-hashes`), and its header says what it was made from, so a build
can tell when the lock no longer matches its inputs:

    # rocm-pants build-requirements lock. Generated: do not edit.
    # regenerate: pants lock-build-requirements components/vllm:wheel
    # pin: vllm bc390b9142e8399054bb81ebe739a23ae2cd5d86
    # python: 3.11
    # requirement: -r requirements/build.txt
    # file: requirements/build.txt sha256:4f2a...
    # left-out: cmake==3.31.6 (builds use the toolchain's system cmake; seed 000)
    # from setuptools_scm-8.1.0-py3-none-any.whl
    setuptools-scm==8.1.0 --hash=sha256:897a...
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

TITLE = "# rocm-pants build-requirements lock. Generated: do not edit."
# Distributions a lock never holds, with the reason written into the lock.
LEFT_OUT = {"cmake": "builds use the toolchain's system cmake; seed 000"}
INCLUDE_OPTIONS = ("-r", "--requirement", "-c", "--constraint")
_HEADER = re.compile(r"^# (regenerate|pin|python|requirement|file|left-out): (.*)$")
_DIST = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+) --hash=sha256:([0-9a-f]{64})$")



def resolve_name(kind: str, path: str) -> str:
    """A lock's resolve of `pants generate-lockfiles` (goals/lockfiles.py), by its kind (`build`,
    `run`) and path: `build:py3.11/mini-vllm` for 3rdparty/build/py3.11/mini-vllm.lock; a lock
    elsewhere (a `lock` field) keeps its whole path. Here, engine-free, for the pin programs too."""
    prefix = f"3rdparty/{kind}/"
    rel = path[len(prefix) :] if path.startswith(prefix) else path
    return f"{kind}:{rel[: -len('.lock')] if rel.endswith('.lock') else rel}"

class LockError(ValueError):
    pass


@dataclass(frozen=True)
class LockedDist:
    name: str
    version: str
    sha256: str
    filename: str


@dataclass(frozen=True)
class BuildLock:
    pin: str
    commit: str
    python: str  # major.minor of the interpreter the lock was resolved for
    requirements: Tuple[str, ...]  # requirement lines, as `requirement_lines` gives them
    files: Tuple[Tuple[str, str], ...]  # (path in the tree, sha256) of every file they name
    dists: Tuple[LockedDist, ...]
    left_out: Tuple[str, ...] = ()
    regenerate: str = ""


@dataclass(frozen=True)
class ResolvedLock:
    """A lock resolved against the index, not yet written: where it goes and what it says."""

    path: str  # from the build root
    lock: BuildLock


def requirement_lines(values: Sequence[str]) -> Tuple[str, ...]:
    """`build_requirements` values as requirement-file lines; `["-r", "x.txt"]` is one line."""
    tokens = shlex.split(" ".join(values))
    lines: List[str] = []
    while tokens:
        token = tokens.pop(0)
        if token in INCLUDE_OPTIONS:
            if not tokens:
                raise LockError(f"`{token}` is not followed by a file name")
            lines.append(f"{token} {tokens.pop(0)}")
        else:
            lines.append(token)
    return tuple(lines)


def included_files(lines: Sequence[str], read: Callable[[str], Optional[str]]) -> Tuple[str, ...]:
    """Every file the lines name with -r/-c, following nested ones; paths are tree-relative."""
    found: List[str] = []

    def visit(lines: Sequence[str], base: str) -> None:
        for line in lines:
            parts = line.split("#", 1)[0].split()
            if len(parts) == 2 and parts[0] in INCLUDE_OPTIONS:
                path = _join(base, parts[1])
                if path in found:
                    continue
                found.append(path)
                text = read(path)
                if text is None:
                    raise LockError(f"`{line}` names {path}, which is not in the source tree")
                visit(text.splitlines(), path.rpartition("/")[0])

    visit(lines, "")
    return tuple(found)


def _join(base: str, rel: str) -> str:
    parts: List[str] = base.split("/") if base else []
    for part in rel.split("/"):
        if part == "..":
            if not parts:
                raise LockError(f"requirement file {rel} points outside the source tree")
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)


def render(lock: BuildLock) -> str:
    lines = [
        TITLE,
        f"# regenerate: {lock.regenerate}",
        f"# pin: {lock.pin} {lock.commit}",
        f"# python: {lock.python}",
        *(f"# requirement: {r}" for r in lock.requirements),
        *(f"# file: {path} sha256:{sha}" for path, sha in lock.files),
        *(f"# left-out: {d}" for d in lock.left_out),
    ]
    for dist in sorted(lock.dists, key=lambda d: d.name.lower()):
        lines += [f"# from {dist.filename}", f"{dist.name}=={dist.version} --hash=sha256:{dist.sha256}"]
    return "\n".join(lines) + "\n"


def parse(text: str, path: str) -> BuildLock:
    header: Dict[str, List[str]] = {}
    dists: List[LockedDist] = []
    filename = ""
    for number, line in enumerate(text.splitlines(), 1):
        m = _HEADER.match(line)
        if m:
            header.setdefault(m.group(1), []).append(m.group(2))
        elif line.startswith("# from "):
            filename = line[len("# from "):]
        elif line.startswith("#") or not line.strip():
            continue
        else:
            d = _DIST.match(line)
            if not d:
                raise LockError(f"{path}:{number}: not a locked distribution (`name==version --hash=sha256:...`): {line!r}")
            dists.append(LockedDist(d.group(1), d.group(2), d.group(3), filename))
    if not text.startswith(TITLE) or "pin" not in header or "python" not in header:
        raise LockError(f"{path} is not a rocm-pants build-requirements lock (its header is missing)")
    pin, _, commit = header["pin"][0].partition(" ")
    files = []
    for entry in header.get("file", []):
        file_path, _, sha = entry.rpartition(" sha256:")
        files.append((file_path, sha))
    return BuildLock(
        pin=pin,
        commit=commit,
        python=header["python"][0],
        requirements=tuple(header.get("requirement", [])),
        files=tuple(files),
        dists=tuple(dists),
        left_out=tuple(header.get("left-out", [])),
        regenerate=header.get("regenerate", [""])[0],
    )


def from_pip_report(report: dict, also_left_out: Mapping[str, str] = {}) -> Tuple[Tuple[LockedDist, ...], Tuple[str, ...]]:
    """The distributions of a `pip install --dry-run --report` resolve, and the ones left out
    (LEFT_OUT's, and `also_left_out`'s: PEP 503 name -> why)."""
    kept, left = [], []
    why_left_out = {**LEFT_OUT, **also_left_out}
    for item in report["install"]:
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        info = item["download_info"]
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in why_left_out:
            left.append(f"{name}=={version} ({why_left_out[key]})")
            continue
        sha = info.get("archive_info", {}).get("hashes", {}).get("sha256")
        if not sha:
            raise LockError(f"pip gave no sha256 for {name}=={version} ({info.get('url')})")
        kept.append(LockedDist(name, version, sha, info["url"].rsplit("/", 1)[-1].split("#")[0]))
    return tuple(kept), tuple(left)


def stale_reasons(
    lock: BuildLock, pin: str, commit: str, python: str, requirements: Sequence[str], tree_sha256: Dict[str, Optional[str]]
) -> List[str]:
    """Why `lock` no longer matches what the build would install from; empty if it does."""
    why = []
    if (lock.pin, lock.commit) != (pin, commit):
        why.append(f"it was made for pin `{lock.pin}` at {lock.commit}, the build uses `{pin}` at {commit}")
    if lock.python != python:
        why.append(f"it was resolved for Python {lock.python}, the build uses Python {python}")
    if tuple(lock.requirements) != tuple(requirements):
        why.append(f"it was made from `build_requirements` {list(lock.requirements)}, the target now says {list(requirements)}")
    for path, sha in lock.files:
        now = tree_sha256.get(path)
        if now != sha:
            state = "is gone from the tree" if now is None else "changed in the tree"
            why.append(f"{path} {state} since the lock was made")
    return why
