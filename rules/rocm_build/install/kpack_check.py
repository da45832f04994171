"""Will TheRock's split device code load? Each kernel a host library of the set references
resolves, for each of the chain's gpu targets, to a code object for that target in a `.kpack`
archive a device wheel of the set installs.

ROCm 10's TheRock wheels carry no device code in their host libraries: a host library has a
`.rocm_kpack_ref` marker (the kernel name, the archives' search paths with `@GFXARCH@`) and
one HIPK wrapper per code object, whose index the runtime appends to the kernel name
(`<kernel_name>#<index>`); the device wheel (`<project>-device-<gfx>`) installs the archive.
The facts are read by scripts/elf_links.py with scripts/kpack.py (whose header says where the
format was learned); this module reasons over them as the runtime looks (rocm-kpack's
loader): for an arch, the first archive among the search paths that holds that arch is the
one asked for the kernel. A mismatch fails on the box with hipErrorInvalidImage: a device
wheel missing (ROCm/TheRock#7839), an archive whose table of contents is indexed off the
wrappers' (ROCm/rocm-systems#6943, "kernel not found in this archive"), code for another arch.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Sequence, Tuple

from rocm_build.install.closure import project

PLACEHOLDER = "@GFXARCH@"
SHOWN = 5  # kernels named in one problem before "and N more"
INDEX = re.compile(r"[0-9]{1,9}")  # a code object index (HIPK wrappers store a u32; 9 digits compare safely)


@dataclass(frozen=True)
class KpackRef:
    wheel: str  # the wheel file that installs the host library
    path: str  # its installed path, relative to site-packages
    kernel_name: str
    search_paths: Tuple[str, ...]
    indexes: Tuple[int, ...]  # the code object index of each HIPK wrapper

    def kernels(self) -> List[str]:
        return [f"{self.kernel_name}#{i}" for i in self.indexes]


@dataclass(frozen=True)
class KpackArchive:
    wheel: str
    path: str
    arches: Tuple[str, ...] = ()
    kernels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # key -> {arch: arch its ELF header says}
    unreadable: Mapping[str, str] = field(default_factory=dict)  # "key @ arch" -> why
    error: str = ""  # why the archive itself could not be read


def kpack_facts(wheel: str, found: Mapping) -> Tuple[List[KpackRef], List[KpackArchive]]:
    """The references and archives of one wheel from elf_links.py's JSON."""
    refs = [
        KpackRef(wheel, path, r["kernel_name"], tuple(r["search_paths"]), tuple(r["indexes"]))
        for path, r in sorted(found.get("kpack_refs", {}).items())
    ]
    archives = [
        KpackArchive(wheel, path, tuple(a.get("arches", ())), a.get("kernels", {}), a.get("unreadable", {}), a.get("error", ""))
        for path, a in sorted(found.get("kpacks", {}).items())
    ]
    return refs, archives


def search_path(ref: KpackRef, pattern: str, target: str) -> str:
    """Where the runtime looks for `target`'s archive, relative to site-packages."""
    expanded = pattern.replace(PLACEHOLDER, target)
    if expanded.startswith("/"):
        return expanded
    return posixpath.normpath(posixpath.join(posixpath.dirname(ref.path), expanded))


def _listed(kernels: Sequence[str]) -> str:
    shown = ", ".join(kernels[:SHOWN])
    return shown + (f" and {len(kernels) - SHOWN} more" if len(kernels) > SHOWN else "")


def _index_hint(ref: KpackRef, archive: KpackArchive, target: str) -> str:
    """What the archive holds for the library instead, and whether its indexes are shifted."""
    prefix = f"{ref.kernel_name}#"
    held = sorted((k for k, arches in archive.kernels.items() if k.startswith(prefix) and target in arches), key=len)
    if not held:
        return f"it holds no kernel of {ref.kernel_name} for {target}"
    # An index as the runtime appends it (`#N`, ASCII digits); the archive is someone else's, so
    # its keys may hold anything (`#²` or thousands of digits): those are no index to compare.
    indexes = sorted(int(k[len(prefix):]) for k in held if INDEX.fullmatch(k[len(prefix):]))
    wanted = sorted(ref.indexes)
    if indexes and len(indexes) == len(wanted) and len({a - w for a, w in zip(indexes, wanted)}) == 1 and indexes != wanted:
        shift = indexes[0] - wanted[0]
        return (
            f"it holds {_listed(held)}: its table of contents is indexed {shift:+d} from the wrappers' code "
            f"object indexes, the shape of ROCm/rocm-systems#6943"
        )
    return f"it holds {_listed(held)} for {target}"


def _ref_problems(ref: KpackRef, owner: str, by_path: Mapping[str, KpackArchive], target: str, devices: Sequence[str]) -> List[str]:
    host = f"{ref.path} in {ref.wheel}" + (f" ({owner})" if owner and owner != ref.wheel else "")
    kernels = ref.kernels()
    looked = [search_path(ref, p, target) for p in ref.search_paths]
    present = [by_path[p] for p in looked if p in by_path]
    if not present:
        carrier = (
            f"the device wheel {', '.join(devices)} should carry it: add it to the chain (a device pin of "
            f"{project(ref.wheel)} for {target})"
            if devices
            else f"{ref.wheel} names no device wheel for {target} (no `device-{target}` extra): use a build of "
            f"{project(ref.wheel)} whose device wheels cover {target}"
        )
        return [
            f"{host} references kernel {_listed(kernels)} for {target}; it looks in {', '.join(looked)}, which no "
            f"wheel of the set installs: {carrier}. On a {target} GPU it fails with hipErrorInvalidImage."
        ]
    archive = next((a for a in present if target in a.arches), None)
    if archive is None:
        held = "; ".join(f"{a.path} in {a.wheel} holds {', '.join(a.arches) or 'no arch'}" for a in present)
        return [
            f"{host} references kernel {_listed(kernels)} for {target}, but no archive it looks in holds {target} "
            f"({held}): on a {target} GPU it fails with hipErrorInvalidImage. Use the device wheel built for {target}."
        ]
    problems = []
    where = f"the archive it looks in, {archive.path} in the device wheel {archive.wheel}"
    missing = [k for k in kernels if target not in archive.kernels.get(k, {}) and f"{k} @ {target}" not in archive.unreadable]
    if missing:
        problems.append(
            f"{host} references kernel {_listed(missing)} for {target}, which {where}, does not hold "
            f"({_index_hint(ref, archive, target)}): on a {target} GPU the runtime fails with hipErrorInvalidImage "
            f"(\"kernel not found in this archive\"). The host library and the device wheel come from different "
            f"splits: pin the device wheel of the host's own build."
        )
    for kernel in kernels:
        why = archive.unreadable.get(f"{kernel} @ {target}")
        actual = archive.kernels.get(kernel, {}).get(target)
        if why is not None:
            problems.append(f"{host} references kernel {kernel} for {target}, whose code object in {where}, cannot be read: {why}.")
        elif actual is not None and actual != target:
            says = f"its ELF header says {actual}" if actual else "it is no AMDGPU code object"
            problems.append(
                f"{host} references kernel {kernel} for {target}; {where}, files it under {target}, but {says}: on a "
                f"{target} GPU it fails with hipErrorInvalidImage. Rebuild the device wheel for {target}."
            )
    return problems


def kpack_problems(
    refs: Sequence[KpackRef],
    archives: Sequence[KpackArchive],
    gpu_targets: Sequence[str],
    devices: Mapping[str, Mapping[str, Sequence[str]]],
    owners: Mapping[str, str] = {},
) -> List[str]:
    """Problems of the set's split device code. `devices`: host wheel -> gfx -> the device
    wheel projects its metadata names for that arch (`extra == "device-<gfx>"`)."""
    by_path: Dict[str, KpackArchive] = {a.path: a for a in archives if not a.error}
    problems = [f"{a.path} in {a.wheel} is not a readable .kpack archive: {a.error}" for a in archives if a.error]
    for ref in refs:
        owner = owners.get(ref.wheel, "")
        if not ref.indexes:
            problems.append(
                f"{ref.path} in {ref.wheel} carries a .rocm_kpack_ref marker (kernel {ref.kernel_name}) but "
                f"no HIPK wrapper in .hipFatBinSegment: which of its code objects it loads cannot be read."
            )
            continue
        for target in gpu_targets:
            problems += _ref_problems(ref, owner, by_path, target, devices.get(ref.wheel, {}).get(target, ()))
    return problems

