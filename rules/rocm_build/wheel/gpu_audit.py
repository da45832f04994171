"""The gpu-code audit: every library of a built wheel carries code for every requested target.

The most common gfx1151 failure users report is `hipErrorInvalidImage` ("device kernel
image is invalid") at run time: a wheel whose libraries carry no code object for the GPU,
because an upstream build script chose its own arch list over `PYTORCH_ROCM_ARCH`. So after
each build, a cached process reads every ELF in the wheel (scripts/gpu_code.py: code objects
and the offload bundles of shared objects, arch from each device image's ELF header), and the
build fails when a library that carries AMDGPU code lacks a requested target.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, Tuple

from pants.engine.fs import Digest, MergeDigests
from pants.engine.process import Process, ProcessResult
from pants.engine.rules import Get, collect_rules, rule
from pants.util.frozendict import FrozenDict
from pants.util.logging import LogLevel

from rocm_build.wheel.build_spec import WheelBuildSpec
from rocm_build.wheel.built_wheel import BuiltWheel
from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_files
from rocm_build.wheel.target_types import AllowMissingGpuTargetsField
from rocm_build.subsystems.host_tools import REMOTE_CACHE_FIRST_MILLIS, HostTools


@dataclass(frozen=True)
class GpuCode:
    # Host libraries with offload bundles: each must carry every requested target.
    libraries: FrozenDict[str, Tuple[str, ...]]
    # Standalone code objects, one arch each (AOTriton ships one per kernel and arch): the
    # requested targets must all be among them.
    code_objects: FrozenDict[str, Tuple[str, ...]]
    unreadable: FrozenDict[str, str]  # wheel member -> why its GPU code could not be read
    members: Tuple[str, ...] = ()  # every file of the wheel (read in the same pass)


@rule(desc="Reading the GPU code of a wheel", level=LogLevel.DEBUG)
async def read_gpu_code(request: BuiltWheel, tools: HostTools) -> GpuCode:
    scripts = await Get(Digest, script_files("gpu_code.py", "wheel_zip.py"))
    result = await Get(
        ProcessResult,
        Process(
            argv=(tools.python.path, f"{SCRIPTS_DIR}/gpu_code.py", request.wheel_name),
            input_digest=await Get(Digest, MergeDigests([request.wheel, scripts])),
            env={"PATH": "/usr/bin:/bin"},  # zstd, for compressed offload bundles
            remote_cache_speculation_delay_millis=REMOTE_CACHE_FIRST_MILLIS,  # the input is a wheel
            description=f"Reading the GPU code of {request.wheel_name}",
            level=LogLevel.DEBUG,
        ),
    )
    found = json.loads(result.stdout)
    return GpuCode(
        *(FrozenDict({k: tuple(v) for k, v in found[kind].items()}) for kind in ("libraries", "code_objects")),
        FrozenDict(found["unreadable"]),
        tuple(found["members"]),
    )


def audit_problems(spec: WheelBuildSpec, wheel_name: str, code: GpuCode) -> Tuple[str, ...]:
    """Why the wheel would fail on a requested GPU: one sentence per library."""
    required = [t for t in spec.gpu_targets if t not in spec.allow_missing_gpu_targets]
    # (what carries the code, the arches it has): each library, and the code objects together.
    carriers = [(f"{library} in {wheel_name} carries", arches) for library, arches in sorted(code.libraries.items())]
    if code.code_objects:
        names = sorted(code.code_objects)
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        arches = tuple(sorted({a for found in code.code_objects.values() for a in found}))
        carriers.append((f"the code objects in {wheel_name} ({shown}) carry", arches))
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
    for library, why in sorted(code.unreadable.items()):
        problems.append(f"{spec.owner}: the GPU code of {library} in {wheel_name} could not be read: {why}")
    return tuple(problems)


def with_gpu_code(build_info: str, spec: WheelBuildSpec, code: GpuCode) -> str:
    """Build info with what the audit found in each library."""
    info: Dict[str, Any] = json.loads(build_info)
    info["gpu_code"] = {member: list(arches) for member, arches in {**code.libraries, **code.code_objects}.items()}
    info["allow_missing_gpu_targets"] = list(spec.allow_missing_gpu_targets)
    return json.dumps(info, indent=2, sort_keys=True)


def rules():
    return collect_rules()
