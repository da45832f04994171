"""A build spec with its resolved inputs, made into the `Process` that runs it: the second of
a build's two steps (build_spec.py is the first).

`WheelBuildRequest` is the spec plus its resolved inputs (tree, lock and wheelhouse,
archives, dependency wheels, toolchain identity, interpreter). It holds no Target and no
machine path; `describe_wheel_build_process` turns it into the exact `Process` that runs,
and the plan asks for the same `Process`, so the plan and the build cannot disagree.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

from pants.engine.addresses import Address
from pants.engine.fs import CreateDigest, Digest, FileContent, MergeDigests
from pants.engine.process import Process
from pants.engine.rules import Get, collect_rules, rule
from pants.util.frozendict import FrozenDict
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.locks.build_requirements import LOCK_IN_SANDBOX, WHEELHOUSE_DIR
from rocm_build.toolchain.container import BuildImage
from rocm_build.toolchain.interpreters import PYTHON_LINK, BuildPython
from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_bytes
from rocm_build.subsystems.build_isolation import BuildIsolationSubsystem
from rocm_build.subsystems.compiler_cache import CompilerCacheSubsystem
from rocm_build.subsystems.rocm_build import RocmBuildSubsystem
from rocm_build.errors import RocmBuildError
from rocm_build.subsystems.sccache import Sccache, SccacheBinary
from rocm_build.caches.sccache_dist import FARM_CACHE, FARM_DIR, TOOLCHAIN_DIR, DistToolchain, DistToolchainRequest, SccacheFarm
from rocm_build.toolchain.rocm_sdk import SANDBOX_ROOT, ResolvedToolchain
from rocm_build.wheel.build_spec import WheelBuildSpec, log_name
from rocm_build.wheel.rebuild import PAYLOAD, VERSION_KEY
from rocm_build.caches.ccache import CCACHE_REMOTE_CACHE, CCACHE_REMOTE_DIR
from rocm_build.subsystems.host_tools import REMOTE_CACHE_FIRST_MILLIS, HostTools, cache_suffix
from rocm_build.caches import sccache_dist
from rocm_build.subsystems import host_tools
from rocm_build.subsystems import sccache as sccache_subsystem

LOG_CACHE = "rocm_build_logs"
LOG_CACHE_DIR = ".logs"
CCACHE_DIR = ".ccache"
SCCACHE_DIR = ".sccache"
SCCACHE_BIN_DIR = ".sccache-bin"  # the pinned binary (subsystems/sccache.py), an immutable input
SOURCE_PACK = ".source-pack"
# Checkouts of fetched packs, one per source (build_wheel.sh): a build's lower tree layer.
SOURCE_TREES_CACHE = "rocm_source_trees"
SOURCE_TREES_DIR = ".source-trees"
# Build venvs, one per Python + bootstrap and dependency wheels + lock (build_wheel.sh).
VENV_CACHE = "rocm_build_venvs"
VENV_CACHE_DIR = ".build-venvs"
# Kept build directories, one per component and everything in its key but the tree (kept_build_dir.py).
KEPT_DIRS_CACHE = "rocm_build_dirs"
KEPT_DIRS_DIR = ".build-dirs"
# Deflated chunks of the component's last wheels, reused by the next (wheel_zip.py).
WHEEL_CHUNKS_DIR = ".wheel-chunks"
TREE_CHANGES = ".tree-changes"
ARCHIVES_DIR = ".archives"
CARGO_VENDOR_DIR = ".cargo-vendor"  # the crates, one directory each (rust/cargo.py)
CARGO_HOME_DIR = ".cargo-home"  # empty but for its config.toml, which points cargo at CARGO_VENDOR_DIR
SANDBOX = "$ROCM_BUILD_SANDBOX"


def local_version_label(toolchain: ResolvedToolchain, spec: WheelBuildSpec) -> str:
    """The local version label the build gives its wheel, e.g. `llvm19gfx1100.gfx1151`: the
    toolchain's label, then the gpu targets. The wheel that ships adds `version_key`'s."""
    return f"{toolchain.label}{'.'.join(spec.gpu_targets)}"


VERSION_KEY_HOW = (
    "the first 16 hex digits of the sha256 of the keys `covers` names of this file, `environment` "
    "without `repo_digests`, as JSON with sorted keys and no spaces "
    "(json.dumps(..., sort_keys=True, separators=(',', ':')))"
)
# 16 hex digits, 64 bits: a patch author controls text the key covers (a header), and 32 bits
# were found by brute force in hours on one core; the local version segment has no length limit.
VERSION_KEY_DIGITS = 16
# The scripts that write the shipped wheel's bytes after the build (build/build_output.py's
# add-info step): their digests are in the build info (`written_by`), so in the key.
FINISHING_SCRIPTS = ("wheel_files.py", "wheel_zip.py", "sbom.py")
WRITTEN_BY = "written_by"


def version_key(build_info: Mapping[str, Any]) -> Dict[str, Any]:
    """The last local segment of a shipped wheel's version (`1.0.0+llvm19gfx1151.k1a2b3c4d5e6f7a8b`):
    a digest of every input its build info records (pins, patch digests, recipe, toolchain
    identity, gpu targets, env, lock, archives, the dependency wheels by name and content), of
    the bytes they made (`payload_sha256`: the wheel before its build info) and of every step
    that writes the shipped wheel's bytes after that (the GPU code and platform tag read from
    it, the scripts that add the build info: `written_by`), so that nothing gives two different
    wheels one version. Another patch, another version, so `pip install` of the install set in
    a venv holding the last build installs this one. Left out: what this machine's container
    engine knows of where the image came from (`repo_digests`: the image is its id). Added after
    the build (wheel_files.py add-info): dependents build against the wheel without it, so a
    dependency whose build comes out the same does not rebuild them (early cutoff)."""
    covers = sorted(k for k in build_info if k != VERSION_KEY)
    made_of = {k: build_info[k] for k in covers}
    if isinstance(made_of.get("environment"), dict):
        made_of["environment"] = {k: v for k, v in made_of["environment"].items() if k != "repo_digests"}
    digest = hashlib.sha256(json.dumps(made_of, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:VERSION_KEY_DIGITS]
    return {"label": f"k{digest}", "digest": digest, "covers": covers, "how": VERSION_KEY_HOW}


def with_version_key(build_info: str, payload_sha256: str, platform: Mapping[str, Any]) -> str:
    """A built wheel's build info with the bytes the build wrote, what the steps after it write
    (its platform, as add-info records it; the scripts that write it) and the version key of all."""
    info: Dict[str, Any] = json.loads(build_info)
    info[PAYLOAD] = payload_sha256
    info["platform"] = dict(platform)
    info[WRITTEN_BY] = {name: hashlib.sha256(script_bytes(name)).hexdigest() for name in FINISHING_SCRIPTS}
    info[VERSION_KEY] = version_key(info)
    return json.dumps(info, indent=2, sort_keys=True)


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
    rust: str = ""  # a Rust build's (`cargo_lock`): the Rust toolchain's identity (toolchain/rust.py)
    # The name of the component's kept build directory (`keep_build_dir`): made of everything
    # above but the tree (build.py); "" when it is not kept.
    kept_key: str = ""


@dataclass(frozen=True)
class PreflightWheelRequest:
    """The build request of a wheel whose rocm_wheel dependencies are not built yet: the
    preflight's (upstream_steps.py). Its venv has only the prebuilt dependency wheels."""

    address: Address


@dataclass(frozen=True)
class PreflightBuild:
    request: WheelBuildRequest  # made by prepare/inputs.py, as for the build


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
        **({"CARGO_HOME": f"{SANDBOX}/{CARGO_HOME_DIR}"} if request.spec.rust else {}),
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
        **({"CARGO_NET_OFFLINE": "true", "ROCM_BUILD_RUST": request.rust} if spec.rust else {}),
    }


def container_env(request: WheelBuildRequest, env: Dict[str, str], cache_dirs: Tuple[str, ...]) -> Dict[str, str]:
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
        "ROCM_BUILD_CONTAINER_CACHES": " ".join(cache_dirs),
    }


def component_cache_name(kind: str, owner: str, gpu_targets: Tuple[str, ...]) -> str:
    """A named cache of one component and arch set: its compiler cache, its wheel's chunks."""
    return f"rocm_{kind}_" + cache_suffix(f"{owner} {' '.join(gpu_targets)}")


@dataclass(frozen=True)
class LauncherRequest:
    launcher: str  # [compiler-cache] launcher
    owner: str
    gpu_targets: Tuple[str, ...]
    toolchain: Optional[ResolvedToolchain] = None  # on this machine (not in a build image): a farm may compile


@dataclass(frozen=True)
class Launcher:
    env: FrozenDict[str, str]
    caches: FrozenDict[str, str]  # its store: shared by rebuilds, never in a key
    inputs: FrozenDict[str, Digest]  # immutable inputs: the pinned sccache binary, the toolchain archive


@rule(desc="Setting up the compiler launcher")
async def set_up_launcher(request: LauncherRequest, farm: Sccache) -> Launcher:
    if request.launcher == "ccache":
        if farm.dist_scheduler_url:
            raise RocmBuildError(
                "[sccache] dist_scheduler_url is set, but [compiler-cache] launcher is ccache, which "
                "compiles everything here. Set launcher = \"sccache\" to use the farm, or unset the URL."
            )
        cache = component_cache_name("ccache", request.owner, request.gpu_targets)
        return Launcher(FrozenDict(), FrozenDict({cache: CCACHE_DIR}), FrozenDict())
    sccache = await Get(SccacheBinary)
    env = {"ROCM_BUILD_LAUNCHER": "sccache", "ROCM_BUILD_SCCACHE": f"{SCCACHE_BIN_DIR}/{sccache.exe}"}
    caches = {component_cache_name("sccache", request.owner, request.gpu_targets): SCCACHE_DIR}
    inputs = {SCCACHE_BIN_DIR: sccache.digest}
    if request.toolchain:
        # Farm or not, the same inputs: the archive a farm's servers would compile with, and
        # the named cache where the farm's settings are, if there is a farm (sccache_dist.py).
        await Get(SccacheFarm)  # says once per run whether the farm can be used
        toolchain = await Get(DistToolchain, DistToolchainRequest(request.toolchain))
        env["ROCM_BUILD_SCCACHE_TOOLCHAIN"] = f"{TOOLCHAIN_DIR}/toolchain.json"
        caches[FARM_CACHE] = FARM_DIR
        inputs[TOOLCHAIN_DIR] = toolchain.digest
    return Launcher(FrozenDict(env), FrozenDict(caches), FrozenDict(inputs))


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
async def describe_wheel_build_process(
    request: WheelBuildRequest,
    tools: HostTools,
    settings: RocmBuildSubsystem,  # the deprecated keys the other two read with theirs
    isolation: BuildIsolationSubsystem,
    compilers: CompilerCacheSubsystem,
) -> Process:
    spec = request.spec
    on_host = None if request.image else request.toolchain
    launcher = await Get(Launcher, LauncherRequest(compilers.launcher_name(settings), spec.owner, spec.gpu_targets, on_host))
    scripts = await Get(
        Digest,
        CreateDigest(
            [
                FileContent(f"{SCRIPTS_DIR}/build_wheel.sh", script_bytes("build_wheel.sh")),
                *([FileContent(f"{SCRIPTS_DIR}/in_container.sh", script_bytes("in_container.sh"))] if request.image else []),
                FileContent(f"{SCRIPTS_DIR}/machine_caches.sh", script_bytes("machine_caches.sh")),
                *[FileContent(f"{SCRIPTS_DIR}/{n}", script_bytes(n)) for n in ("wheel_files.py", "wheel_zip.py")],
                FileContent(f"{SCRIPTS_DIR}/ccache_remote.py", script_bytes("ccache_remote.py")),
                *[FileContent(f"{SCRIPTS_DIR}/{n}", script_bytes(n)) for n in ("dist_relay.py", "dist_proxy.py") if FARM_CACHE in launcher.caches],
                *([FileContent(f"{SCRIPTS_DIR}/source_pack.py", script_bytes("source_pack.py"))] if request.source_pack or request.kept_key else []),
                *([FileContent(f"{SCRIPTS_DIR}/kept_build_dir.py", script_bytes("kept_build_dir.py"))] if request.kept_key else []),
                FileContent(f"{SCRIPTS_DIR}/steps.sh", steps_script(spec).encode()),
            ]
        ),
    )
    caches = {
        LOG_CACHE: LOG_CACHE_DIR,
        **launcher.caches,
        # Where ccache's remote storage is configured, if it is (see ccache_remote.py).
        CCACHE_REMOTE_CACHE: CCACHE_REMOTE_DIR,
        component_cache_name("wheel_chunks", spec.owner, spec.gpu_targets): WHEEL_CHUNKS_DIR,
    }
    argv: Tuple[str, ...] = (tools.bash.path, f"{SCRIPTS_DIR}/build_wheel.sh")
    env = {**process_env(request), **launcher.env}
    if request.source_pack and not request.image:
        # Its checkout, made by the build with the host's git, is named by the pack's commits
        # and that git's version: machines with another git share wheels, not checkouts.
        # (A container's tree is checked out into its sandbox: in_container.sh.)
        caches[SOURCE_TREES_CACHE] = SOURCE_TREES_DIR
    if request.kept_key:
        # Objects of another launcher are the same bytes, but its settings are in CMake's cache.
        key = hashlib.sha256(f"{request.kept_key} {compilers.launcher_name(settings)}".encode()).hexdigest()[:32]
        env.update(ROCM_BUILD_KEPT_DIR=spec.kept_build_dir, ROCM_BUILD_KEPT_KEY=key)
        # Taken and mounted by build_wheel.sh in its namespace, or for a container by
        # in_container.sh, which mounts only the entry.
        caches[KEPT_DIRS_CACHE] = KEPT_DIRS_DIR
    if request.image:
        # The image id, not its name, in argv: the key holds what the build runs in.
        argv = (tools.bash.path, f"{SCRIPTS_DIR}/in_container.sh", request.image.engine, request.image.image_id, "bash", *argv[1:])
        env = container_env(request, env, (LOG_CACHE_DIR, WHEEL_CHUNKS_DIR, *launcher.caches.values()))
    else:
        caches = {request.toolchain.cache_name: ".rocm", request.python.cache_name: PYTHON_LINK, VENV_CACHE: VENV_CACHE_DIR, **caches}
        env = {**env, **self_link_env(request, isolation.worker_roots(settings))}
    return Process(
        argv=argv,
        env=env,
        input_digest=await Get(Digest, MergeDigests([request.inputs, scripts])),
        immutable_input_digests={**({SOURCE_PACK: request.source_pack} if request.source_pack else {}), **launcher.inputs},
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


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *sccache_dist.rules(), *host_tools.rules(), *sccache_subsystem.rules()])
