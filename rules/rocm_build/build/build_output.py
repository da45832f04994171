"""What a build process wrote, made into the wheel that ships: the wheel and its log split
out of the output, then the build info, the SBOM made from it (PEP 770) and the platform tag
added to the wheel."""

from __future__ import annotations

import json
from dataclasses import dataclass

from pants.engine.fs import CreateDigest, Digest, DigestEntries, FileContent, FileEntry, MergeDigests, RemovePrefix
from pants.engine.process import Process, ProcessResult
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_files
from rocm_build.subsystems.host_tools import REMOTE_CACHE_FIRST_MILLIS, HostTools
from rocm_build.wheel.build_process import FINISHING_SCRIPTS
from rocm_build.wheel.built_wheel import BuiltWheel
from rocm_build.audits.portable import PlatformPolicy
from rocm_build.audits import portable
from rocm_build.subsystems import host_tools


@dataclass(frozen=True)
class BuildOutput:
    digest: Digest  # what a build process wrote: out/<wheel>, out/build.log


@dataclass(frozen=True)
class BuiltPayload:
    wheel_name: str
    payload: Digest  # the wheel as the build wrote it, at the digest root
    sha256: str
    log: Digest  # `<wheel>.build.log` at the digest root


@dataclass(frozen=True)
class WheelWithBuildInfo:
    payload: Digest  # the wheel at the digest root
    wheel_name: str
    build_info: str


@dataclass(frozen=True)
class FinishedWheel:
    wheel: Digest  # the wheel alone, at the digest root
    wheel_name: str
    sha256: str
    build_info: str  # as in the wheel: with its platform policy


@rule
async def split_build_output(output: BuildOutput) -> BuiltPayload:
    # Entries carry each file's sha256, so even a GB-sized torch wheel is never read into
    # memory here; renaming a file is a new entry pointing at the same content.
    entries = await Get(DigestEntries, Digest, output.digest)
    files = {e.path: e for e in entries if isinstance(e, FileEntry)}
    (wheel_path,) = [p for p in files if p.endswith(".whl")]
    wheel_name = wheel_path.rsplit("/", 1)[-1]
    payload, log = await MultiGet(
        Get(Digest, CreateDigest([FileEntry(wheel_name, files[wheel_path].file_digest)])),
        Get(Digest, CreateDigest([FileEntry(f"{wheel_name}.build.log", files["out/build.log"].file_digest)])),
    )
    return BuiltPayload(wheel_name, payload, files[wheel_path].file_digest.fingerprint, log)


@rule(desc="Adding build info to a wheel", level=LogLevel.DEBUG)
async def add_build_info(request: WheelWithBuildInfo, tools: HostTools) -> FinishedWheel:
    # The manylinux policy the wheel meets: recorded, and its tag where it holds.
    policy = await Get(PlatformPolicy, BuiltWheel(request.payload, request.wheel_name))
    build_info = json.dumps({**json.loads(request.build_info), "platform": policy.to_json()}, indent=2, sort_keys=True)
    scripts = await Get(Digest, script_files(*FINISHING_SCRIPTS))  # in the version key (build_process.py)
    info = await Get(Digest, CreateDigest([FileContent(f"{SCRIPTS_DIR}/build_info.json", build_info.encode())]))
    result = await Get(
        ProcessResult,
        Process(
            argv=(
                tools.python.path, f"{SCRIPTS_DIR}/wheel_files.py", "add-info",
                request.wheel_name, "out", f"{SCRIPTS_DIR}/build_info.json",
                *([policy.tag] if policy.manylinux else []),
            ),
            input_digest=await Get(Digest, MergeDigests([request.payload, scripts, info])),
            output_directories=("out",),
            remote_cache_speculation_delay_millis=REMOTE_CACHE_FIRST_MILLIS,  # the input is a wheel
            description=f"Adding rocm_build_info.json to {request.wheel_name}",
            level=LogLevel.DEBUG,
        ),
    )  # fmt: skip
    wheel = await Get(Digest, RemovePrefix(result.output_digest, "out"))
    (entry,) = await Get(DigestEntries, Digest, wheel)
    return FinishedWheel(wheel, entry.path, entry.file_digest.fingerprint, build_info)


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *portable.rules(), *host_tools.rules()])
