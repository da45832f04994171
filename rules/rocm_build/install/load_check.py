"""The install set checked as the box would load it, before `package` writes it.

Every wheel of the set (the chain's built wheels, its prebuilt host and device wheels, the
locked run-time wheels) is read by scripts/elf_links.py, one cached process a wheel, in
auditwheel's venv (pyelftools, and auditwheel's manylinux policy for the libraries every
system has); closure.py decides whether each library and symbol is found. GPU code of the
wheels the chain did not build (prebuilt and run-time wheels) is read as the build's audit
reads a built wheel's (gpu_audit.py): a library with AMDGPU code must carry each of the
chain's `gpu_targets`, a `.kpack` archive code for one of them, each of its code objects of the
arch its table of contents files it under. TheRock's split device code (elf_links.py reads it with kpack.py) is
checked across the set (kpack_check.py): each kernel a host library references must be, for
each of the chain's `gpu_targets`, in a `.kpack` archive a device wheel of the set installs.
A problem stops `package` (nothing of the chain reaches dist/); `rocm-plan --check` runs the
same check on an install set already in dist/.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import AbstractSet, Dict, Iterable, List, Mapping, Sequence, Tuple

from packaging.utils import canonicalize_name

from pants.engine.addresses import Address
from pants.engine.fs import CreateDigest, Digest, DigestEntries, FileEntry, MergeDigests
from pants.engine.process import Process, ProcessResult
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import Target, WrappedTarget, WrappedTargetRequest
from pants.util.frozendict import FrozenDict
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.audits import gpu_audit, portable
from rocm_build.audits.gpu_audit import GpuCode, kpack_mismatches
from rocm_build.audits.portable import AuditwheelPythonProcess
from rocm_build.errors import RocmBuildError
from rocm_build.install.closure import Closure, check_closure, elves_of, glibc_names, project, system_libraries
from rocm_build.install.kpack_check import kpack_facts, kpack_problems
from rocm_build.install.sdk_modules import project_name
from rocm_build.prebuilt.device_wheels import base_requirements
from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_files
from rocm_build.subsystems.host_tools import REMOTE_CACHE_FIRST_MILLIS
from rocm_build.upstream.target_types import SystemLibrariesField
from rocm_build.wheel.built_wheel import BuiltWheel

# elf_links.py and what it imports (kpack.py reads the split device code, amdgpu_elf.py the arch
# of each code object).
ELF_LINKS = ("elf_links.py", "kpack.py", "amdgpu_elf.py")


@dataclass(frozen=True)
class WheelLinks:
    wheel_name: str
    elves: str  # elf_links.py's JSON `elves`, as read
    unreadable: FrozenDict[str, str]
    requires: Tuple[str, ...] = ()  # the projects its Requires-Dist names
    requires_dist: Tuple[str, ...] = ()  # its Requires-Dist lines as written, markers too
    # elf_links.py's JSON `kpack_refs`, `kpacks` and `device_requires` (TheRock's split device code)
    kpack: str = "{}"


@dataclass(frozen=True)
class ManylinuxLibraries:
    names: Tuple[str, ...]  # every manylinux policy's libraries, as auditwheel lists them


@dataclass(frozen=True)
class SetWheel:
    wheel: BuiltWheel
    owner: str  # the target it comes from, or the lock that pins it
    audited: bool  # its GPU code was audited when it was built


@dataclass(frozen=True)
class InstallSetCheckRequest:
    owner: str  # the target packaged, for messages
    wheels: Tuple[SetWheel, ...]
    gpu_targets: Tuple[str, ...]
    addresses: Tuple[Address, ...]  # the chain's targets, whose `system_libraries` count
    # How the set installs the SDK it was built with from an index (TheRock's rocm[...]), or "":
    # its wheels are not pinned here, so what only it would provide cannot be read.
    sdk_install: str = ""


@dataclass(frozen=True)
class CheckedInstallSet:
    owner: str
    problems: Tuple[str, ...]
    elves: int
    links: int
    symbols: int
    notes: Tuple[str, ...] = ()  # what the check could not read, said once (package logs it)
    kernels: int = 0  # GPU kernels host libraries keep in device wheels (.kpack), each found for every gpu target
    # Wheel -> the projects its Requires-Dist names that no wheel of the set is: what `pip
    # install --no-index` of the set needs from elsewhere (TheRock's torch: rocm), its markers
    # evaluated for the set's interpreter. Every wheel of the set, pure-Python ones too.
    outside: FrozenDict[str, Tuple[str, ...]] = FrozenDict()

    def summary(self) -> str:
        split = f"; the {self.kernels} GPU kernel(s) their libraries keep in device wheels (.kpack files) are there for each gpu target" if self.kernels else ""
        return (
            f"{self.elves} compiled file(s) (libraries, extensions, programs): the {self.links} libraries they load and "
            f"the {self.symbols} functions and variables they import from them are all found{split}"
        )

    def raise_problems(self) -> None:
        if self.problems:
            raise RocmBuildError(
                f"{self.owner}: the install set would not load on the box ({len(self.problems)} problem(s); nothing was "
                f"written to dist/):\n" + "\n".join(f"  - {p}" for p in self.problems)
            )


@rule(desc="Reading the manylinux policy's libraries", level=LogLevel.DEBUG)
async def read_manylinux_libraries() -> ManylinuxLibraries:
    process = await Get(
        Process,
        AuditwheelPythonProcess(
            (f"{SCRIPTS_DIR}/elf_links.py", "--policy"), await Get(Digest, script_files(*ELF_LINKS)), "Reading the manylinux policy's libraries"
        ),
    )
    result = await Get(ProcessResult, Process, process)
    return ManylinuxLibraries(tuple(json.loads(result.stdout)))


@rule(desc="Reading what a wheel's ELF files load", level=LogLevel.DEBUG)
async def read_wheel_links(request: BuiltWheel) -> WheelLinks:
    digest = await Get(Digest, MergeDigests([request.wheel, await Get(Digest, script_files(*ELF_LINKS))]))
    process = await Get(
        Process,
        AuditwheelPythonProcess(
            (f"{SCRIPTS_DIR}/elf_links.py", request.wheel_name), digest, f"Reading what the ELF files of {request.wheel_name} load"
        ),
    )
    # The input is a wheel: with a remote cache, ask it before pulling the wheel for a local run.
    result = await Get(ProcessResult, Process, replace(process, remote_cache_speculation_delay_millis=REMOTE_CACHE_FIRST_MILLIS))
    return wheel_links(request.wheel_name, json.loads(result.stdout))


def wheel_links(wheel_name: str, found: Mapping) -> WheelLinks:
    """elf_links.py's JSON for one wheel, as the check keeps it."""
    kpack = {key: found[key] for key in ("kpack_refs", "kpacks", "device_requires")}
    return WheelLinks(
        wheel_name, json.dumps(found["elves"], sort_keys=True), FrozenDict(found["unreadable"]),
        tuple(found["requires"]), tuple(found["requires_dist"]), json.dumps(kpack, sort_keys=True),
    )  # fmt: skip


def device_problems(owner: str, wheel: str, code: GpuCode, gpu_targets: Sequence[str]) -> List[str]:
    """A library of a wheel the chain did not build that lacks one of the chain's targets; a
    `.kpack` archive (TheRock's device wheels) with code for none of them, or whose table of
    contents files a code object under an arch its ELF header does not say."""
    problems = []
    for library, arches in sorted(code.libraries.items()):
        missing = [t for t in gpu_targets if t not in arches]
        if missing:
            problems.append(
                f"{library} in {wheel} ({owner}) carries AMDGPU code for {', '.join(arches)}, but none for "
                f"{', '.join(missing)} (the chain's gpu_targets: {', '.join(gpu_targets)}): on a {missing[0]} GPU it "
                f"fails with hipErrorInvalidImage. Use a build of it for {missing[0]}, or leave {missing[0]} out of "
                f"the chain's gpu_targets."
            )
    for archive, kpack in sorted(code.kpacks.items()):
        if kpack.arches and not set(kpack.arches) & set(gpu_targets):
            problems.append(
                f"{archive} in {wheel} ({owner}) holds code for {', '.join(kpack.arches)} (kernel "
                f"{kpack.kernel_of[kpack.arches[0]]}), none for the chain's gpu_targets ({', '.join(gpu_targets)}): no "
                f"GPU of the chain loads it. Use the device wheel built for {gpu_targets[0]}."
            )
    for filed, mismatch in kpack_mismatches(wheel, code):
        problems.append(
            f"{mismatch} ({owner}): on a {filed} GPU it fails with hipErrorInvalidImage. Use a device wheel built for {filed}."
        )
    # An archive or a code object in it that cannot be read is named by the set's kpack check
    # (kpack_check.py), where a library references it.
    unreadable = {m: why for m, why in code.unreadable.items() if not m.endswith(".kpack")}
    problems += [f"the GPU code of {member} in {wheel} could not be read: {why}" for member, why in sorted(unreadable.items())]
    return problems


def declared_system_libraries(chain: Sequence[Target]) -> Dict[str, Mapping[str, str]]:
    """Target spec -> its `system_libraries`, for the chain's targets that have the field."""
    return {t.address.spec: dict(t[SystemLibrariesField].value or {}) for t in chain if t.has_field(SystemLibrariesField)}


@rule(desc="Checking that the install set loads: libraries, symbols, GPU code")
async def check_install_set(request: InstallSetCheckRequest, policy: ManylinuxLibraries) -> CheckedInstallSet:
    platform = [w for w in request.wheels if not w.wheel.wheel_name[: -len(".whl")].endswith("-any")]
    unaudited = [w for w in platform if not w.audited]
    # Every wheel's links and GPU code, read together (each a process over a wheel). A
    # pure-Python wheel has no ELF, but its requirements decide whether the set's header sends
    # the user to an index for it (goals/package.py's prebuilt_steps).
    found = await MultiGet(
        [*(Get(WheelLinks, BuiltWheel, w.wheel) for w in request.wheels), *(Get(GpuCode, BuiltWheel, w.wheel) for w in unaudited)]
    )
    every, codes = found[: len(request.wheels)], found[len(request.wheels) :]
    # The load check is over the platform wheels' ELF files: a pure-Python wheel's are not loaded.
    links = [read for w, read in zip(request.wheels, every) if w in platform]
    chain = await MultiGet(Get(WrappedTarget, WrappedTargetRequest(a, f"the chain of {request.owner}")) for a in request.addresses)
    declared = declared_system_libraries([w.target for w in chain])
    elves = [elf for found in links for elf in elves_of(found.wheel_name, json.loads(found.elves))]
    owners = {w.wheel.wheel_name: w.owner for w in request.wheels}
    requires = {found.wheel_name: found.requires for found in links}
    system = system_libraries(policy.names, declared.items())
    closure: Closure = check_closure(elves, system, owners, requires, glibc_names(), bool(request.sdk_install))
    split = [(found.wheel_name, json.loads(found.kpack)) for found in links]
    refs, archives = [], []
    for wheel, facts in split:
        wheel_refs, wheel_archives = kpack_facts(wheel, facts)
        refs += wheel_refs
        archives += wheel_archives
    devices = {wheel: facts.get("device_requires", {}) for wheel, facts in split}
    problems = [
        *closure.problems,
        *kpack_problems(refs, archives, request.gpu_targets, devices, owners),
        *(f"{member} in {found.wheel_name} could not be read as ELF: {why}" for found in links for member, why in sorted(found.unreadable.items())),
        *(p for w, code in zip(unaudited, codes) for p in device_problems(w.owner, w.wheel.wheel_name, code, request.gpu_targets)),
    ]
    notes = ()
    if closure.left_to_sdk:
        shown = ", ".join(f"{name} ({needed_by})" for name, needed_by in closure.left_to_sdk[:5])
        more = f" and {len(closure.left_to_sdk) - 5} more" if len(closure.left_to_sdk) > 5 else ""
        notes = (
            f"{len(closure.left_to_sdk)} needed libraries are left to the SDK the set installs from its index "
            f"({request.sdk_install}), whose wheels are not pinned here to be read: {shown}{more}",
        )
    kernels = sum(len(r.indexes) for r in refs)
    in_set = {project(w.wheel.wheel_name) for w in request.wheels}
    python = set_python(w.wheel.wheel_name for w in request.wheels)
    outside = {found.wheel_name: needed_elsewhere(found, python, in_set) for found in every}
    return CheckedInstallSet(
        request.owner, tuple(problems), closure.elves, closure.links, closure.symbols, notes, kernels, FrozenDict(outside)
    )


def set_python(wheel_names: Iterable[str]) -> str:
    """The interpreter the set installs into (`3.11`), from its wheels' `cpXY` tags (pip installs
    a set into one interpreter); "" when no wheel names one (all pure Python)."""
    for name in wheel_names:
        found = re.search(r"-cp(3)(\d+)-", name)
        if found:
            return f"{found.group(1)}.{found.group(2)}"
    return ""


def needed_elsewhere(links: WheelLinks, python: str, in_set: AbstractSet[str]) -> Tuple[str, ...]:
    """The projects the wheel requires on the set's interpreter (Requires-Dist, markers
    evaluated: triton's `importlib-metadata; python_version < "3.10"` is no requirement on 3.11)
    that no wheel of the set is. Without an interpreter every line without an extra counts."""
    if python:
        metadata = "".join(f"Requires-Dist: {line}\n" for line in links.requires_dist)
        required = {canonicalize_name(r.name) for r in base_requirements(metadata, python)}
    else:
        required = {project_name(p) for p in links.requires}
    return tuple(sorted(required - set(in_set)))


async def wheels_of(digest: Digest) -> List[BuiltWheel]:
    """Each wheel file of a digest (the run-time wheels of an install set), as a digest of its own."""
    entries = await Get(DigestEntries, Digest, digest)
    files = [e for e in entries if isinstance(e, FileEntry) and e.path.endswith(".whl")]
    digests = await MultiGet(Get(Digest, CreateDigest([FileEntry(e.path.rsplit("/", 1)[-1], e.file_digest)])) for e in files)
    return [BuiltWheel(d, e.path.rsplit("/", 1)[-1]) for e, d in zip(files, digests)]


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *gpu_audit.rules(), *portable.rules()])
