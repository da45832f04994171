"""Will the install set load? Every library an ELF needs, and every symbol it needs, found in
the set, as the dynamic loader would look for them once the wheels are installed.

The facts come from scripts/elf_links.py (one cached process per wheel); this module only
reasons over them, so it is tested on facts read from real binaries. For each host ELF of
each wheel, at its installed path (relative to site-packages):

- each `DT_NEEDED` resolves through the ELF's RUNPATH (or RPATH when there is no RUNPATH),
  `$ORIGIN` being its own directory, to an ELF a wheel of the set installs there; or, by
  SONAME, to a library of its own wheel or of a wheel its wheel requires, which is imported and
  so loaded first (torchvision's `image.so` finds torch's `libc10.so` that way, after `import
  torch`; extensions built with torch's cpp_extension have no RUNPATH at all); or to a library
  every manylinux system has (auditwheel's policy) or one a recipe declares in
  `system_libraries`, with why;
- each undefined dynamic symbol that is not weak is defined in the ELF's load scope (itself
  and the set's libraries it loads, transitively) with the version it asks for; a versioned
  symbol of a system library, and the CPython C API (the interpreter exports it), are not
  ours to check. A symbol without a version binds to a default-version definition anywhere in
  the process: it is also found in what glibc exports (the interpreter has glibc loaded; names
  read from glibc 2.36, glibc_2_36_names.txt), and left alone when the scope holds a system
  library whose names are not known here (libstdc++, a declared one).

Programs (torch/bin/*: they name an interpreter) are not loaded by `import`: elf_links.py leaves
them out. `import` of a wheel that fails here fails the same way on the box: `ImportError: ... cannot
open shared object file` or `... undefined symbol: ...`.
"""

from __future__ import annotations

import pkgutil
import posixpath
from dataclasses import dataclass, field
from typing import AbstractSet, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from rocm_build.install.sdk_modules import project_name

# glibc's libraries: the interpreter has them loaded, so an unversioned reference may bind to
# any name they export at its default version (glibc_names()) whether or not the ELF needs them.
GLIBC_LIBRARIES = frozenset(
    {
        "libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libutil.so.1",
        "libnsl.so.1", "libresolv.so.2", "libanl.so.1", "libmvec.so.1", "ld-linux-x86-64.so.2",
    }
)  # fmt: skip
DYNAMIC_LOADERS = frozenset({"ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"})
# The CPython C API: an extension module's references to it are resolved by the interpreter
# that imports it (manylinux forbids linking libpython).
INTERPRETER_PREFIXES = ("Py", "_Py")
SHOWN = 5  # symbols named in one problem before "and N more"


@dataclass(frozen=True)
class Elf:
    wheel: str  # the wheel file that installs it
    path: str  # installed path, relative to site-packages
    soname: str = ""
    needed: Tuple[str, ...] = ()
    runpath: str = ""
    rpath: str = ""
    defined: Mapping[str, Tuple[str, ...]] = field(default_factory=dict)
    undefined: Tuple[Tuple[str, str, str], ...] = ()  # (symbol, version, library it is needed from)
    versioned: bool = False  # defines versions of its own

    @property
    def name(self) -> str:
        return self.soname or posixpath.basename(self.path)

    def defines(self, symbol: str, version: str) -> bool:
        versions = self.defined.get(symbol)
        if versions is None:
            return False
        return not version or not self.versioned or version in versions


def elves_of(wheel: str, found: Mapping[str, Mapping]) -> List[Elf]:
    """The Elf records of one wheel from elf_links.py's JSON `elves`."""
    return [
        Elf(
            wheel=wheel,
            path=path,
            soname=facts["soname"],
            needed=tuple(facts["needed"]),
            runpath=facts["runpath"],
            rpath=facts["rpath"],
            defined={name: tuple(versions) for name, versions in facts["defined"].items()},
            undefined=tuple(tuple(u) for u in facts["undefined"]),  # type: ignore[misc]
            versioned=facts["versioned"],
        )
        for path, facts in sorted(found.items())
    ]


@dataclass(frozen=True)
class Closure:
    problems: Tuple[str, ...]
    elves: int  # host ELFs read
    links: int  # DT_NEEDED entries resolved
    symbols: int  # undefined symbols checked
    # Libraries not found in the set, left to an SDK the set installs from an index and this
    # check cannot read (`unread_sdk`), each with an ELF that needs it.
    left_to_sdk: Tuple[Tuple[str, str], ...] = ()


def project(wheel: str) -> str:
    """The normalized project of a wheel file name (PEP 503)."""
    return project_name(wheel.split("-", 1)[0])


def search_dirs(elf: Elf) -> List[str]:
    """The ELF's own search path, `$ORIGIN` expanded; a directory outside site-packages (an
    absolute one, or one that climbs above it) is kept as written: the set cannot hold it."""
    origin = posixpath.dirname(elf.path) or "."
    dirs = []
    for entry in (elf.runpath or elf.rpath).split(":"):
        if entry:
            expanded = entry.replace("${ORIGIN}", "$ORIGIN").replace("$ORIGIN", origin)
            dirs.append(expanded if expanded.startswith("/") else posixpath.normpath(expanded))
    return dirs


class _Set:
    """The set's ELFs, indexed as the loader finds them."""

    def __init__(self, elves: Sequence[Elf], requires: Mapping[str, Iterable[str]]) -> None:
        self.elves = elves
        self.requires = {wheel: set(projects) for wheel, projects in requires.items()}
        self.by_path = {e.path: e for e in elves}
        self.by_name: Dict[str, List[Elf]] = {}
        for e in elves:
            self.by_name.setdefault(e.name, []).append(e)
            if posixpath.basename(e.path) != e.name:
                self.by_name.setdefault(posixpath.basename(e.path), []).append(e)

    def resolve(self, elf: Elf, needed: str) -> Optional[Elf]:
        """The ELF of the set the loader would load for `needed`, or None."""
        for directory in search_dirs(elf) if "/" not in needed else [posixpath.dirname(elf.path) or "."]:
            candidate = self.by_path.get(posixpath.normpath(posixpath.join(directory, needed)))
            if candidate is not None:
                return candidate
        # Loaded already, under that SONAME: by its own package's import (triton's plugins and
        # libtriton.so), or by a wheel this one requires and imports first.
        loaded_first = {project(elf.wheel), *self.requires.get(elf.wheel, ())}
        return next((e for e in self.by_name.get(needed, ()) if e.soname == needed and project(e.wheel) in loaded_first), None)

    def scope(self, elf: Elf) -> Tuple[List[Elf], Set[str]]:
        """The set's ELFs loaded with `elf` (breadth first, itself first) and the names of the
        system libraries among them."""
        loaded, system, queue, seen = [], set(), [elf], {elf.path}
        while queue:
            current = queue.pop(0)
            loaded.append(current)
            for needed in current.needed:
                found = self.resolve(current, needed)
                if found is None:
                    system.add(needed)
                elif found.path not in seen:
                    seen.add(found.path)
                    queue.append(found)
        return loaded, system


def _library_problem(index: _Set, elf: Elf, needed: str, declare_in: str) -> str:
    dirs = search_dirs(elf)
    kind = "RUNPATH" if elf.runpath else "RPATH"
    elsewhere = index.by_name.get(needed, [])
    if elsewhere:
        other = elsewhere[0]
        reach = f"which its {kind} ({':'.join(dirs)}) does not reach" if dirs else "and it has no RUNPATH"
        where = f"{other.wheel} ships it as {other.path}, {reach}" + (
            f", nor does its wheel require {project(other.wheel)}" if other.wheel != elf.wheel else ""
        )
    else:
        outside = [d for d in dirs if d.startswith(("/", ".."))]
        where = "no wheel of the set ships it" + (
            f" (its {kind} points outside the install set: {', '.join(outside)})" if outside else ""
        )
    return (
        f"{elf.path} in {elf.wheel} needs {needed}: {where}. `import` would fail with \"{needed}: cannot open "
        f"shared object file\". Add the wheel that ships it to the chain, or, if every target machine has it, "
        f"declare it with why in `system_libraries` of {declare_in}."
    )


def _symbol_problem(index: _Set, elf: Elf, loaded: Sequence[Elf], missing: Sequence[Tuple[str, str, str]]) -> str:
    names = [f"{s}@{v}" if v else s for s, v, _ in missing]
    shown = ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")
    symbol, version, needed_from = missing[0]
    libraries = [e for e in loaded if e is not elf]
    scope = ", ".join(f"{e.name} ({e.wheel})" for e in libraries) or "no library of the set"
    elsewhere = [e for e in index.elves if e not in loaded and e.defines(symbol, version)]
    linked = next((e for e in libraries if e.name == needed_from), None)
    if linked is not None:
        expected = (
            f"it was linked against {needed_from}, which {linked.wheel} ships without {symbol}@{version}: the two "
            f"were built from different sources; rebuild {elf.wheel} against the {linked.wheel} of this set"
        )
    elif elsewhere:
        expected = (
            f"{elsewhere[0].path} in {elsewhere[0].wheel} defines it, but {elf.path} does not load it "
            f"(it is not among its DT_NEEDED)"
        )
    elif libraries:
        expected = (
            f"expected from {libraries[0].name} ({libraries[0].wheel}), the set's first library it loads; no wheel "
            f"of the set defines it: {elf.wheel} was built against another version of it, or against a library "
            f"the set does not carry"
        )
    else:
        expected = (
            f"no wheel of the set defines it: {elf.wheel} was built against a library the set does not carry, or "
            f"the symbol is defined nowhere"
        )
    return (
        f"{elf.path} in {elf.wheel} needs {shown}, undefined in what it loads ({scope}): {expected}. `import` "
        f"would fail with \"undefined symbol: {symbol}\"."
    )


def check_closure(
    elves: Sequence[Elf],
    system: Mapping[str, str],
    declare_in: Mapping[str, str],
    requires: Mapping[str, Iterable[str]] = {},
    glibc_exports: AbstractSet[str] = frozenset(),
    unread_sdk: bool = False,
) -> Closure:
    """Problems of the set's ELFs. `system`: library name -> why it is on every target machine
    (the manylinux policy's, the recipes' `system_libraries`); `declare_in`: wheel -> the
    target whose field would declare a library it needs; `requires`: wheel -> the projects its
    Requires-Dist names (what is imported, and so loaded, before it); `glibc_exports`: what glibc
    exports at default versions (glibc_names(): the interpreter's global scope has them);
    `unread_sdk`: the set installs an SDK from its index (TheRock's `rocm[libraries]`, not
    pinned as wheels yet), so a library found nowhere else is left to it, and listed."""
    index = _Set(elves, requires)
    problems: List[str] = []
    links = symbols = 0
    left: Dict[str, str] = {}
    for elf in elves:
        for needed in elf.needed:
            links += 1
            if index.resolve(elf, needed) is None and needed not in system and needed not in DYNAMIC_LOADERS:
                if unread_sdk and not index.by_name.get(needed):
                    left.setdefault(needed, f"{elf.path} in {elf.wheel}")
                else:
                    problems.append(_library_problem(index, elf, needed, declare_in.get(elf.wheel, "its target")))
        loaded, outside = index.scope(elf)
        # System libraries whose names are not known here (libstdc++, a declared one) may define
        # what an unversioned reference asks for; glibc's names are known.
        may_define = {name for name in outside if name not in GLIBC_LIBRARIES}
        missing = []
        for symbol, version, needed_from in elf.undefined:
            symbols += 1
            if any(e.defines(symbol, version) for e in loaded):
                continue
            if version and needed_from in outside:
                continue  # a system library's versioned symbol, or its library is reported above
            if not version and (symbol.startswith(INTERPRETER_PREFIXES) or symbol in glibc_exports or may_define):
                continue
            missing.append((symbol, version, needed_from))
        if missing:
            problems.append(_symbol_problem(index, elf, loaded, missing))
    return Closure(tuple(problems), len(elves), links, symbols, tuple(sorted(left.items())))


def system_libraries(policy: Iterable[str], declared: Iterable[Tuple[str, Mapping[str, str]]]) -> Dict[str, str]:
    """Library -> why the target machine has it: the manylinux policy's, then each recipe's."""
    libraries = {name: "every manylinux system has it (auditwheel's policy)" for name in policy}
    for target, fields in declared:
        for name, why in fields.items():
            libraries.setdefault(name, f"{target} declares it: {why}")
    return libraries


def glibc_names() -> FrozenSet[str]:
    """The names in glibc_2_36_names.txt (beside this module)."""
    data = pkgutil.get_data(__name__, "glibc_2_36_names.txt") or b""
    return frozenset(line for line in data.decode().splitlines() if line and not line.startswith("#"))
