"""rocm_wheel: build a wheel from a patched tree with the ROCm environment, in a sandbox."""

from __future__ import annotations

import json
import logging
import pkgutil
import shlex
from dataclasses import dataclass, replace
from typing import Dict, Optional, Tuple

from pants.core.goals.package import BuiltPackage, BuiltPackageArtifact, PackageFieldSet
from pants.engine.addresses import Address, Addresses, UnparsedAddressInputs
from pants.engine.fs import (
    AddPrefix,
    CreateDigest,
    Digest,
    DigestEntries,
    FileContent,
    FileEntry,
    MergeDigests,
)
from pants.engine.process import FallibleProcessResult, Process
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import DependenciesRequest, Targets, WrappedTarget, WrappedTargetRequest
from pants.engine.unions import UnionRule
from pants.option.global_options import NamedCachesDirOption
from pants.util.logging import LogLevel

from rocm_build.bootstrap_wheels import bootstrap_wheels_digest
from rocm_build.errors import RocmBuildError, indent, tail
from rocm_build.rocm_env import build_env, check_gpu_targets
from rocm_build.target_types import (
    GpuTargetsField,
    RocmWheelTarget,
    WheelBuildCommandField,
    WheelBuildRequirementsField,
    WheelCommandField,
    WheelDependenciesField,
    WheelEnvField,
    WheelKindField,
    WheelMaxJobsField,
    WheelOptionalField,
    WheelSourceField,
    WheelTimeoutField,
    WheelToolchainField,
)
from rocm_build.toolchain import ResolvedToolchain, ToolchainRequest, cache_suffix
from rocm_build.targets import expect_target
from rocm_build.tools import HostTools
from rocm_build.upstream import ResolvedUpstream, UpstreamRequest

logger = logging.getLogger(__name__)

LOG_CACHE = "rocm_build_logs"
DEFAULT_INDEX_URL = "https://pypi.org/simple"


@dataclass(frozen=True)
class WheelRequest:
    address: Address


@dataclass(frozen=True)
class BuiltRocmWheel:
    address: Address
    # None when an optional build failed; `error` then says why.
    wheel_name: Optional[str]
    wheel_sha256: str
    wheel: Digest  # the wheel file alone, at the digest root
    log: Digest  # `<wheel or target>.build.log` at the digest root
    build_info: str  # JSON
    error: Optional[str] = None
    # This wheel and the wheels of its dependencies, for `package` to write to dist/.
    closure: Tuple["BuiltRocmWheel", ...] = ()


def _script(name: str) -> bytes:
    data = pkgutil.get_data(__name__, f"scripts/{name}")
    assert data is not None, name
    return data


def _ccache_name(owner: str, gpu_targets: Tuple[str, ...]) -> str:
    return "rocm_ccache_" + cache_suffix(f"{owner} {' '.join(gpu_targets)}")


def log_name(address: Address) -> str:
    return address.spec.replace("/", ".").replace(":", "@").lstrip(".")


async def _wheel_dependencies(target: RocmWheelTarget) -> Tuple[Address, ...]:
    deps = await Get(Targets, DependenciesRequest(target[WheelDependenciesField]))
    return tuple(t.address for t in deps if isinstance(t, RocmWheelTarget))


async def wheel_chain(root: Address) -> Tuple[RocmWheelTarget, ...]:
    """The rocm_wheel targets `root` needs, itself last, in build order.

    Raises on a cycle with a message that names the rocm_wheel chain (Pants' own cycle
    message talks about Python imports).
    """
    path: list = []
    order: list = []

    async def visit(address: Address) -> None:
        if address in path:
            cycle = " -> ".join(a.spec for a in [*path[path.index(address):], address])
            raise RocmBuildError(
                f"{root.spec}: rocm_wheel dependencies form a cycle: {cycle}. A wheel cannot be "
                "built from itself; remove one of these `dependencies` edges."
            )
        if any(t.address == address for t in order):
            return
        path.append(address)
        wrapped = await Get(WrappedTarget, WrappedTargetRequest(address, "rocm_wheel dependencies"))
        if isinstance(wrapped.target, RocmWheelTarget):
            for dep in await _wheel_dependencies(wrapped.target):
                await visit(dep)
            order.append(wrapped.target)
        path.pop()

    await visit(root)
    return tuple(order)


def wheel_env(target: RocmWheelTarget) -> Tuple[Tuple[str, ...], Dict[str, str]]:
    """The target's gpu targets (validated, sorted) and its build environment."""
    owner = target.address.spec
    gpu_targets = tuple(sorted(target[GpuTargetsField].value or ()))
    try:
        check_gpu_targets(gpu_targets, owner)
        env = build_env(target[WheelKindField].value, gpu_targets, dict(target[WheelEnvField].value or {}), owner)
    except ValueError as e:
        raise RocmBuildError(str(e)) from None
    return gpu_targets, env


async def resolve_single(target: RocmWheelTarget, field) -> Address:
    addresses = await Get(Addresses, UnparsedAddressInputs, _single(target, field))
    return addresses[0]


@rule(desc="Building rocm_wheel", level=LogLevel.DEBUG)
async def build_rocm_wheel(
    request: WheelRequest, tools: HostTools, named_caches: NamedCachesDirOption
) -> BuiltRocmWheel:
    target = await expect_target(request.address, RocmWheelTarget, "a rocm_wheel build")
    owner = target.address.spec
    gpu_targets, env = wheel_env(target)

    # The toolchain first: without it nothing else is worth fetching or building.
    toolchain = await Get(
        ResolvedToolchain,
        ToolchainRequest(
            await resolve_single(target, WheelToolchainField), f"the `toolchain` field of {owner}"
        ),
    )
    upstream = await Get(
        ResolvedUpstream,
        UpstreamRequest(await resolve_single(target, WheelSourceField), f"the `source` field of {owner}"),
    )
    dep_addresses = await _wheel_dependencies(target)
    deps = await MultiGet(Get(BuiltRocmWheel, WheelRequest(a)) for a in dep_addresses)
    bootstrap = await bootstrap_wheels_digest()
    for dep in deps:
        if dep.error:
            logger.warning(f"{owner}: building without optional {dep.address.spec}: it failed to build.")
    usable = [d for d in deps if d.wheel_name]

    label = f"{toolchain.label}{'.'.join(gpu_targets)}"
    build_info = json.dumps(
        {
            "target": owner,
            "gpu_targets": list(gpu_targets),
            "label": label,
            "source": {
                "pin": upstream.pin_name,
                "url": upstream.pin.url,
                "commit": upstream.pin.commit,
                "patches": [{"path": p.path, "sha256": p.sha256} for p in upstream.patches],
            },
            "toolchain": {"address": toolchain.address.spec, "identity": toolchain.identity},
            "env": env,
            "dependencies": [
                {
                    "target": d.address.spec,
                    "wheel": d.wheel_name,
                    "sha256": d.wheel_sha256,
                    "source": json.loads(d.build_info)["source"],
                }
                for d in usable
            ],
        },
        indent=2,
        sort_keys=True,
    )
    steps = "\n".join(["set -x", *(target[WheelBuildCommandField].value or ()), "set +x", ""])
    scripts = await Get(
        Digest,
        CreateDigest(
            [
                FileContent("__rocm_build/build_wheel.sh", _script("build_wheel.sh")),
                FileContent("__rocm_build/label_wheel.py", _script("label_wheel.py")),
                FileContent("__rocm_build/steps.sh", steps.encode()),
                FileContent("__rocm_build/build_info.json", build_info.encode()),
            ]
        ),
    )
    dep_wheels = await Get(Digest, MergeDigests(d.wheel for d in usable))
    input_digest = await Get(
        Digest,
        MergeDigests(
            [
                upstream.tree,
                scripts,
                await Get(Digest, AddPrefix(dep_wheels, "deps")),
                await Get(Digest, AddPrefix(bootstrap, "bootstrap")),
            ]
        ),
    )
    max_jobs = target[WheelMaxJobsField].value
    requirements = target[WheelBuildRequirementsField].value or ()
    process_env = {
        **env,
        "PATH": "/usr/bin:/bin",
        "ROCM_BUILD_TARGET": owner,
        "ROCM_BUILD_LABEL": label,
        "ROCM_BUILD_LOG_NAME": log_name(target.address),
        "ROCM_BUILD_PYTHON": tools.python.path,
        "ROCM_BUILD_PYTHON_VERSION": tools.python.fingerprint,
        "ROCM_BUILD_TOOLCHAIN_IDENTITY": toolchain.identity,
        "ROCM_BUILD_DEVICE_LIB_DIR": toolchain.device_lib_dir,
        "ROCM_BUILD_CLANG_REL": toolchain.clang,
        "ROCM_BUILD_WHEEL_COMMAND": target[WheelCommandField].value,
        "ROCM_BUILD_REQUIREMENTS": " ".join(shlex.quote(r) for r in requirements),
        "ROCM_BUILD_INDEX_URL": DEFAULT_INDEX_URL,
        "ROCM_BUILD_EXPAND_VARS": " ".join(sorted(k for k, v in env.items() if "$" in v)),
        **({"MAX_JOBS": str(max_jobs)} if max_jobs else {}),
    }
    result = await Get(
        FallibleProcessResult,
        Process(
            argv=(tools.bash.path, "__rocm_build/build_wheel.sh"),
            env=process_env,
            input_digest=input_digest,
            output_directories=("out",),
            append_only_caches={
                toolchain.cache_name: ".rocm",
                LOG_CACHE: ".logs",
                # Compiler cache per component and arch: shared by rebuilds, never in a key.
                _ccache_name(owner, gpu_targets): ".ccache",
            },
            description=f"Building rocm_wheel {owner}",
            level=LogLevel.INFO,
            timeout_seconds=target[WheelTimeoutField].value,
        ),
    )
    log_path = f"{named_caches.val}/{LOG_CACHE}/{log_name(target.address)}.log"
    if result.exit_code != 0:
        output = result.stdout.decode(errors="replace") + result.stderr.decode(errors="replace")
        timeout = target[WheelTimeoutField].value
        why = (
            f"exceeded its timeout of {timeout} s (raise `timeout` on the target if the build needs longer)"
            if "Exceeded timeout" in output
            else f"failed (exit {result.exit_code})"
        )
        message = (
            f"rocm_wheel {owner}: the build {why}.\nLast lines of the log:\n"
            f"{indent(tail(output, 25))}\nFull log: {log_path}"
        )
        if target[WheelOptionalField].value:
            logger.warning(f"{message}\n{owner} is optional: its dependents are built without it.")
            return BuiltRocmWheel(target.address, None, "", _EMPTY, _EMPTY, build_info, error=message)
        raise RocmBuildError(message)

    # Entries carry each file's sha256, so even a GB-sized torch wheel is never read into
    # memory here; renaming the log is a new entry pointing at the same content.
    entries = await Get(DigestEntries, Digest, result.output_digest)
    files = {e.path: e for e in entries if isinstance(e, FileEntry)}
    (wheel_path,) = [p for p in files if p.endswith(".whl")]
    wheel_name = wheel_path.rsplit("/", 1)[-1]
    wheel, log = await MultiGet(
        Get(Digest, CreateDigest([FileEntry(wheel_name, files[wheel_path].file_digest)])),
        Get(Digest, CreateDigest([FileEntry(f"{wheel_name}.build.log", files["out/build.log"].file_digest)])),
    )
    closure = tuple({w.address: w for d in usable for w in d.closure}.values())
    built = BuiltRocmWheel(
        address=target.address,
        wheel_name=wheel_name,
        wheel_sha256=files[wheel_path].file_digest.fingerprint,
        wheel=wheel,
        log=log,
        build_info=build_info,
    )
    return replace(built, closure=(*closure, built))


_EMPTY = Digest("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", 0)


def _single(target: RocmWheelTarget, field) -> UnparsedAddressInputs:
    return UnparsedAddressInputs(
        [target[field].value],
        owning_address=target.address,
        description_of_origin=f"the `{field.alias}` field of {target.address.spec}",
    )


@dataclass(frozen=True)
class RocmWheelFieldSet(PackageFieldSet):
    required_fields = (WheelSourceField,)

    source: WheelSourceField


@rule
async def package_rocm_wheel(field_set: RocmWheelFieldSet) -> BuiltPackage:
    chain = await wheel_chain(field_set.address)
    # Every toolchain of the chain is checked before any fetch or build starts, so a
    # machine without ROCm stops at once with a message naming the missing toolchain.
    toolchains = {await resolve_single(t, WheelToolchainField): t for t in chain}
    await MultiGet(
        Get(ResolvedToolchain, ToolchainRequest(a, f"the `toolchain` field of {t.address.spec}"))
        for a, t in toolchains.items()
    )
    built = await Get(BuiltRocmWheel, WheelRequest(field_set.address))
    if built.error:
        raise RocmBuildError(built.error)
    # The whole chain goes to dist/, each wheel with its build log, under its target's dir.
    outputs = []
    artifacts = []
    for wheel in built.closure:
        directory = wheel.address.spec_path.replace("/", ".") or "root"
        merged = await Get(Digest, MergeDigests([wheel.wheel, wheel.log]))
        outputs.append(await Get(Digest, AddPrefix(merged, directory)))
        artifacts.append(BuiltPackageArtifact(f"{directory}/{wheel.wheel_name}"))
    return BuiltPackage(await Get(Digest, MergeDigests(outputs)), tuple(artifacts))


def rules():
    return [*collect_rules(), UnionRule(PackageFieldSet, RocmWheelFieldSet)]
