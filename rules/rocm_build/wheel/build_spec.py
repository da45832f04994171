"""One description of a rocm_wheel build, in two steps (as Pants' adhoc_tool does):

- `WheelBuildSpec`: what the target asks for, with every field validated and every address
  resolved, but nothing fetched, built or run. `rocm-plan` prints it. It holds no Target:
  the rule here reads the target of a `WheelRequest` (an address) into it.
- `WheelBuildRequest`: the spec plus its resolved inputs, made into the exact `Process` that
  runs: build_process.py.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Tuple

from rocm_build.pants_environments import EnvironmentField
from pants.engine.addresses import Address, Addresses, UnparsedAddressInputs
from pants.engine.rules import Get, collect_rules, rule
from pants.engine.unions import UnionMembership
from pants.util.frozendict import FrozenDict
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.declared import DeclaredDependencies, DeclaredDependenciesRequest
from rocm_build.errors import RocmBuildError
from rocm_build.locks.build_requirements import LockedRequirementsRequest
from rocm_build.locks.lockfile import LockError, requirement_lines
from rocm_build.prebuilt.wheel_rules import PrebuiltClosure, PrebuiltClosureRequest
from rocm_build.subsystems.rocm_build import RocmBuildSubsystem
from rocm_build.toolchain.interpreters import BuildPython, parse_constraint
from rocm_build.upstream.sources import BUILT_WHEEL, PINNED_WHEELS, SourceFieldSet, as_dependency
from rocm_build.wheel.env import build_env, check_gpu_targets
from rocm_build.wheel.kinds import KINDS
from rocm_build.wheel.target_types import (
    AllowMissingGpuTargetsField,
    GpuTargetsField,
    RocmWheelTarget,
    SupportedGpuTargetsField,
    SupportedGpuTargetsSourceField,
    WheelArchivesField,
    WheelBuildCommandField,
    WheelBuildDirField,
    WheelBuildRequirementsField,
    WheelCargoLockField,
    WheelCommandField,
    WheelDependenciesField,
    WheelDownloadsCoveredField,
    WheelEnvField,
    WheelKeepBuildDirField,
    WheelKindField,
    WheelLockField,
    WheelMaxJobsField,
    WheelOptionalField,
    WheelPythonField,
    WheelSourceField,
    WheelTimeoutField,
    WheelToolchainField,
    WheelVersionEnvField,
)
from rocm_build import declared
from rocm_build.prebuilt import wheel_rules as prebuilt_rules
from rocm_build.target_types_rules import expect_target
from rocm_build.toolchain.target_types import RocmToolchainTarget, ToolchainProviderField, ToolchainVersionField
from rocm_build.upstream import sources, upstream_repo
from rocm_build.upstream.upstream_repo import ResolvedUpstream, UpstreamRequest, UpstreamSpec
from rocm_build.wheel import source_kind
from rocm_build.wheel.version_env import pin_version, version_values

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
NOT_RUN = "not run:"  # a `downloads_covered` value: why this build never reaches the file's download


@dataclass(frozen=True)
class WheelRequest:
    address: Address


@dataclass(frozen=True)
class WheelBuildSpec:
    """A rocm_wheel target, validated and resolved to addresses; nothing fetched or run."""

    address: Address
    upstream: UpstreamSpec  # pin and ordered patches of `source`
    toolchain: Address
    dependencies: Tuple[Address, ...]  # rocm_wheel targets
    prebuilt: Tuple[Address, ...]  # prebuilt_wheel targets and theirs (a device wheel's host), dependencies first
    archives: Tuple[Tuple[str, Address], ...]  # (env var, upstream_archive)
    python: str  # the interpreter constraint: the target's `python`, or [rocm-build].python
    gpu_targets: Tuple[str, ...]
    supported_gpu_targets: Tuple[str, ...]  # empty: upstream's list is not known
    supported_gpu_targets_source: str  # the link to upstream's list
    allow_missing_gpu_targets: Tuple[str, ...]  # the gpu-code audit accepts their absence
    env: FrozenDict[str, str]  # the ROCm table for `kind`, with the target's `env` on top
    requirements: Tuple[str, ...]  # requirement lines
    lock_path: Optional[str]  # None when there are no build requirements
    steps: Tuple[str, ...]
    wheel_command: str
    max_jobs: Optional[int]
    timeout: int
    optional: bool
    environment: str = "__local__"  # Pants' `environment` field: a docker_environment runs it in an image
    version_env: Tuple[str, ...] = ()  # variables set to `version` (in `env` too)
    version: str = ""  # the pin's version (version_env.py)
    downloads_covered: FrozenDict[str, str] = FrozenDict()  # tree file -> the variable that stops its download
    kind: str = "generic"  # which component: torch, triton, vllm, ... (env.py)
    cargo_lock: str = ""  # the tree's Cargo.lock whose crates are fetched (cargo_crates.py)
    kept_build_dir: str = ""  # the tree's build directory kept between builds ("": not kept)

    def recipe(self) -> Dict[str, Any]:
        """What the target says the build runs, as its build info records it."""
        return {"steps": list(self.steps), "wheel_command": self.wheel_command, "kept_build_dir": self.kept_build_dir}

    @property
    def owner(self) -> str:
        return self.address.spec

    @property
    def rust(self) -> bool:
        """A Rust build: cargo runs offline on the crates of `cargo_lock`."""
        return bool(self.cargo_lock)

    def unsupported_gpu_targets(self) -> Optional[str]:
        """Why upstream would not build a requested gpu target, or None."""
        if not self.supported_gpu_targets:
            return None
        outside = [t for t in self.gpu_targets if t not in self.supported_gpu_targets]
        if not outside:
            return None
        return (
            f"{self.owner} is asked for {', '.join(outside)} (gpu_targets: {', '.join(self.gpu_targets)}), "
            f"but its upstream builds only {', '.join(self.supported_gpu_targets)} "
            f"(supported_gpu_targets, from {self.supported_gpu_targets_source})"
        )


async def _single(target: RocmWheelTarget, field) -> Address:
    addresses = await Get(
        Addresses,
        UnparsedAddressInputs(
            [target[field].value],
            owning_address=target.address,
            description_of_origin=f"the `{field.alias}` field of {target.address.spec}",
        ),
    )
    return addresses[0]


async def _optional_single(target: RocmWheelTarget, field) -> Optional[Address]:
    return await _single(target, field) if target[field].value else None


async def _archives(target: RocmWheelTarget) -> Tuple[Tuple[str, Address], ...]:
    """The `archives` field: (env var, upstream_archive address) pairs."""
    owner = target.address.spec
    archives = dict(target[WheelArchivesField].value or {})
    for var in archives:
        if not ENV_NAME.match(var):
            raise RocmBuildError(f"{owner}: `archives` key {var!r} is not an environment variable name")
    addresses = await Get(
        Addresses,
        UnparsedAddressInputs(
            list(archives.values()), owning_address=target.address,
            description_of_origin=f"the `archives` field of {owner}",
        ),
    )  # fmt: skip
    return tuple(zip(archives, addresses))


async def _dependencies(
    target: RocmWheelTarget, python: str, defaults: RocmBuildSubsystem, union_membership: UnionMembership
) -> Tuple[Tuple[Address, ...], Tuple[Address, ...]]:
    """The rocm_wheel dependencies (each with the same Python), and the prebuilt wheels: each
    target by what its kind of source is as a dependency (upstream/sources.py)."""
    owner = target.address.spec
    deps = await Get(DeclaredDependencies, DeclaredDependenciesRequest(target[WheelDependenciesField]))
    kinds = union_membership.get(SourceFieldSet)
    wheel_deps = [t for t in deps if as_dependency(kinds, t) == BUILT_WHEEL]
    # Prebuilt wheels with what they depend on (a device wheel's host and family: prebuilt/wheel_rules.py).
    prebuilt_roots = tuple(t.address for t in deps if as_dependency(kinds, t) == PINNED_WHEELS)
    closure = await Get(PrebuiltClosure, PrebuiltClosureRequest(prebuilt_roots, f"the `dependencies` field of {owner}"))
    check_same_python(owner, python, [(t.address.spec, t[WheelPythonField].value or defaults.python) for t in wheel_deps])
    return tuple(t.address for t in wheel_deps), tuple(s.address for s in closure.specs)


@rule(desc="Reading a rocm_wheel target")
async def read_wheel_build_spec(request: WheelRequest, defaults: RocmBuildSubsystem, union_membership: UnionMembership) -> WheelBuildSpec:
    target = await expect_target(request.address, RocmWheelTarget, "a rocm_wheel build")
    owner = target.address.spec
    python = target[WheelPythonField].value or defaults.python
    gpu_targets = tuple(sorted(target[GpuTargetsField].value or ()))
    supported = tuple(target[SupportedGpuTargetsField].value or ())
    supported_source = target[SupportedGpuTargetsSourceField].value or ""
    if supported and not supported_source:
        raise RocmBuildError(
            f"{owner}: `{SupportedGpuTargetsField.alias}` needs `{SupportedGpuTargetsSourceField.alias}`: "
            "a link to the upstream file the list was read from, at the pinned commit."
        )
    try:
        check_gpu_targets(gpu_targets, owner)
        if supported:
            check_gpu_targets(supported, owner, SupportedGpuTargetsField.alias)
        allow_missing = tuple(sorted(target[AllowMissingGpuTargetsField].value or ()))
        if allow_missing:
            check_gpu_targets(allow_missing, owner, AllowMissingGpuTargetsField.alias)
        stray = [t for t in allow_missing if t not in gpu_targets]
        if stray:
            raise ValueError(
                f"{owner}: `{AllowMissingGpuTargetsField.alias}` lists {', '.join(stray)}, which "
                f"`{GpuTargetsField.alias}` does not ask for; list only requested targets there."
            )
        env = build_env(target[WheelKindField].value, gpu_targets, dict(target[WheelEnvField].value or {}), owner)
        requirements = requirement_lines(target[WheelBuildRequirementsField].value or ())
    except (ValueError, LockError) as e:
        message = str(e)  # rocm_env's messages name the target already
        raise RocmBuildError(message if message.startswith(owner) else f"{owner}: {message}") from None
    archives = await _archives(target)
    source = await _single(target, WheelSourceField)
    upstream = await Get(UpstreamSpec, UpstreamRequest(source, f"the `source` field of {owner}"))
    version_env = tuple(target[WheelVersionEnvField].value or ())
    covered = dict(target[WheelDownloadsCoveredField].value or {})
    for var in (*version_env, *(v for v in covered.values() if not v.startswith(NOT_RUN))):
        if not ENV_NAME.match(var):
            raise RocmBuildError(f"{owner}: {var!r} in `{WheelVersionEnvField.alias}` or `{WheelDownloadsCoveredField.alias}` is not an environment variable name")
    version = pin_version(upstream.pin.version, upstream.pin.track, upstream.pin.commit)
    toolchain = await _single(target, WheelToolchainField)
    sdk_requires = await _sdk_requirements(target[WheelKindField].value, toolchain, owner)
    env = {**sdk_requires, **version_values(version_env, version), **env}  # the target's `env` wins
    dependencies, prebuilt = await _dependencies(target, python, defaults, union_membership)
    return WheelBuildSpec(
        address=target.address,
        upstream=upstream,
        toolchain=toolchain,
        dependencies=dependencies,
        prebuilt=prebuilt,
        archives=archives,
        python=python,
        gpu_targets=gpu_targets,
        supported_gpu_targets=supported,
        supported_gpu_targets_source=supported_source,
        allow_missing_gpu_targets=allow_missing,
        env=FrozenDict(env),
        requirements=requirements,
        lock_path=(target[WheelLockField].value or default_lock(owner, upstream.pin_name, python)) if requirements else None,
        steps=tuple(target[WheelBuildCommandField].value or ()),
        wheel_command=target[WheelCommandField].value,
        max_jobs=target[WheelMaxJobsField].value,
        timeout=target[WheelTimeoutField].value,
        optional=target[WheelOptionalField].value,
        environment=target[EnvironmentField].value,
        version_env=version_env,
        version=version,
        downloads_covered=FrozenDict(covered),
        kind=target[WheelKindField].value,
        cargo_lock=_cargo_lock(target),
        kept_build_dir=_kept_build_dir(target),
    )


async def _sdk_requirements(kind: str, toolchain: Address, owner: str) -> Dict[str, str]:
    """A kind that requires TheRock's SDK when built on it (kinds.py: torch) gets the variable
    that says so: installed elsewhere, pip brings the libraries it links."""
    var = KINDS[kind].sdk_requirements_var if kind in KINDS else ""
    if not var:
        return {}
    target = await expect_target(toolchain, RocmToolchainTarget, f"the `toolchain` field of {owner}")
    if target[ToolchainProviderField].value != "therock" or not target[ToolchainVersionField].value:
        return {}
    return {var: f"rocm[libraries]=={target[ToolchainVersionField].value}|triton"}


def _cargo_lock(target: RocmWheelTarget) -> str:
    lock = (target[WheelCargoLockField].value or "").strip("/")
    if lock and (lock.startswith("..") or "/../" in lock or posixpath.basename(lock) != "Cargo.lock"):
        raise RocmBuildError(f"{target.address}: `cargo_lock` {lock!r} must be a path to a Cargo.lock inside the tree")
    return lock


def _kept_build_dir(target: RocmWheelTarget) -> str:
    if not target[WheelKeepBuildDirField].value:
        return ""
    path = posixpath.normpath(target[WheelBuildDirField].value or "")
    if path in (".", "") or path.startswith(("/", "..")):
        raise RocmBuildError(
            f"{target.address}: `{WheelBuildDirField.alias}` {target[WheelBuildDirField].value!r} must be a directory "
            f"inside the tree (e.g. \"build\"); or set `{WheelKeepBuildDirField.alias}=False`"
        )
    return path


def check_same_python(owner: str, python: str, deps: Sequence[Tuple[str, str]]) -> None:
    """A wheel built against a dependency wheel of another Python could not be installed
    beside it (cp tags, ABI): every rocm_wheel dependency must build with the same Python."""
    mine = parse_constraint(python, owner)
    for dep, theirs in deps:
        if parse_constraint(theirs, dep) != mine:
            raise RocmBuildError(
                f"{owner} builds with `python` = {python!r}, but its dependency {dep} builds with "
                f"{theirs!r}: it has no variant for {python!r}. Give {dep} that Python (or "
                f"`python=parametrize(...)` with it), or depend on its variant for {python!r}."
            )


def lock_request(spec: WheelBuildSpec, upstream: ResolvedUpstream, python: BuildPython) -> LockedRequirementsRequest:
    """The check of the spec's lock against its fetched tree and interpreter."""
    return LockedRequirementsRequest(
        spec.owner, spec.lock_path or "", upstream.pin_name, upstream.pin.commit, spec.requirements, upstream.source, python
    )


def default_lock(owner: str, pin: str, python: str) -> str:
    minor = parse_constraint(python, owner).minor
    if not minor:
        raise RocmBuildError(
            f"{owner}: give `{WheelLockField.alias}` explicitly: locks are per Python minor version, "
            f"and `python` = {python!r} allows more than one."
        )
    return f"3rdparty/build/py{minor}/{pin}.lock"


# Names made from a rocm_wheel target's address: its directory in dist/ (`package` writes it,
# `rocm-plan` reads it) and its build log's (in the log cache).
def dist_dir(address: Address) -> str:
    """`tests.mini.vllm` for tests/mini/vllm:wheel, `components.vllm.wheel-on-therock` for
    another target there, `tests.mini.vllm@python=3.12` for a parametrized variant."""
    directory = address.spec_path.replace("/", ".") or "root"
    if address.target_name != "wheel":
        directory += f".{address.target_name}"
    params = ",".join(f"{k}={v}" for k, v in sorted(address.parameters.items()))
    return f"{directory}@{params}" if params else directory


def log_name(address: Address) -> str:
    return address.spec.replace("/", ".").replace(":", "@").lstrip(".")


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(), *declared.rules(), *prebuilt_rules.rules(), *upstream_repo.rules(),
        *sources.rules(), *source_kind.rules(),  # the kinds a dependency is read by
    ])
