"""The inputs of a rocm_wheel's build process, resolved into its request (WheelBuildRequest)
and the build info that records them: the environment, Python and toolchain, the patched tree in
layers, the locked build requirements, archives, crates and the dependency wheels. The build
(build.py) asks for them, and so does the preflight (checks/upstream_steps.py runs the upstream's
metadata hook in the build's sandbox), which is why this module is apart from the build: the
build waits on the checks."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field, replace
from typing import Any, Dict, Optional, Sequence, Tuple

from pants.engine.addresses import Address
from pants.engine.fs import (
    EMPTY_DIGEST,
    AddPrefix,
    Digest,
    MergeDigests,
    RemovePrefix,
)
from pants.engine.environment import EnvironmentName
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.unions import UnionRule, union
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.subsystems.bootstrap_wheels import BootstrapWheels
from rocm_build.upstream.archives import ArchiveRequest, FetchedArchive
from rocm_build.wheel.build_process import (
    ARCHIVES_DIR,
    TREE_CHANGES,
    PreflightBuild,
    PreflightWheelRequest,
    WheelBuildRequest,
    local_version_label,
)
from rocm_build.locks import build_requirements
from rocm_build.locks.build_requirements import LockedRequirements, LockedRequirementsRequest, LockWheels, LockWheelsRequest
from rocm_build.prebuilt import wheel_rules as prebuilt_rules
from rocm_build.prebuilt.wheel_rules import FetchedPrebuilt, PrebuiltRequest
from rocm_build.rust import cargo as rust_cargo
from rocm_build.rust.cargo import CargoBuild, CargoBuildRequest
from rocm_build.subsystems import bootstrap_wheels
from rocm_build.toolchain import container, interpreters, rocm_sdk
from rocm_build.toolchain import isolation as toolchain_isolation
from rocm_build.toolchain.container import BuildEnvironment, BuildEnvironmentRequest
from rocm_build.toolchain.interpreters import BuildPython, BuildPythonRequest
from rocm_build.toolchain.isolation import NetworkIsolation
from rocm_build.toolchain.rocm_sdk import ResolvedToolchain, ToolchainRequest
from rocm_build.upstream import archives as upstream_archives
from rocm_build.upstream import source_tree, upstream_repo
from rocm_build.upstream.fetch import PACK_DIR, TREE_DIR
from rocm_build.upstream.source_tree import MergedTree, MergedTreeRequest, SourceTree
from rocm_build.upstream.upstream_repo import ResolvedUpstream, UpstreamRequest
from rocm_build.wheel import build_process, build_spec
from rocm_build.wheel.build_spec import WheelBuildSpec, WheelRequest, lock_request

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
    # The Pants run (RunId) whose build process made it, None when a cache gave it: what
    # `package`'s summary calls built. Not part of the value: a cache hit is the same wheel.
    ran_in: Optional[int] = field(default=None, compare=False)


@dataclass(frozen=True)
class PreparedWheelBuild:
    request: WheelBuildRequest
    build_info: str  # JSON: the request's inputs, down to the dependencies' sources
    dependencies: Tuple[BuiltRocmWheel, ...]  # the ones that built (optional ones may not)


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
    cargo: Optional[CargoBuild] = None,
) -> str:
    info: Dict[str, Any] = {
        "target": spec.owner,
        "gpu_targets": list(spec.gpu_targets),
        "allow_missing_gpu_targets": list(spec.allow_missing_gpu_targets),
        "label": label,
        "source": {
            "pin": upstream.pin_name,
            "url": upstream.pin.url,
            # An archive's identity is its sha256 (archive_source.py), a repository's its commit.
            upstream.identity_key: upstream.pin.commit,
            "patches": [{"path": p.path, "sha256": p.sha256} for p in upstream.patches],
        },
        "recipe": spec.recipe(),
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
            # Each by the file and sha256 the lock pins: what the wheel's SBOM lists.
            "wheels": [{"name": d.name, "version": d.version, "file": d.filename, "sha256": d.sha256} for d in locked.lock.dists],
        },
        "archives": {
            var: {"target": a.address.spec, "url": a.url, "sha256": a.sha256}
            for (var, _), a in zip(spec.archives, archives)
        },
        **({"cargo_crates": dict(cargo.info)} if cargo else {}),
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
    }
    return json.dumps(info, indent=2, sort_keys=True)


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


@union(in_scope_types=[EnvironmentName])
@dataclass(frozen=True)
class DependencyWheelsRequest:
    """The wheels a build's venv gets, a member for each way of getting them: the preflight's
    here (the prebuilt ones only: nothing is built for it), the build's in build.py (the
    rocm_wheels built too, each gated by its chain's checks). A union, so that this module, which
    the checks use, needs nothing of the build, which waits on the checks."""

    address: Address


@dataclass(frozen=True)
class DependencyWheels:
    wheels: Tuple[BuiltRocmWheel, ...]  # the built ones that built (optional ones may not), then the prebuilt ones


@dataclass(frozen=True)
class PrebuiltDependencies(DependencyWheelsRequest):
    """The prebuilt dependencies only: a preflight's sandbox."""


@rule(desc="Fetching the prebuilt dependencies of a rocm_wheel", level=LogLevel.DEBUG)
async def prebuilt_dependency_wheels(request: PrebuiltDependencies) -> DependencyWheels:
    spec = await Get(WheelBuildSpec, WheelRequest(request.address))
    fetched = await MultiGet(Get(FetchedPrebuilt, PrebuiltRequest(a, f"the `dependencies` field of {spec.owner}")) for a in spec.prebuilt)
    return usable_dependencies(spec.owner, (), fetched)


def usable_dependencies(owner: str, built: Sequence[BuiltRocmWheel], prebuilt: Sequence[FetchedPrebuilt]) -> DependencyWheels:
    """The built wheels that built (an optional one may not; said here), then the prebuilt ones."""
    wheels = (*built, *(prebuilt_wheel(p) for p in prebuilt))
    for dep in wheels:
        if dep.error:
            why = dep.error if dep.skipped else "it failed to build."
            logger.warning(f"{owner}: building without optional {dep.address.spec}: {why}")
    return DependencyWheels(tuple(d for d in wheels if d.wheel_name))


@dataclass(frozen=True)
class BuildHostRequest:
    spec: WheelBuildSpec


@dataclass(frozen=True)
class BuildHost:
    """Where a build runs: its environment, its Python and toolchain there, and the Python of
    this machine that downloads for it (the build Python's minor version)."""

    environment: BuildEnvironment
    python: BuildPython
    host_python: BuildPython
    toolchain: ResolvedToolchain


@rule(desc="Resolving the environment, Python and toolchain of a rocm_wheel", level=LogLevel.DEBUG)
async def resolve_build_host(request: BuildHostRequest) -> BuildHost:
    spec, owner = request.spec, request.spec.owner
    environment = await Get(BuildEnvironment, BuildEnvironmentRequest(spec.environment, owner))
    image = environment.image  # the toolchain and Python are looked for in it
    python, toolchain = await MultiGet(
        Get(BuildPython, BuildPythonRequest(spec.python, owner, image)),
        Get(ResolvedToolchain, ToolchainRequest(spec.toolchain, f"the `toolchain` field of {owner}", image, spec.gpu_targets)),
    )
    host_python = await Get(BuildPython, BuildPythonRequest(python.major_minor, owner)) if image else python
    return BuildHost(environment, python, host_python, toolchain)


@dataclass(frozen=True)
class BuildLockWheelsRequest:
    spec: WheelBuildSpec


@rule(desc="Downloading the locked build requirements of a rocm_wheel", level=LogLevel.DEBUG)
async def build_lock_wheels(request: BuildLockWheelsRequest) -> LockWheels:
    """The lock's wheels as soon as the Python is known, not after the tree: LockedRequirements
    (which needs the tree) finds them downloaded."""
    spec = request.spec
    if not spec.lock_path:
        return LockWheels(EMPTY_DIGEST, EMPTY_DIGEST)
    host = await Get(BuildHost, BuildHostRequest(spec))
    return await Get(LockWheels, LockWheelsRequest(spec.owner, spec.lock_path, host.host_python))


@dataclass(frozen=True)
class TreeLayersRequest:
    source: SourceTree
    owner: str


@dataclass(frozen=True)
class TreeLayers:
    """The tree as layers where it can be: the fetched pack, the same for every patch change,
    is checked out by git, once per machine and stacked under the patched files
    (build_wheel.sh), or for a container before it starts (in_container.sh). When a patch
    deletes files, the merged tree is written by Pants."""

    tree: Digest  # the merged tree, or the patched files under TREE_CHANGES
    pack: Optional[Digest]  # the fetched pack, None with a merged tree


@rule(desc="Layering a rocm_wheel's source tree", level=LogLevel.DEBUG)
async def tree_layers(request: TreeLayersRequest) -> TreeLayers:
    source = request.source
    if source.removes_files:
        return TreeLayers((await Get(MergedTree, MergedTreeRequest(source, request.owner))).digest, None)
    changes, pack = await MultiGet(Get(Digest, RemovePrefix(source.changes, TREE_DIR)), Get(Digest, RemovePrefix(source.pack, PACK_DIR)))
    return TreeLayers(await Get(Digest, AddPrefix(changes, TREE_CHANGES)), pack)


@dataclass(frozen=True)
class WheelInputsRequest:
    """The inputs of the build of `dependencies.address`, with the dependency wheels as the
    member says: the preflight's (prebuilt only) or the build's (built too)."""

    dependencies: DependencyWheelsRequest

    @property
    def address(self) -> Address:
        return self.dependencies.address


@rule(desc="Resolving the inputs of a rocm_wheel", level=LogLevel.DEBUG)
async def prepare_wheel_inputs(request: WheelInputsRequest, isolation: NetworkIsolation) -> PreparedWheelBuild:
    spec = await Get(WheelBuildSpec, WheelRequest(request.address))
    owner = spec.owner
    # What needs nothing but the spec, together: on a first networked build the tree, the
    # archives, the lock's wheels, the bootstrap wheels and the dependencies download (and
    # build) at once. (`package` checked the toolchains before any of it: chain.py.)
    host, upstream, bootstrap, _, deps, *archives = await MultiGet(
        [
            Get(BuildHost, BuildHostRequest(spec)),
            Get(ResolvedUpstream, UpstreamRequest(spec.upstream.address, f"the `source` field of {owner}")),
            Get(BootstrapWheels),
            Get(LockWheels, BuildLockWheelsRequest(spec)),  # for the lock's check below
            Get(DependencyWheels, DependencyWheelsRequest, request.dependencies),
            *(Get(FetchedArchive, ArchiveRequest(a, f"the `archives` field of {owner}")) for _, a in spec.archives),
        ]
    )
    image, python, usable = host.environment.image, host.python, deps.wheels
    # What needs the tree: its layers, its crates and the cargo config that keeps the build
    # offline (cargo.py), and the lock's check against it (the lock's wheels are here already).
    tree, *more = await MultiGet(
        [
            Get(TreeLayers, TreeLayersRequest(upstream.source, owner)),
            *([Get(CargoBuild, CargoBuildRequest(spec, upstream.source, image))] if spec.rust else []),
            *([Get(LockedRequirements, LockedRequirementsRequest, lock_request(spec, upstream, host.host_python))] if spec.lock_path else []),
        ]
    )
    cargo = more.pop(0) if spec.rust else None
    locked = more.pop(0) if spec.lock_path else None

    # The build venv gets the dependencies, and the prebuilt wheels they were built on (a torch
    # that links the SDK's library cannot be imported without the SDK's wheel). Not the rocm_wheels
    # below them: a build depends on what its dependencies ship (early cutoff), and a prebuilt
    # wheel changes only with its pin. Device wheels (GPU code split from a prebuilt host) are not
    # compiled against: only in install sets.
    below = {w.address: w for d in usable for w in (*(c for c in d.closure if is_prebuilt(c)), d)}.values()
    dep_wheels = await Get(Digest, MergeDigests(d.payload for d in below if not is_device_wheel(d)))
    deps_dir, bootstrap_dir, *archive_trees = await MultiGet(
        [
            Get(Digest, AddPrefix(dep_wheels, "deps")),
            Get(Digest, AddPrefix(bootstrap.digest, "bootstrap")),
            *(Get(Digest, AddPrefix(a.tree, f"{ARCHIVES_DIR}/{var}")) for (var, _), a in zip(spec.archives, archives)),
        ]
    )
    inputs = await Get(
        Digest,
        MergeDigests(
            [
                tree.tree,
                deps_dir,
                bootstrap_dir,
                *([locked.inputs] if locked else []),
                *archive_trees,
                *([cargo.inputs] if cargo else []),
            ]
        ),
    )
    label = local_version_label(host.toolchain, spec)
    network = isolation.describe(in_image=bool(image))
    info = build_info_json(spec, upstream, host.toolchain, python, label, network, host.environment, locked, archives, usable, cargo)
    build = WheelBuildRequest(
        spec, host.toolchain, python, isolation.isolated(bool(image)), image, label, upstream.commit_time, inputs,
        source_pack=tree.pack,
        venv_key=venv_key(python, bootstrap.digest, dep_wheels, locked),
        rust=cargo.rust.identity if cargo else "",
    )  # fmt: skip
    if spec.kept_build_dir:
        not_tree = [*archive_trees, *([cargo.inputs] if cargo else [])]
        build = replace(build, kept_key=kept_build_dir_key(build, not_tree))
    return PreparedWheelBuild(build, info, usable)


def kept_build_dir_key(request: WheelBuildRequest, inputs_not_tree: Sequence[Digest]) -> str:
    """The name of the component's kept build directory: everything in the build's key but the
    tree (its pins' commits and our patches). The commit's time is in it: compilers write
    SOURCE_DATE_EPOCH into __DATE__, which a unit that is not recompiled would keep."""
    spec = request.spec
    made_of = {
        "target": spec.owner,
        "recipe": [spec.steps, spec.wheel_command, spec.kept_build_dir, spec.lock_path or "", sorted(spec.env.items())],
        "gpu_targets": spec.gpu_targets,
        "toolchain": request.toolchain.identity,
        "python": request.python.identity,
        "image": request.image.image_id if request.image else "",
        "label": request.label,
        "network_isolation": request.network_isolation,
        "venv": request.venv_key,  # the bootstrap and dependency wheels and the lock
        "inputs": [d.fingerprint for d in inputs_not_tree],  # archives, crates
        "rust": request.rust,
        "source_date_epoch": request.source_date_epoch,
    }
    return hashlib.sha256(json.dumps(made_of, sort_keys=True).encode()).hexdigest()[:32]


def venv_key(python: BuildPython, bootstrap: Digest, deps: Digest, locked: Optional[LockedRequirements]) -> str:
    made_of = [python.identity, bootstrap.fingerprint, deps.fingerprint, locked.inputs.fingerprint if locked else ""]
    return hashlib.sha256("\n".join(made_of).encode()).hexdigest()[:32]


@rule(desc="Resolving the inputs of a rocm_wheel preflight", level=LogLevel.DEBUG)
async def prepare_preflight_build(request: PreflightWheelRequest) -> PreflightBuild:
    prepared = await Get(PreparedWheelBuild, WheelInputsRequest(PrebuiltDependencies(request.address)))
    return PreflightBuild(prepared.request)


def is_prebuilt(wheel: BuiltRocmWheel) -> bool:
    return "prebuilt" in json.loads(wheel.build_info).get("source", {})


def is_device_wheel(wheel: BuiltRocmWheel) -> bool:
    return "device_of" in json.loads(wheel.build_info).get("source", {})


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        UnionRule(DependencyWheelsRequest, PrebuiltDependencies),
        *build_requirements.rules(),
        *rust_cargo.rules(),
        *bootstrap_wheels.rules(),
        *container.rules(),
        *interpreters.rules(),
        *toolchain_isolation.rules(),
        *rocm_sdk.rules(),
        *upstream_archives.rules(),
        *prebuilt_rules.rules(),
        *source_tree.rules(),
        *upstream_repo.rules(),
        *build_process.rules(),
        *build_spec.rules(),
    ])
