"""rocm_wheel: resolve a build request's inputs, run it in a sandbox, hand the wheel on."""

from __future__ import annotations

import hashlib
import json
import logging
import shlex
from dataclasses import dataclass, replace
from typing import Dict, Iterable, Optional, Sequence, Tuple

from pants.core.goals.package import BuiltPackage, BuiltPackageArtifact, PackageFieldSet
from pants.engine.addresses import Address
from pants.engine.fs import (
    EMPTY_DIGEST,
    AddPrefix,
    CreateDigest,
    Digest,
    DigestEntries,
    FileContent,
    FileEntry,
    MergeDigests,
    RemovePrefix,
)
from pants.engine.process import FallibleProcessResult, Process, ProcessResult
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.unions import UnionRule
from pants.option.global_options import NamedCachesDirOption
from pants.util.logging import LogLevel

from rocm_build.upstream.archives import ArchiveRequest, FetchedArchive
from rocm_build.subsystems.bootstrap_wheels import bootstrap_wheels_digest
from rocm_build.wheel.build_request import (
    ARCHIVES_DIR,
    LOG_CACHE,
    TREE_CHANGES,
    PreflightBuild,
    PreflightWheelRequest,
    WheelBuildRequest,
    WheelBuildSpec,
    WheelRequest,
    dist_dir,
    lock_request,
    log_name,
)
from rocm_build.wheel.build_requirements import LockedRequirements, LockedRequirementsRequest
from rocm_build.wheel.ccache import CcacheRemote
from rocm_build.wheel.chain import ChainRequest, CheckedChain
from rocm_build.toolchain.container import BuildEnvironment, BuildEnvironmentRequest
from rocm_build.errors import RocmBuildError
from rocm_build.wheel.gpu_audit import GpuCode, GpuCodeRequest, audit_problems, with_gpu_code
from rocm_build.toolchain.interpreters import BuildPython, BuildPythonRequest
from rocm_build.toolchain.isolation import NetworkIsolation, explain_build_failure
from rocm_build.wheel.portable import PlatformPolicy, PlatformPolicyRequest
from rocm_build.upstream.prebuilt import FetchedPrebuilt, PrebuiltRequest
from rocm_build.install.runtime_set import check_runtime_set, with_runtime_set
from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_digest
from rocm_build.upstream.source_tree import MergedTree, MergedTreeRequest
from rocm_build.upstream.fetch import PACK_DIR, TREE_DIR
from rocm_build.target_types import WheelSourceField
from rocm_build.toolchain.rocm_sdk import ResolvedToolchain, ToolchainRequest
from rocm_build.subsystems.host_tools import REMOTE_CACHE_FIRST_MILLIS, HostTools
from rocm_build.upstream.upstream_repo import ResolvedUpstream, UpstreamRequest

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BuiltRocmWheel:
    address: Address
    # None when an optional build failed or was skipped; `error` then says why.
    wheel_name: Optional[str]
    wheel_sha256: str
    wheel: Digest  # the wheel file alone, at the digest root, with rocm_build_info.json
    log: Digest  # `<wheel or target>.build.log` at the digest root
    build_info: str  # JSON
    # What the build wrote: the same wheel without its build info and without the exact
    # requirements on its dependency wheels (both record inputs). Dependents build against
    # it, so they are keyed by what this wheel ships, not by how it was made (early cutoff).
    payload: Digest = EMPTY_DIGEST
    payload_sha256: str = ""
    error: Optional[str] = None
    skipped: bool = False  # not built at all: upstream does not build its gpu targets
    # This wheel and the wheels of its dependencies, for `package` to write to dist/.
    closure: Tuple["BuiltRocmWheel", ...] = ()


@dataclass(frozen=True)
class PreparedWheelBuild:
    request: WheelBuildRequest
    build_info: str  # JSON: the request's inputs, down to the dependencies' sources
    dependencies: Tuple[BuiltRocmWheel, ...]  # the ones that built (optional ones may not)


@dataclass(frozen=True)
class FinishedWheel:
    wheel: Digest  # the wheel alone, at the digest root
    wheel_name: str
    sha256: str
    build_info: str  # as in the wheel: with its platform policy


@dataclass(frozen=True)
class WheelWithBuildInfo:
    payload: Digest  # the wheel at the digest root
    wheel_name: str
    build_info: str


def build_info_json(
    spec: WheelBuildSpec,
    upstream: ResolvedUpstream,
    toolchain: ResolvedToolchain,
    python: BuildPython,
    label: str,
    network: str,
    environment: BuildEnvironment,
    locked: Optional[LockedRequirements],
    archives: Tuple[FetchedArchive, ...],
    deps: Tuple[BuiltRocmWheel, ...],
) -> str:
    return json.dumps(
        {
            "target": spec.owner,
            "gpu_targets": list(spec.gpu_targets),
            "label": label,
            "source": {
                "pin": upstream.pin_name,
                "url": upstream.pin.url,
                "commit": upstream.pin.commit,
                "patches": [{"path": p.path, "sha256": p.sha256} for p in upstream.patches],
            },
            "toolchain": {"address": toolchain.address.spec, "identity": toolchain.identity},
            "python": python.identity,
            "env": dict(spec.env),
            "network": network,
            "environment": environment.to_json(),
            "build_requirements": None
            if locked is None
            else {
                "lock": locked.lock_path,
                "sha256": locked.sha256,
                "distributions": [f"{d.name}=={d.version}" for d in locked.lock.dists],
            },
            "archives": {
                var: {"target": a.address.spec, "url": a.url, "sha256": a.sha256}
                for (var, _), a in zip(spec.archives, archives)
            },
            "source_date_epoch": upstream.commit_time,
            "dependencies": [
                {
                    "target": d.address.spec,
                    "wheel": d.wheel_name,
                    # The bytes this wheel was built against: the dependency without its
                    # build info.
                    "payload_sha256": d.payload_sha256,
                    "source": json.loads(d.build_info)["source"],
                }
                for d in deps
            ],
        },
        indent=2,
        sort_keys=True,
    )


def prebuilt_wheel(fetched: FetchedPrebuilt) -> BuiltRocmWheel:
    """A prebuilt wheel where a built one would stand: its payload is the file as pinned."""
    spec, pin = fetched.spec, fetched.spec.pin
    source = {"prebuilt": spec.pin_name, "index_url": pin.index_url, "file": pin.file, "sha256": pin.sha256}
    if pin.device_of:  # TheRock's device wheel of a host pin, pulled by the host's `extra`
        source.update(device_of=pin.device_of, extra=pin.extra)
    info = json.dumps({"target": spec.owner, "source": source, "requires_rocm": pin.requires_rocm}, indent=2, sort_keys=True)
    built = BuiltRocmWheel(
        spec.address, pin.file, pin.sha256, fetched.wheel, EMPTY_DIGEST, info, payload=fetched.wheel, payload_sha256=pin.sha256
    )
    return replace(built, closure=(built,))


async def _prepare_wheel_build(request: WheelRequest, isolation: NetworkIsolation, with_built_dependencies: bool) -> PreparedWheelBuild:
    spec = await Get(WheelBuildSpec, WheelRequest, request)
    owner = spec.owner
    environment = await Get(BuildEnvironment, BuildEnvironmentRequest(spec.environment, owner))
    image = environment.image
    python = await Get(BuildPython, BuildPythonRequest(spec.python, owner, image))
    # Downloads run on this machine: with a Python of the build Python's minor version.
    host_python = await Get(BuildPython, BuildPythonRequest(python.major_minor, owner)) if image else python
    # The toolchain first: without it nothing else is worth fetching or building.
    toolchain = await Get(ResolvedToolchain, ToolchainRequest(spec.toolchain, f"the `toolchain` field of {owner}", image, spec.gpu_targets))
    upstream = await Get(ResolvedUpstream, UpstreamRequest(spec.upstream.address, f"the `source` field of {owner}"))
    archives = await MultiGet(
        Get(FetchedArchive, ArchiveRequest(a, f"the `archives` field of {owner}")) for _, a in spec.archives
    )
    locked = None
    if spec.lock_path:
        locked = await Get(LockedRequirements, LockedRequirementsRequest, lock_request(spec, upstream, host_python))
    deps: Tuple[BuiltRocmWheel, ...] = ()
    if with_built_dependencies:
        deps = await MultiGet(Get(BuiltRocmWheel, WheelRequest(a)) for a in spec.dependencies)
    prebuilt = await MultiGet(
        Get(FetchedPrebuilt, PrebuiltRequest(a, f"the `dependencies` field of {owner}")) for a in spec.prebuilt
    )
    deps += tuple(prebuilt_wheel(p) for p in prebuilt)
    for dep in deps:
        if dep.error:
            why = dep.error if dep.skipped else "it failed to build."
            logger.warning(f"{owner}: building without optional {dep.address.spec}: {why}")
    usable = tuple(d for d in deps if d.wheel_name)

    bootstrap = await bootstrap_wheels_digest()
    # Device wheels (GPU code split from a prebuilt host) are not compiled against: only in install sets.
    dep_wheels = await Get(Digest, MergeDigests(d.payload for d in usable if not is_device_wheel(d)))
    archive_trees = await MultiGet(
        Get(Digest, AddPrefix(a.tree, f"{ARCHIVES_DIR}/{var}")) for (var, _), a in zip(spec.archives, archives)
    )
    # The tree as layers where it can be: the fetched pack, the same for every patch change,
    # is checked out by git, once per machine and stacked under the patched files
    # (build_wheel.sh), or for a container before it starts (in_container.sh). When a patch
    # deletes files, the merged tree is written by Pants.
    source, source_pack = upstream.source, None
    if not source.removes_files:
        tree = await Get(Digest, AddPrefix(await Get(Digest, RemovePrefix(source.changes, TREE_DIR)), TREE_CHANGES))
        source_pack = await Get(Digest, RemovePrefix(source.pack, PACK_DIR))
    else:
        tree = (await Get(MergedTree, MergedTreeRequest(source, owner))).digest
    inputs = await Get(
        Digest,
        MergeDigests(
            [
                tree,
                await Get(Digest, AddPrefix(dep_wheels, "deps")),
                await Get(Digest, AddPrefix(bootstrap, "bootstrap")),
                *([locked.inputs] if locked else []),
                *archive_trees,
            ]
        ),
    )
    label = f"{toolchain.label}{'.'.join(spec.gpu_targets)}"
    network = "none (container, --network=none)" if image else isolation.describe()
    info = build_info_json(spec, upstream, toolchain, python, label, network, environment, locked, archives, usable)
    request = WheelBuildRequest(
        spec, toolchain, python, isolation.enabled or bool(image), image, label, upstream.commit_time, inputs,
        source_pack=source_pack,
        venv_key=venv_key(python, bootstrap, dep_wheels, locked),
    )  # fmt: skip
    return PreparedWheelBuild(request, info, usable)



@rule(desc="Resolving the inputs of a rocm_wheel build", level=LogLevel.DEBUG)
async def prepare_wheel_build(request: WheelRequest, isolation: NetworkIsolation) -> PreparedWheelBuild:
    return await _prepare_wheel_build(request, isolation, with_built_dependencies=True)


@rule(desc="Resolving the inputs of a rocm_wheel preflight", level=LogLevel.DEBUG)
async def prepare_preflight_build(request: PreflightWheelRequest, isolation: NetworkIsolation) -> PreflightBuild:
    prepared = await _prepare_wheel_build(WheelRequest(request.address), isolation, with_built_dependencies=False)
    return PreflightBuild(prepared.request)

def venv_key(python: BuildPython, bootstrap: Digest, deps: Digest, locked: Optional[LockedRequirements]) -> str:
    made_of = [python.identity, bootstrap.fingerprint, deps.fingerprint, locked.inputs.fingerprint if locked else ""]
    return hashlib.sha256("\n".join(made_of).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class BuildOutput:
    digest: Digest  # what a build process wrote: out/<wheel>, out/build.log


@dataclass(frozen=True)
class BuiltPayload:
    wheel_name: str
    payload: Digest  # the wheel as the build wrote it, at the digest root
    sha256: str
    log: Digest  # `<wheel>.build.log` at the digest root


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


def failed(spec: WheelBuildSpec, build_info: str, message: str) -> BuiltRocmWheel:
    """A failed build stops the chain, unless the component is optional."""
    if not spec.optional:
        raise RocmBuildError(message)
    logger.warning(f"{message}\n{spec.owner} is optional: its dependents are built without it.")
    return BuiltRocmWheel(spec.address, None, "", EMPTY_DIGEST, EMPTY_DIGEST, build_info, error=message)


@rule(desc="Building rocm_wheel", level=LogLevel.DEBUG)
async def build_rocm_wheel(
    request: WheelRequest, named_caches: NamedCachesDirOption, _ccache_remote: CcacheRemote
) -> BuiltRocmWheel:
    # (ccache's remote storage is configured for this session before any build starts.)
    spec = await Get(WheelBuildSpec, WheelRequest, request)
    unsupported = spec.unsupported_gpu_targets()
    if unsupported and spec.optional:
        # Nothing fetched or built: upstream would not make code for these targets.
        return BuiltRocmWheel(spec.address, None, "", EMPTY_DIGEST, EMPTY_DIGEST, "{}", error=unsupported, skipped=True)
    prepared = await Get(PreparedWheelBuild, WheelRequest, request)
    build_info = prepared.build_info
    process = await Get(Process, WheelBuildRequest, prepared.request)
    result = await Get(FallibleProcessResult, Process, process)
    if result.exit_code != 0:
        output = result.stdout.decode(errors="replace") + result.stderr.decode(errors="replace")
        log_path = f"{named_caches.val}/{LOG_CACHE}/{log_name(spec.address)}.log"
        return failed(spec, build_info, explain_build_failure(spec.owner, spec.timeout, result.exit_code, output, log_path))

    out = await Get(BuiltPayload, BuildOutput(result.output_digest))
    code = await Get(GpuCode, GpuCodeRequest(out.payload, out.wheel_name))
    problems = audit_problems(spec, out.wheel_name, code)
    if problems:
        return failed(spec, build_info, "\n".join(problems))
    build_info = with_gpu_code(build_info, spec, code)
    finished = await Get(FinishedWheel, WheelWithBuildInfo(out.payload, out.wheel_name, build_info))
    # The log is named after the wheel as it ships (its platform tag may have changed).
    (log_entry,) = await Get(DigestEntries, Digest, out.log)
    log = await Get(Digest, CreateDigest([FileEntry(f"{finished.wheel_name}.build.log", log_entry.file_digest)]))
    closure = tuple({w.address: w for d in prepared.dependencies for w in d.closure}.values())
    built = BuiltRocmWheel(
        address=spec.address,
        wheel_name=finished.wheel_name,
        wheel_sha256=finished.sha256,
        wheel=finished.wheel,
        log=log,
        build_info=finished.build_info,
        payload=out.payload,
        payload_sha256=out.sha256,
    )
    return replace(built, closure=(*closure, built))


@rule(desc="Adding build info to a wheel", level=LogLevel.DEBUG)
async def add_build_info(request: WheelWithBuildInfo, tools: HostTools) -> FinishedWheel:
    # The manylinux policy the wheel meets: recorded, and its tag where it holds.
    policy = await Get(PlatformPolicy, PlatformPolicyRequest(request.payload, request.wheel_name))
    build_info = json.dumps({**json.loads(request.build_info), "platform": policy.to_json()}, indent=2, sort_keys=True)
    scripts = await script_digest("wheel_files.py")
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


@dataclass(frozen=True)
class RocmWheelFieldSet(PackageFieldSet):
    required_fields = (WheelSourceField,)

    source: WheelSourceField


INSTALL_REQUIREMENTS = "requirements.txt"


def is_device_wheel(wheel: BuiltRocmWheel) -> bool:
    return "device_of" in json.loads(wheel.build_info).get("source", {})


def device_extras(sources: Iterable[Dict[str, str]]) -> Dict[str, Tuple[str, ...]]:
    """Host pin -> the extras its device wheels in the set stand for: torch[device-gfx1151]."""
    extras: Dict[str, Tuple[str, ...]] = {}
    for source in sources:
        if source.get("extra"):
            extras[source["device_of"]] = tuple(sorted({*extras.get(source["device_of"], ()), source["extra"]}))
    return extras


def requirement(wheel: BuiltRocmWheel, extras: Sequence[str]) -> str:
    """`name[extras]==version` of a wheel in the set."""
    name, version = (wheel.wheel_name or "").split("-")[:2]
    return f"{name}[{','.join(extras)}]=={version}" if extras else f"{name}=={version}"


async def install_set(closure: Tuple[BuiltRocmWheel, ...]) -> Digest:
    """`wheels/` (a find-links folder with every wheel of the chain) and a requirements file
    pinning each by version and sha256, so that
    `pip install --no-index --find-links <dir>/wheels -r <dir>/requirements.txt` installs
    exactly this chain, and nothing that merely has the same version."""
    sources = [(w, json.loads(w.build_info)["source"]) for w in closure]
    extras = device_extras(source for _, source in sources)
    hosts = [(w, source) for w, source in sources if "prebuilt" in source and "device_of" not in source]
    lines = [
        "# The rocm_wheel chain of one `pants package`: every wheel by version and sha256.",
        "# pip install --no-index --find-links wheels --require-hashes -r requirements.txt  (from this directory)",
        *(
            # What a prebuilt wheel itself requires (TheRock's torch: rocm[libraries]) is not
            # part of the chain: it comes from the wheel's own index, installed first.
            f"# first, the prebuilt {w.wheel_name.split('-')[0]} and what it requires: pip install --index-url "
            f"{source['index_url']} {shlex.quote(requirement(w, extras.get(source['prebuilt'], ())))}"
            for w, source in hosts
        ),
        *(
            f"{requirement(w, extras.get(source.get('prebuilt', ''), ()))} --hash=sha256:{w.wheel_sha256}"
            for w, source in sorted(sources, key=lambda pair: pair[0].wheel_name or "")
        ),
    ]
    lines, runtime = await with_runtime_set(tuple(w.address for w in closure), lines)  # env.sh, run-time wheels
    wheels = await Get(Digest, MergeDigests(w.wheel for w in closure))
    return await Get(
        Digest,
        MergeDigests(
            [
                await Get(Digest, AddPrefix(wheels, "wheels")),
                await Get(Digest, CreateDigest([FileContent(INSTALL_REQUIREMENTS, "\n".join([*lines, ""]).encode())])),
                runtime,
            ]
        ),
    )


@rule
async def package_rocm_wheel(field_set: RocmWheelFieldSet) -> BuiltPackage:
    # Toolchains, archives and locks of the whole chain are checked before any fetch or
    # build starts.
    await Get(CheckedChain, ChainRequest(field_set.address))
    await check_runtime_set(field_set.address)  # runtime_env conflicts, run-time locks
    built = await Get(BuiltRocmWheel, WheelRequest(field_set.address))
    if built.error:
        raise RocmBuildError(built.error)
    # The whole chain goes to dist/, each wheel with its build log, under its target's dir.
    outputs = []
    artifacts = []
    for wheel in built.closure:
        directory = dist_dir(wheel.address)
        merged = await Get(Digest, MergeDigests([wheel.wheel, wheel.log]))
        outputs.append(await Get(Digest, AddPrefix(merged, directory)))
        artifacts.append(BuiltPackageArtifact(f"{directory}/{wheel.wheel_name}"))
    # And, for the target packaged, the chain as one thing to install (see install_set).
    install = f"{dist_dir(field_set.address)}.install"
    outputs.append(await Get(Digest, AddPrefix(await install_set(built.closure), install)))
    artifacts.append(BuiltPackageArtifact(f"{install}/{INSTALL_REQUIREMENTS}"))
    return BuiltPackage(await Get(Digest, MergeDigests(outputs)), tuple(artifacts))


def rules():
    return [*collect_rules(), UnionRule(PackageFieldSet, RocmWheelFieldSet)]
