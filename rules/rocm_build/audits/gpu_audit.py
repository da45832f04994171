"""The gpu-code audit: every library of a built wheel carries code for every requested target.

The most common gfx1151 failure users report is `hipErrorInvalidImage` ("device kernel
image is invalid") at run time: a wheel whose libraries carry no code object for the GPU,
because an upstream build script chose its own arch list over `PYTORCH_ROCM_ARCH`. So after
each build, a cached process reads every ELF in the wheel (scripts/gpu_code.py: code objects
and the offload bundles of shared objects, arch from each device image's ELF header), and the
build fails when a library that carries AMDGPU code lacks a requested target.

TheRock's split device code (kpack) is read too: the code objects of each `.kpack` archive
(arch from each one's ELF header, never from the table of contents, whose arch for a code
object must agree with it), and the host libraries split from their device code (a
`.rocm_kpack_ref` marker, no bundled code), which are not asked to carry code themselves
(what they reference is checked across the install set: install/kpack_check.py). kpack.py
needs msgpack and zstandard, so the process runs in auditwheel's venv.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Sequence, Tuple

from pants.engine.fs import Digest, MergeDigests
from pants.engine.process import Process, ProcessResult
from pants.engine.rules import Get, collect_rules, rule
from pants.util.frozendict import FrozenDict
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.wheel.build_spec import WheelBuildSpec
from rocm_build.wheel.built_wheel import BuiltWheel
from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_files
from rocm_build.audits.portable import AuditwheelPythonProcess
from rocm_build.wheel.target_types import AllowMissingGpuTargetsField
from rocm_build.subsystems.host_tools import REMOTE_CACHE_FIRST_MILLIS
from rocm_build.audits import portable

# gpu_code.py and what it imports (kpack.py reads `.kpack` archives and split libraries,
# amdgpu_elf.py names a code object's arch).
GPU_CODE = ("gpu_code.py", "kpack.py", "amdgpu_elf.py", "wheel_zip.py")
SHOWN = 3  # members or kernels named in one problem before "and N more"


@dataclass(frozen=True)
class KpackCode:
    """A `.kpack` archive of the wheel (TheRock's split device code)."""

    arches: Tuple[str, ...]  # of its code objects, each read from its ELF header
    toc_arches: Tuple[str, ...]  # the arches its table of contents says it holds
    # arch its ELF header says -> a kernel with such a code object (for messages)
    kernel_of: FrozenDict[str, str] = FrozenDict()
    # (kernel key, the arch the table of contents files it under, the arch its ELF header says
    # or "" when it is no AMDGPU code object): where the two differ
    mismatches: Tuple[Tuple[str, str, str], ...] = ()


@dataclass(frozen=True)
class GpuCode:
    # Host libraries with offload bundles: each must carry every requested target.
    libraries: FrozenDict[str, Tuple[str, ...]]
    # Standalone code objects, one arch each (AOTriton ships one per kernel and arch): the
    # requested targets must all be among them.
    code_objects: FrozenDict[str, Tuple[str, ...]]
    unreadable: FrozenDict[str, str]  # wheel member -> why its GPU code could not be read
    members: Tuple[str, ...] = ()  # every file of the wheel (read in the same pass)
    kpacks: FrozenDict[str, KpackCode] = FrozenDict()  # `.kpack` archives (TheRock's device wheels)
    # Host libraries whose device code is split out to `.kpack` archives -> the kernel name
    # their marker names (`<kernel_name>#<index>` in the archives)
    split_libraries: FrozenDict[str, str] = FrozenDict()


def kpack_code(found: Dict[str, Any]) -> KpackCode:
    """An archive of gpu_code.py's JSON `kpacks`."""
    kernel_of: Dict[str, str] = {}
    for kernel, by_arch in sorted(found["kernels"].items()):
        for says in by_arch.values():
            kernel_of.setdefault(says, kernel)
    return KpackCode(
        tuple(found["arches"]), tuple(found["toc_arches"]),
        FrozenDict({arch: kernel_of[arch] for arch in found["arches"]}), tuple(tuple(m) for m in found["mismatches"]),
    )  # fmt: skip


@rule(desc="Reading the GPU code of a wheel", level=LogLevel.DEBUG)
async def read_gpu_code(request: BuiltWheel) -> GpuCode:
    digest = await Get(Digest, MergeDigests([request.wheel, await Get(Digest, script_files(*GPU_CODE))]))
    process = await Get(
        Process,
        AuditwheelPythonProcess(
            (f"{SCRIPTS_DIR}/gpu_code.py", request.wheel_name), digest, f"Reading the GPU code of {request.wheel_name}",
            FrozenDict({"PATH": "/usr/bin:/bin"}),  # zstd, for compressed offload bundles
        ),
    )  # fmt: skip
    # The input is a wheel: with a remote cache, ask it before pulling the wheel for a local run.
    result = await Get(ProcessResult, Process, replace(process, remote_cache_speculation_delay_millis=REMOTE_CACHE_FIRST_MILLIS))
    return gpu_code_of(json.loads(result.stdout))


def gpu_code_of(found: Dict[str, Any]) -> GpuCode:
    """GpuCode of gpu_code.py's JSON."""
    return GpuCode(
        *(FrozenDict({k: tuple(v) for k, v in found[kind].items()}) for kind in ("libraries", "code_objects")),
        FrozenDict(found["unreadable"]),
        tuple(found["members"]),
        FrozenDict({member: kpack_code(archive) for member, archive in found["kpacks"].items()}),
        FrozenDict({member: library["kernel_name"] for member, library in found["split_libraries"].items()}),
    )


def _listed(names: Sequence[str]) -> str:
    return ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def kpack_mismatches(wheel_name: str, code: GpuCode) -> List[Tuple[str, str]]:
    """(the arch expected, what was found) for the code objects of each archive filed under an
    arch their own ELF header does not say: the runtime loads them on a GPU they are not for."""
    found = []
    for archive, kpack in sorted(code.kpacks.items()):
        by_arches: Dict[Tuple[str, str], List[str]] = {}
        for kernel, filed, says in kpack.mismatches:
            by_arches.setdefault((filed, says), []).append(kernel)
        for (filed, says), kernels in sorted(by_arches.items()):
            if len(kernels) == 1:
                subject = f"kernel {kernels[0]} in {archive} in {wheel_name} is"
                header = f"its code object's ELF header says {says}" if says else "it is no AMDGPU code object"
            else:
                subject = f"kernels {_listed(kernels)} in {archive} in {wheel_name} are"
                header = f"their code objects' ELF headers say {says}" if says else "they are no AMDGPU code objects"
            found.append((filed, f"{subject} filed under {filed} (its table of contents), but {header}"))
    return found


def audit_problems(spec: WheelBuildSpec, wheel_name: str, code: GpuCode) -> Tuple[str, ...]:
    """Why the wheel would fail on a requested GPU: one sentence per library."""
    required = [t for t in spec.gpu_targets if t not in spec.allow_missing_gpu_targets]
    # (what carries the code, the arches it has): each library, the code objects together and
    # the `.kpack` archives together (TheRock packs one archive per arch). A split library
    # carries none itself: it is not among them.
    carriers = [(f"{library} in {wheel_name} carries", arches) for library, arches in sorted(code.libraries.items())]
    if code.code_objects:
        arches = tuple(sorted({a for found in code.code_objects.values() for a in found}))
        carriers.append((f"the code objects in {wheel_name} ({_listed(sorted(code.code_objects))}) carry", arches))
    archives = {a: k for a, k in code.kpacks.items() if k.arches}
    if archives:
        arches = tuple(sorted({a for kpack in archives.values() for a in kpack.arches}))
        carriers.append((f"the .kpack archives in {wheel_name} ({_listed(sorted(archives))}) carry", arches))
    problems = []
    for carrier, arches in carriers:
        missing = [t for t in required if t not in arches]
        if missing:
            problems.append(
                f"{spec.owner}: {carrier} AMDGPU code for {', '.join(arches)}, but none for {', '.join(missing)} "
                f"(gpu_targets: {', '.join(spec.gpu_targets)}). On a {missing[0]} GPU it would fail with "
                f"hipErrorInvalidImage (\"device kernel image is invalid\"): the upstream build chose its own arch "
                f"list. Make it use PYTORCH_ROCM_ARCH (a patch or `env`), or accept it with "
                f"`{AllowMissingGpuTargetsField.alias}`."
            )
    for filed, mismatch in kpack_mismatches(wheel_name, code):
        problems.append(
            f"{spec.owner}: {mismatch}. On a {filed} GPU it would fail with hipErrorInvalidImage: the build packed "
            f"another arch's code under {filed}. Give its packing step the arch list it compiled for (PYTORCH_ROCM_ARCH)."
        )
    for library, why in sorted(code.unreadable.items()):
        problems.append(f"{spec.owner}: the GPU code of {library} in {wheel_name} could not be read: {why}")
    return tuple(problems)


def with_gpu_code(build_info: str, spec: WheelBuildSpec, code: GpuCode) -> str:
    """Build info with what the audit found in each library."""
    info: Dict[str, Any] = json.loads(build_info)
    archives = {member: kpack.arches for member, kpack in code.kpacks.items()}
    info["gpu_code"] = {member: list(arches) for member, arches in {**code.libraries, **code.code_objects, **archives}.items()}
    info["allow_missing_gpu_targets"] = list(spec.allow_missing_gpu_targets)
    return json.dumps(info, indent=2, sort_keys=True)


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *portable.rules()])
