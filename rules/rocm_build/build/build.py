"""rocm_wheel: resolve a build spec's inputs into a build request, run it in a sandbox, and
audit the wheel it writes before handing it on (build_output.py finishes it; the `package`
goal, goals/package.py, writes it to dist/)."""

from __future__ import annotations

import logging
import posixpath
from dataclasses import dataclass, replace

from pants.engine.addresses import Address
from pants.engine.fs import EMPTY_DIGEST, CreateDigest, Digest, DigestEntries, FileEntry
from pants.engine.internals.session import RunId
from pants.engine.process import FallibleProcessResult, Process
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.unions import UnionRule
from pants.option.global_options import NamedCachesDirOption
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.build.build_output import BuildOutput, BuiltPayload, FinishedWheel, WheelWithBuildInfo
from rocm_build.prepare.inputs import (
    BuiltRocmWheel,
    DependencyWheels,
    DependencyWheelsRequest,
    PreparedWheelBuild,
    WheelInputsRequest,
    usable_dependencies,
)
from rocm_build.audits import gpu_audit, portable
from rocm_build.audits.gpu_audit import GpuCode, audit_problems, with_gpu_code
from rocm_build.audits.portable import PlatformPolicy
from rocm_build.build import build_output
from rocm_build.caches import ccache
from rocm_build.caches.ccache import CcacheRemote
from rocm_build.checks import chain as chain_check
from rocm_build.checks.chain import ChainRequest, CheckedChain
from rocm_build.errors import RocmBuildError
from rocm_build.prebuilt.wheel_rules import FetchedPrebuilt, PrebuiltRequest
from rocm_build.prepare import inputs as build_inputs
from rocm_build.toolchain.isolation import explain_build_failure
from rocm_build.upstream.upstream_repo import ResolvedUpstream, UpstreamRequest
from rocm_build.wheel import patch_files
from rocm_build.wheel.build_process import LOG_CACHE, WheelBuildRequest, with_version_key
from rocm_build.wheel.build_spec import WheelBuildSpec, WheelRequest, log_name
from rocm_build.wheel.built_wheel import BuiltWheel
from rocm_build.wheel.patch_files import PatchAddedFiles, PatchAddedFilesRequest, missing_patch_files

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChainWheelRequest:
    """The build of `address` as part of the chain of `chain_root`, whose checks (checks/chain.py)
    gate it: the build awaits them before it asks for any input of its own.

    Why it matters with pantsd: after an input moved, Pants cleans a rule's earlier
    dependencies all at once (speculatively) and cancels the rest when one of them changed. A
    build asked for beside the checks (by `package`, or below a dependency's build) would start
    while they run, be killed when they finish and start again: a build's set-up paid twice per
    edit. Awaited first, the checks run alone and the build starts once, after them."""

    address: Address
    chain_root: Address


@dataclass(frozen=True)
class ChainDependencies(DependencyWheelsRequest):
    """The dependencies of a build in the chain of `chain_root`: the rocm_wheels built, each
    gated by the chain's checks (ChainWheelRequest), while the prebuilt wheels download."""

    chain_root: Address


@rule(desc="Building the dependencies of a rocm_wheel", level=LogLevel.DEBUG)
async def chain_dependency_wheels(request: ChainDependencies) -> DependencyWheels:
    spec = await Get(WheelBuildSpec, WheelRequest(request.address))
    # Built and prebuilt together: the prebuilt wheels download while the others build.
    deps = await MultiGet(
        [
            *(Get(BuiltRocmWheel, ChainWheelRequest(a, request.chain_root)) for a in spec.dependencies),
            *(Get(FetchedPrebuilt, PrebuiltRequest(a, f"the `dependencies` field of {spec.owner}")) for a in spec.prebuilt),
        ]
    )
    built = len(spec.dependencies)
    return usable_dependencies(spec.owner, deps[:built], deps[built:])


@rule(desc="Resolving the inputs of a rocm_wheel build", level=LogLevel.DEBUG)
async def prepare_wheel_build(request: WheelRequest) -> PreparedWheelBuild:
    # As the build of the target as its chain's root asks for it (the same nodes).
    return await Get(PreparedWheelBuild, WheelInputsRequest(ChainDependencies(request.address, request.address)))


def failed(spec: WheelBuildSpec, build_info: str, message: str) -> BuiltRocmWheel:
    """A failed build stops the chain, unless the component is optional."""
    if not spec.optional:
        raise RocmBuildError(message)
    logger.warning(f"{message}\n{spec.owner} is optional: its dependents are built without it.")
    return BuiltRocmWheel(spec.address, None, "", EMPTY_DIGEST, EMPTY_DIGEST, build_info, error=message)


@rule(desc="Building rocm_wheel as the root of its chain", level=LogLevel.DEBUG)
async def build_rocm_wheel_of_target(request: WheelRequest) -> BuiltRocmWheel:
    """A target's wheel, gated by its own chain's checks (verify-reproducible, kernel tests)."""
    return await Get(BuiltRocmWheel, ChainWheelRequest(request.address, request.address))


@rule(desc="Building rocm_wheel", level=LogLevel.DEBUG)
async def build_rocm_wheel(
    request: ChainWheelRequest, named_caches: NamedCachesDirOption, _ccache_remote: CcacheRemote
) -> BuiltRocmWheel:
    # (ccache's remote storage is configured for this session before any build starts.)
    # The chain's checks first, alone: nothing the build needs is asked for before they pass
    # (see ChainWheelRequest). Their result names the chain only, so an edit that they pass
    # leaves it the same, and Pants does not restart what waits on them.
    await Get(CheckedChain, ChainRequest(request.chain_root))
    spec = await Get(WheelBuildSpec, WheelRequest(request.address))
    unsupported = spec.unsupported_gpu_targets()
    if unsupported and spec.optional:
        # Nothing fetched or built: upstream would not make code for these targets.
        return BuiltRocmWheel(spec.address, None, "", EMPTY_DIGEST, EMPTY_DIGEST, "{}", error=unsupported, skipped=True)
    prepared = await Get(PreparedWheelBuild, WheelInputsRequest(ChainDependencies(request.address, request.chain_root)))
    build_info = prepared.build_info
    process = await Get(Process, WheelBuildRequest, prepared.request)
    result = await Get(FallibleProcessResult, Process, process)
    if result.exit_code != 0:
        output = result.stdout.decode(errors="replace") + result.stderr.decode(errors="replace")
        log_path = f"{named_caches.val}/{LOG_CACHE}/{log_name(spec.address)}.log"
        return failed(spec, build_info, explain_build_failure(spec.owner, spec.timeout, result.exit_code, output, log_path))
    # `package` says `built` of a wheel whose process ran in this run, `cached` of one a cache gave.
    made_by = result.metadata
    ran_in = made_by.source_run_id if made_by.source(RunId(made_by.source_run_id)) == made_by.Source.RAN else None

    out = await Get(BuiltPayload, BuildOutput(result.output_digest))
    # The manylinux policy (auditwheel) is read beside the GPU code, not after it: for a GB
    # wheel each takes seconds. add_build_info asks for the policy again (memoized).
    code, policy = await MultiGet(
        Get(GpuCode, BuiltWheel(out.payload, out.wheel_name)), Get(PlatformPolicy, BuiltWheel(out.payload, out.wheel_name))
    )
    upstream = await Get(ResolvedUpstream, UpstreamRequest(spec.upstream.address, f"the `source` field of {spec.owner}"))
    added = await Get(PatchAddedFiles, PatchAddedFilesRequest(upstream.source, spec.owner))
    patch_sets = ", ".join(sorted({posixpath.dirname(p.path) + "/" for p in spec.upstream.patches})) or "none"
    problems = (*audit_problems(spec, out.wheel_name, code), *missing_patch_files(spec.owner, out.wheel_name, patch_sets, added.paths, code.members))
    if problems:
        return failed(spec, build_info, "\n".join(problems))
    # Which build this is, in the version of the wheel that ships: its inputs and its bytes.
    # (The key covers the GPU code and the platform add_build_info writes into the wheel too.)
    build_info = with_version_key(with_gpu_code(build_info, spec, code), out.sha256, policy.to_json())
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
        ran_in=ran_in,
    )
    return replace(built, closure=(*closure, built))


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        UnionRule(DependencyWheelsRequest, ChainDependencies),
        *build_inputs.rules(),
        *gpu_audit.rules(),
        *portable.rules(),
        *build_output.rules(),
        *ccache.rules(),
        *patch_files.rules(),
        *chain_check.rules(),
    ])
