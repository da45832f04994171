"""One description of a rocm_wheel build, in two steps (as Pants' adhoc_tool does):

- `WheelBuildSpec`: what the target asks for, with every field validated and every address
  resolved, but nothing fetched, built or run. `rocm-plan` prints it.
- `WheelBuildRequest`: the spec plus its resolved inputs (tree, lock and wheelhouse,
  archives, dependency wheels, toolchain identity, interpreter). It holds no Target and no
  machine path; `wheel_build_process` turns it into the exact `Process` that runs, and the
  plan asks for the same `Process`, so the plan and the build cannot disagree.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

from pants.core.util_rules.environments import EnvironmentField
from pants.engine.addresses import Address, Addresses, UnparsedAddressInputs
from pants.engine.fs import CreateDigest, Digest, FileContent, MergeDigests
from pants.engine.process import Process
from pants.engine.rules import Get, collect_rules, rule
from pants.engine.target import DependenciesRequest, Targets
from pants.util.frozendict import FrozenDict
from pants.util.logging import LogLevel

from rocm_build.wheel.build_requirements import LOCK_IN_SANDBOX, WHEELHOUSE_DIR, LockedRequirementsRequest
from rocm_build.toolchain.container import BuildImage
from rocm_build.errors import RocmBuildError
from rocm_build.toolchain.interpreters import PYTHON_LINK, BuildPython, parse_constraint
from rocm_build.wheel.lockfile import LockError, requirement_lines
from rocm_build.upstream.prebuilt import PrebuiltClosure, PrebuiltClosureRequest
from rocm_build.wheel.env import build_env, check_gpu_targets
from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_bytes
from rocm_build.subsystems.rocm_build import RocmBuildSubsystem
from rocm_build.target_types import (
    AllowMissingGpuTargetsField,
    GpuTargetsField,
    PrebuiltWheelTarget,
    RocmWheelTarget,
    SupportedGpuTargetsField,
    SupportedGpuTargetsSourceField,
    WheelArchivesField,
    WheelBuildCommandField,
    WheelBuildRequirementsField,
    WheelCommandField,
    WheelDependenciesField,
    WheelEnvField,
    WheelKindField,
    WheelLockField,
    WheelMaxJobsField,
    WheelOptionalField,
    WheelPythonField,
    WheelSourceField,
    WheelTimeoutField,
    WheelToolchainField,
    WheelDownloadsCoveredField,
    WheelVersionEnvField,
)
from rocm_build.target_types_rules import expect_target
from rocm_build.toolchain.rocm_sdk import SANDBOX_ROOT, ResolvedToolchain
from rocm_build.wheel.ccache import CCACHE_REMOTE_CACHE, CCACHE_REMOTE_DIR
from rocm_build.subsystems.host_tools import REMOTE_CACHE_FIRST_MILLIS, HostTools, cache_suffix
from rocm_build.upstream.upstream_repo import ResolvedUpstream, UpstreamRequest, UpstreamSpec
from rocm_build.wheel.version_env import pin_version, version_values

LOG_CACHE = "rocm_build_logs"
LOG_CACHE_DIR = ".logs"
CCACHE_DIR = ".ccache"
SOURCE_PACK = ".source-pack"
# Checkouts of fetched packs, one per source (build_wheel.sh): a build's lower tree layer.
SOURCE_TREES_CACHE = "rocm_source_trees"
SOURCE_TREES_DIR = ".source-trees"
# Build venvs, one per Python + bootstrap and dependency wheels + lock (build_wheel.sh).
VENV_CACHE = "rocm_build_venvs"
VENV_CACHE_DIR = ".build-venvs"
TREE_CHANGES = ".tree-changes"
ARCHIVES_DIR = ".archives"
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SANDBOX = "$ROCM_BUILD_SANDBOX"
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
    kind: str = "generic"  # which component: torch, triton, vllm, ... (rocm_env.py)

    @property
    def owner(self) -> str:
        return self.address.spec

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


@dataclass(frozen=True)
class WheelBuildRequest:
    """Everything that goes into a build's cache key, and nothing else."""

    spec: WheelBuildSpec
    toolchain: ResolvedToolchain
    python: BuildPython
    network_isolation: bool
    image: Optional[BuildImage]  # the build runs in a container of it; None: on this machine
    label: str  # the wheel's local version label
    source_date_epoch: int  # the pinned commit's time
    # tree/, deps/ (dependency wheels without their build info), bootstrap/, wheelhouse/ +
    # lock, .archives/<VAR>/. Build info is not an input: it is added to the wheel after the
    # build, so a rebuild whose output is unchanged changes nothing downstream.
    inputs: Digest
    # Set: the tree comes as layers, this fetched pack (an immutable input at SOURCE_PACK,
    # checked out once per machine into the SOURCE_TREES cache) and the patched files in
    # `inputs` under TREE_CHANGES/; the build stacks them into tree/.
    source_pack: Optional[Digest] = None
    # What the build venv is made of (the Python, the bootstrap and dependency wheels and the
    # lock, by digest): the name of the machine's copy of it, which builds reuse.
    venv_key: str = ""


@dataclass(frozen=True)
class PreflightWheelRequest:
    """The build request of a wheel whose rocm_wheel dependencies are not built yet: the
    preflight's (upstream_steps.py). Its venv has only the prebuilt dependency wheels."""

    address: Address


@dataclass(frozen=True)
class PreflightBuild:
    request: WheelBuildRequest  # made by wheel.py, as for the build


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


@rule(desc="Reading a rocm_wheel target")
async def wheel_build_spec(request: WheelRequest, defaults: RocmBuildSubsystem) -> WheelBuildSpec:
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
    archives = dict(target[WheelArchivesField].value or {})
    for var in archives:
        if not ENV_NAME.match(var):
            raise RocmBuildError(f"{owner}: `archives` key {var!r} is not an environment variable name")
    archive_addresses = await Get(
        Addresses,
        UnparsedAddressInputs(
            list(archives.values()), owning_address=target.address,
            description_of_origin=f"the `archives` field of {owner}",
        ),
    )  # fmt: skip
    source = await _single(target, WheelSourceField)
    upstream = await Get(UpstreamSpec, UpstreamRequest(source, f"the `source` field of {owner}"))
    version_env = tuple(target[WheelVersionEnvField].value or ())
    covered = dict(target[WheelDownloadsCoveredField].value or {})
    for var in (*version_env, *(v for v in covered.values() if not v.startswith(NOT_RUN))):
        if not ENV_NAME.match(var):
            raise RocmBuildError(f"{owner}: {var!r} in `{WheelVersionEnvField.alias}` or `{WheelDownloadsCoveredField.alias}` is not an environment variable name")
    version = pin_version(upstream.pin.version, upstream.pin.track, upstream.pin.commit)
    env = {**version_values(version_env, version), **env}  # the target's `env` wins
    deps = await Get(Targets, DependenciesRequest(target[WheelDependenciesField]))
    wheel_deps = [t for t in deps if isinstance(t, RocmWheelTarget)]
    # Prebuilt wheels with what they depend on (a device wheel's host and family: prebuilt.py).
    prebuilt_roots = tuple(t.address for t in deps if isinstance(t, PrebuiltWheelTarget))
    closure = await Get(PrebuiltClosure, PrebuiltClosureRequest(prebuilt_roots, f"the `dependencies` field of {owner}"))
    prebuilt = tuple(s.address for s in closure.specs)
    check_same_python(owner, python, [(t.address.spec, t[WheelPythonField].value or defaults.python) for t in wheel_deps])
    return WheelBuildSpec(
        address=target.address,
        upstream=upstream,
        toolchain=await _single(target, WheelToolchainField),
        dependencies=tuple(t.address for t in wheel_deps),
        prebuilt=prebuilt,
        archives=tuple(zip(archives, archive_addresses)),
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
    )


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


def sandbox_env(request: WheelBuildRequest) -> Dict[str, str]:
    """Paths inside the sandbox, as `$ROCM_BUILD_SANDBOX/...`: expanded at run time, so the
    sandbox's location never enters the key."""
    toolchain = request.toolchain
    return {
        "ROCM_PATH": f"{SANDBOX}/{SANDBOX_ROOT}",
        "ROCM_HOME": f"{SANDBOX}/{SANDBOX_ROOT}",
        "HIP_DEVICE_LIB_PATH": f"{SANDBOX}/{toolchain.device_lib_dir}",
        "HIPFLAGS": f"--rocm-device-lib-path={SANDBOX}/{toolchain.device_lib_dir}",
        "ROCM_BUILD_CLANG": f"{SANDBOX}/{toolchain.clang}",
        "ROCM_BUILD_DEPS_PREFIX": f"{SANDBOX}/.venv",
        "PATH": f"{SANDBOX}/.venv/bin:{SANDBOX}/{SANDBOX_ROOT}/bin:/usr/bin:/bin",
        "HOME": f"{SANDBOX}/.home",
        "XDG_CACHE_HOME": f"{SANDBOX}/.home/cache",
        **{var: f"{SANDBOX}/{ARCHIVES_DIR}/{var}" for var, _ in request.spec.archives},
    }


def process_env(request: WheelBuildRequest) -> Dict[str, str]:
    spec = request.spec
    sandbox = sandbox_env(request)
    env = {**sandbox, **spec.env}  # the target's `env` wins
    # Sandbox paths first: the target's values may refer to them ($ROCM_PATH, ...).
    expand = [k for k in sandbox if "$" in env[k]] + sorted(k for k in spec.env if "$" in spec.env[k])
    return {
        **env,
        "PIP_CONFIG_FILE": "/dev/null",
        "ROCM_BUILD_TARGET": spec.owner,
        "ROCM_BUILD_LABEL": request.label,
        "ROCM_BUILD_LOG_NAME": log_name(spec.address),
        "ROCM_BUILD_PYTHON": request.python.in_sandbox,
        "ROCM_BUILD_PYTHON_VERSION": request.python.identity,
        "ROCM_BUILD_TOOLCHAIN_IDENTITY": request.toolchain.identity,
        "ROCM_BUILD_WHEEL_COMMAND": spec.wheel_command,
        "ROCM_BUILD_LOCK": LOCK_IN_SANDBOX if spec.lock_path else "",
        "ROCM_BUILD_WHEELHOUSE": WHEELHOUSE_DIR,
        "ROCM_BUILD_NETWORK": "none" if request.network_isolation else "host",
        "SOURCE_DATE_EPOCH": str(request.source_date_epoch),
        "ROCM_BUILD_VENV_KEY": request.venv_key,
        "ROCM_BUILD_EXPAND_VARS": " ".join(dict.fromkeys(expand)),
        **({"MAX_JOBS": str(spec.max_jobs)} if spec.max_jobs else {}),
    }


def container_env(request: WheelBuildRequest, env: Dict[str, str]) -> Dict[str, str]:
    """What in_container.sh needs: the image's toolchain and Python (paths inside the image:
    its content, not this machine's), and which variables and caches to pass in."""
    assert request.image
    inside = {
        **env,
        "ROCM_BUILD_IMAGE": request.image.image_id,
        "ROCM_BUILD_TOOLCHAIN_ROOT": request.toolchain.root_in_image,
        "ROCM_BUILD_PYTHON_PREFIX": request.python.prefix,
    }
    return {
        **inside,
        "ROCM_BUILD_CONTAINER_ENV": " ".join(sorted(inside)),
        "ROCM_BUILD_CONTAINER_CACHES": f"{LOG_CACHE_DIR} {CCACHE_DIR}",
    }


def ccache_name(owner: str, gpu_targets: Tuple[str, ...]) -> str:
    return "rocm_ccache_" + cache_suffix(f"{owner} {' '.join(gpu_targets)}")


def steps_script(spec: WheelBuildSpec) -> str:
    return "\n".join(["set -x", *spec.steps, "set +x", ""])


def self_link_env(request: WheelBuildRequest, search_path: Tuple[str, ...]) -> Dict[str, str]:
    """What a build needs to link its toolchain and Python itself where the links are missing
    (a remote-execution worker): what they must say they are, and where to look."""
    toolchain = request.toolchain
    return {
        "ROCM_BUILD_TOOLCHAIN_COMPILER": toolchain.clang[len(SANDBOX_ROOT) + 1 :],
        "ROCM_BUILD_TOOLCHAIN_COMPILER_VERSION": toolchain.compiler_version,
        "ROCM_BUILD_TOOLCHAIN_CANDIDATES": " ".join(dict.fromkeys((*toolchain.standard_roots(), *search_path))),
        "ROCM_BUILD_PYTHON_CANDIDATES": " ".join(search_path),
    }


@rule(desc="Describing a rocm_wheel build process")
async def wheel_build_process(request: WheelBuildRequest, tools: HostTools, settings: RocmBuildSubsystem) -> Process:
    spec = request.spec
    scripts = await Get(
        Digest,
        CreateDigest(
            [
                FileContent(f"{SCRIPTS_DIR}/build_wheel.sh", script_bytes("build_wheel.sh")),
                *([FileContent(f"{SCRIPTS_DIR}/in_container.sh", script_bytes("in_container.sh"))] if request.image else []),
                FileContent(f"{SCRIPTS_DIR}/machine_caches.sh", script_bytes("machine_caches.sh")),
                FileContent(f"{SCRIPTS_DIR}/wheel_files.py", script_bytes("wheel_files.py")),
                FileContent(f"{SCRIPTS_DIR}/ccache_remote.py", script_bytes("ccache_remote.py")),
                *([FileContent(f"{SCRIPTS_DIR}/source_pack.py", script_bytes("source_pack.py"))] if request.source_pack else []),
                FileContent(f"{SCRIPTS_DIR}/steps.sh", steps_script(spec).encode()),
            ]
        ),
    )
    caches = {
        LOG_CACHE: LOG_CACHE_DIR,
        # Compiler cache per component and arch: shared by rebuilds, never in a key.
        ccache_name(spec.owner, spec.gpu_targets): CCACHE_DIR,
        # Where ccache's remote storage is configured, if it is (see ccache_remote.py).
        CCACHE_REMOTE_CACHE: CCACHE_REMOTE_DIR,
    }
    argv: Tuple[str, ...] = (tools.bash.path, f"{SCRIPTS_DIR}/build_wheel.sh")
    env = process_env(request)
    if request.source_pack and not request.image:
        # Its checkout, made by the build with the host's git, is named by the pack's commits
        # and that git's version: machines with another git share wheels, not checkouts.
        # (A container's tree is checked out into its sandbox: in_container.sh.)
        caches[SOURCE_TREES_CACHE] = SOURCE_TREES_DIR
    if request.image:
        # The image id, not its name, in argv: the key holds what the build runs in.
        argv = (tools.bash.path, f"{SCRIPTS_DIR}/in_container.sh", request.image.engine, request.image.image_id, "bash", *argv[1:])
        env = container_env(request, env)
    else:
        caches = {request.toolchain.cache_name: ".rocm", request.python.cache_name: PYTHON_LINK, VENV_CACHE: VENV_CACHE_DIR, **caches}
        env = {**env, **self_link_env(request, tuple(settings.worker_search_path))}
    return Process(
        argv=argv,
        env=env,
        input_digest=await Get(Digest, MergeDigests([request.inputs, scripts])),
        immutable_input_digests={SOURCE_PACK: request.source_pack} if request.source_pack else None,
        output_directories=("out",),
        append_only_caches=caches,
        remote_cache_speculation_delay_millis=REMOTE_CACHE_FIRST_MILLIS,
        description=f"Building rocm_wheel {spec.owner}",
        level=LogLevel.INFO,
        timeout_seconds=spec.timeout,
    )


def describe_commands(spec: WheelBuildSpec, locked: int) -> Tuple[str, ...]:
    """The commands the build runs in the patched tree, for people (rocm-plan)."""
    install = (
        f"python -m pip install --no-index --no-deps --require-hashes --no-compile --find-links {WHEELHOUSE_DIR} "
        f"-r {spec.lock_path}  # {locked} locked distribution(s)"
    )
    return (*([install] if spec.lock_path else []), *spec.steps, spec.wheel_command)


def quote_env(env: Dict[str, str]) -> Tuple[str, ...]:
    return tuple(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))


def rules():
    return collect_rules()
