"""The Python a rocm_wheel is built with: a pinned toolchain input, found the way Pants finds
interpreters (`[python-bootstrap].search_path`: pyenv, PATH), keyed by what it is.

A target asks for `python="3.12"` (or a constraint such as `CPython==3.12.*`; the default is
`[rocm-build].python`). The first interpreter on the search path that satisfies it is used.
Its identity (implementation and full version) goes into every key it touches; its location
does not: processes reach it through a link kept in a Pants named cache named by the
identity (`.python/root` in the sandbox -> the interpreter's prefix), as with toolchains, so
machines with Python at other paths share cache entries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Tuple

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from pants.core.subsystems.python_bootstrap import PythonBootstrap
from pants.core.util_rules.system_binaries import BinaryPathRequest, BinaryPaths, BinaryPathTest
from pants.engine.process import Process, ProcessCacheScope, ProcessResult
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.util.logging import LogLevel
from pants.core.subsystems import python_bootstrap
from pants.core.util_rules import system_binaries
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.toolchain.container import BuildImage, ImagePythons
from rocm_build.errors import RocmBuildError
from rocm_build.subsystems.host_tools import HostTools, cache_suffix, link_process
from rocm_build.subsystems import host_tools
from rocm_build.toolchain import container

PYTHON_LINK = ".python"  # in a sandbox: PYTHON_LINK/root -> the interpreter's prefix
MINORS = range(14, 5, -1)  # python3.14 ... python3.6, newest first
_SHORT = re.compile(r"^\d+\.\d+$")
_CONSTRAINT = re.compile(r"^(?P<impl>[A-Za-z]+)?\s*(?P<spec>[<>=!~].*)$")


@dataclass(frozen=True)
class Constraint:
    implementation: str
    specifier: SpecifierSet

    @property
    def minor(self) -> Optional[str]:
        """`3.12` when the constraint allows one minor version only (locks are per minor)."""
        (only, *more) = list(self.specifier) or [None]
        if only is not None and not more and only.operator == "==":
            parts = only.version.split(".")
            return ".".join(parts[:2]) if len(parts) >= 2 and parts[1] != "*" else None
        found = [f"3.{m}" for m in MINORS if self.allows_minor(m)]
        return found[0] if len(found) == 1 else None

    def allows_minor(self, minor: int) -> bool:
        return any(self.specifier.contains(f"3.{minor}.{p}", prereleases=True) for p in (0, 1, 20, 99))


def parse_constraint(text: str, owner: str) -> Constraint:
    """`3.12` -> CPython==3.12.*; `CPython>=3.11,<3.13` as written."""
    text = text.strip()
    if _SHORT.match(text):
        return Constraint("CPython", SpecifierSet(f"=={text}.*"))
    m = _CONSTRAINT.match(text)
    try:
        if not m:
            raise InvalidSpecifier(text)
        return Constraint(m.group("impl") or "CPython", SpecifierSet(m.group("spec")))
    except InvalidSpecifier:
        raise RocmBuildError(
            f"{owner}: `python` {text!r} is neither a version like \"3.12\" nor an interpreter "
            "constraint like \"CPython==3.12.*\""
        ) from None


@dataclass(frozen=True)
class BuildPython:
    """The interpreter wheels are built with: identity in keys, reached through a link."""

    path: str  # where it is on this machine: for people (rocm-plan), never in a key
    implementation: str  # e.g. CPython
    version: str  # e.g. 3.12.1
    prefix: str = ""  # sys.base_prefix: what the link points at
    in_image: bool = False  # the image's: builds link to `prefix` inside the container

    @property
    def identity(self) -> str:
        return f"{self.implementation} {self.version}"

    @property
    def major_minor(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def cache_name(self) -> str:
        return "rocm_python_" + cache_suffix(self.identity)

    @property
    def in_sandbox(self) -> str:
        """The interpreter, relative to a sandbox that mounts `cache_name` at PYTHON_LINK."""
        return f"{PYTHON_LINK}/root/bin/python{self.major_minor}"


@dataclass(frozen=True)
class BuildPythonRequest:
    constraint: str
    owner: str  # the target that asks, for messages
    image: Optional[BuildImage] = None  # set: the Python inside this image


async def _candidates(search_path: Tuple[str, ...], constraint: Constraint) -> Tuple[str, ...]:
    names = [f"python3.{m}" for m in MINORS if constraint.allows_minor(m)]
    found = await MultiGet(
        Get(BinaryPaths, BinaryPathRequest(binary_name=n, search_path=search_path, test=BinaryPathTest(["-V"])))
        for n in names
    )
    return tuple(dict.fromkeys(p.path for paths in found for p in paths.paths))


async def _image_python(request: BuildPythonRequest, constraint: Constraint) -> BuildPython:
    assert request.image
    pythons = await Get(ImagePythons, BuildImage, request.image)
    for path, implementation, version, prefix in pythons.found:
        if implementation == constraint.implementation and constraint.specifier.contains(version, prereleases=True):
            return BuildPython(path, implementation, version, prefix, in_image=True)
    have = ", ".join(f"{p} ({i} {v})" for p, i, v, _ in pythons.found) or "none"
    raise RocmBuildError(
        f"{request.owner}: no Python interpreter in image {request.image.reference} (environment "
        f"{request.image.environment}) matches `python` = {request.constraint!r} "
        f"({constraint.implementation}{constraint.specifier}); the image has: {have}. Install one in "
        "the image's recipe, or set the target's `python` to one the image has."
    )


@rule(desc="Finding the build Python")
async def find_build_python(request: BuildPythonRequest, bootstrap: PythonBootstrap, tools: HostTools) -> BuildPython:
    constraint = parse_constraint(request.constraint, request.owner)
    if request.image:
        return await _image_python(request, constraint)
    search_path = tuple(bootstrap.interpreter_search_paths)
    for path in await _candidates(search_path, constraint):
        result = await Get(
            ProcessResult,
            Process(
                argv=(path, "-c", "import platform, sys; print(platform.python_implementation(), platform.python_version(), sys.base_prefix)"),
                description=f"Asking {path} what it is",
                level=LogLevel.DEBUG,
                # Machine state: re-asked by each new pantsd, never shared.
                cache_scope=ProcessCacheScope.PER_RESTART_SUCCESSFUL,
            ),
        )
        implementation, version, prefix = result.stdout.decode().split(maxsplit=2)
        if implementation == constraint.implementation and constraint.specifier.contains(version, prereleases=True):
            python = BuildPython(path, implementation, version, prefix.strip())
            link = link_process(tools, python.cache_name, PYTHON_LINK, python.prefix, f"Linking {python.identity} for builds")
            await Get(ProcessResult, Process, link)
            return python
    raise RocmBuildError(
        f"{request.owner}: no Python interpreter matches `python` = {request.constraint!r} "
        f"({constraint.implementation}{constraint.specifier}). Looked on [python-bootstrap].search_path: "
        f"{', '.join(search_path) or '(empty)'}. Install one (`pyenv install 3.12`, `apt-get install "
        "python3.12`, `dnf install python3.12`), or set the target's `python` (or `[rocm-build].python` in "
        "pants.toml) to a Python you have."
    )


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        *python_bootstrap.rules(),
        *system_binaries.rules(),
        *host_tools.rules(),
        *container.rules(),
    ])
