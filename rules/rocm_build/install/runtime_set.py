"""What an install set needs at run time beside the chain's wheels.

- `env.sh`: `export VAR=value` for the union of the chain's `runtime_env` (flash-attention's
  `FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE`). Two components that set one variable to different
  values stop `package` before any build, naming both targets: a sourced file can hold one.
- Run-time requirements: each component's locked `runtime_requirements` (runtime_lock.py),
  downloaded into the install set's `wheels/` and pinned by sha256 in its requirements.txt; a
  module that TheRock's SDK ships instead of an index (sdk_modules.py: amdsmi) becomes an
  install step from the SDK in requirements.txt's header, as prebuilt wheels' index step is.

None of it is in a build's key: changing a run-time field rebuilds nothing.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from pants.engine.addresses import Address
from pants.engine.fs import Digest, MergeDigests
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import Target, WrappedTarget, WrappedTargetRequest
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.wheel.build_spec import ENV_NAME, WheelBuildSpec, WheelRequest
from rocm_build.wheel.chain_order import WheelChain, WheelChainRequest
from rocm_build.errors import RocmBuildError
from rocm_build.locks.lockfile import LockedDist
from rocm_build.install.runtime_lock import (
    ChainRuntimeRequirements,
    ChainRuntimeRequirementsRequest,
    CheckedRuntimeLock,
    RuntimeLockCheck,
)
from rocm_build.install.sdk_modules import SDK_MODULES, project_name, sdk_requirements
from rocm_build.wheel.target_types import WheelRuntimeEnvField, WheelRuntimeRequirementsField
from rocm_build.toolchain.target_types import ToolchainIndexUrlField, ToolchainProviderField, ToolchainVersionField
from rocm_build.wheel.target_types import RocmWheelTarget
from rocm_build.install import runtime_lock
from rocm_build.wheel import build_spec

ENV_SCRIPT = "env.sh"
# Header lines a script can find: the commands that install the SDK's modules.
SDK_STEP = "# then, from the SDK: "
SDK_FIRST = "# before the wheels, the ROCm SDK the chain was built with, with the GPU code of each gpu target: "
SITE_PACKAGES = "$(python -c 'import sysconfig; print(sysconfig.get_paths()[\"platlib\"])')"


@dataclass(frozen=True)
class RuntimeSetRequest:
    owner: str  # the target packaged, for messages
    addresses: Tuple[Address, ...]  # its chain; targets that are not rocm_wheels have no run-time fields


@dataclass(frozen=True)
class RuntimeSet:
    env: Tuple[Tuple[str, str, str], ...]  # (variable, value, the target that sets it), by variable
    dists: Tuple[LockedDist, ...]  # every locked run-time requirement of the chain, by name
    # (module, the target that needs it, how the SDK gets into the venv: its toolchain's
    # TheRock index and version, or "" when the toolchain is not TheRock's)
    sdk: Tuple[Tuple[str, str, str], ...]
    wheels: Digest  # the locked wheels, at the digest root
    # How the SDK the chain was built with, with the device wheel of each gpu target, gets
    # into the venv (TheRock's toolchain), or "".
    sdk_install: str = ""
    # (index, version) of that SDK, or (): what the set's SBOM says the box must provide.
    sdk_release: Tuple[str, ...] = ()


def merged_env(owner: str, envs: Sequence[Tuple[str, Mapping[str, str]]]) -> Tuple[Tuple[str, str, str], ...]:
    """The union of (target, runtime_env) pairs; a variable set two ways is refused."""
    seen: Dict[str, Tuple[str, str]] = {}
    for target, env in envs:
        for var, value in sorted(env.items()):
            if not ENV_NAME.match(var):
                raise RocmBuildError(f"{target}: `{WheelRuntimeEnvField.alias}` key {var!r} is not an environment variable name")
            if var in seen and seen[var][0] != value:
                first_value, first = seen[var]
                raise RocmBuildError(
                    f"{owner}: its chain sets the run-time variable {var} two ways: {first} has "
                    f"`{WheelRuntimeEnvField.alias}` {var}={first_value!r}, {target} has {var}={value!r}. "
                    f"The install set's {ENV_SCRIPT} holds one value: make the two targets agree."
                )
            seen.setdefault(var, (value, target))
    return tuple((var, value, target) for var, (value, target) in sorted(seen.items()))


def locks_to_use(chains: Sequence[ChainRuntimeRequirements]) -> List[Tuple[Address, Tuple[str, ...]]]:
    """(target, the requirements its lock holds) of each lock an install set takes: those of
    targets with run-time requirements of their own, but not one that a lock above it already
    covers (a lock holds its whole chain's: vLLM's covers torch's)."""
    with_lock = [c for c in chains if c.own]
    covered = {member for c in with_lock for member in c.members[:-1]}
    return [(c.members[-1], c.chain) for c in with_lock if c.members[-1] not in covered]


def merged_dists(owner: str, locks: Sequence[Tuple[str, str, Sequence[LockedDist]]]) -> Tuple[LockedDist, ...]:
    """The distributions of (target, lock path, dists) locks; one project at two versions is refused."""
    seen: Dict[str, Tuple[LockedDist, str, str]] = {}
    for target, path, dists in locks:
        for dist in dists:
            key = project_name(dist.name)
            if key in seen and (seen[key][0].version, seen[key][0].sha256) != (dist.version, dist.sha256):
                other, other_target, other_path = seen[key]
                raise RocmBuildError(
                    f"{owner}: its chain needs {dist.name} at run time in two versions: {other_target} "
                    f"locks {other.name}=={other.version} ({other_path}), {target} locks "
                    f"{dist.name}=={dist.version} ({path}). One venv holds one: align their "
                    f"`{WheelRuntimeRequirementsField.alias}` and regenerate the locks."
                )
            seen.setdefault(key, (dist, target, path))
    return tuple(d for d, _, _ in sorted(seen.values(), key=lambda s: project_name(s[0].name)))


def env_script(env: Sequence[Tuple[str, str, str]]) -> str:
    lines = [
        "# The run-time environment of this install set: the `runtime_env` of its rocm_wheel targets.",
        "# Source it before running Python from the venv: . ./env.sh",
        *(f"export {var}={shlex.quote(value)}  # {target}" for var, value, target in env),
    ]
    return "\n".join(lines) + "\n"


def header_lines(runtime: RuntimeSet, install: Sequence[str] = ()) -> List[str]:
    """requirements.txt's steps around its install command (`install`, the lines that give it):
    the SDK the chain was built with before it (TheRock's, from its index), the SDK's modules
    and env.sh after it."""
    lines = [f"{SDK_FIRST}{runtime.sdk_install}"] if runtime.sdk_install else []
    lines += install
    for module, target, sdk_install in runtime.sdk:
        sdk = SDK_MODULES[module]
        where = f"With the SDK in this venv ({sdk_install}), install it:" if sdk_install else "Install it from the SDK in this venv:"
        lines += [
            f"# {module}, a run-time requirement of {target}, is on no index: TheRock's {sdk.wheel} ships it "
            f"as a source tree ({sdk.source}). {where}",
            f'{SDK_STEP}python -m pip install "{SITE_PACKAGES}/{sdk.tree}"',
        ]
    variables = ", ".join(var for var, _, _ in runtime.env) or "none"
    return [*lines, f"# then, before running Python: . ./{ENV_SCRIPT}  (the run-time environment: {variables})"]


def therock_sdk(spec: WheelBuildSpec, toolchain: Target) -> Optional[Tuple[str, str, Tuple[str, ...]]]:
    """(index, version, gpu targets) of a rocm_wheel built with TheRock's SDK, else None."""
    if toolchain.get(ToolchainProviderField).value != "therock":
        return None
    return toolchain.get(ToolchainIndexUrlField).value, toolchain.get(ToolchainVersionField).value, spec.gpu_targets


def sdk_install_command(owner: str, sdks: Sequence[Tuple[str, Tuple[str, str, Tuple[str, ...]]]]) -> str:
    """How the SDK the chain was built with gets into a venv ("" when no wheel used TheRock's):
    `rocm[libraries]` (rocm-sdk-core: the libraries every wheel links through RUNPATH; TheRock's
    torch requires it too) with the device wheel of every gpu target of the chain, without
    which each kernel fails with hipErrorInvalidImage. One SDK a chain: its wheels link one."""
    releases = {(index, version) for _, (index, version, _) in sdks}
    if len(releases) > 1:
        named = "; ".join(f"{target}: {version} from {index}" for target, (index, version, _) in sdks)
        raise RocmBuildError(
            f"{owner}: its chain is built with {len(releases)} releases of TheRock's SDK ({named}). An install set "
            f"holds one SDK: make their `toolchain`s name one index and version."
        )
    if not releases:
        return ""
    ((index, version),) = releases
    extras = ["libraries", *(f"device-{t}" for t in sorted({t for _, (_, _, targets) in sdks for t in targets}))]
    return f"pip install --index-url {index} {shlex.quote(f'rocm[{chr(44).join(extras)}]=={version}')}"


@rule(desc="Collecting the run-time environment and requirements of a rocm_wheel chain")
async def runtime_set(request: RuntimeSetRequest) -> RuntimeSet:
    wrapped = await MultiGet(
        Get(WrappedTarget, WrappedTargetRequest(a, f"the chain of {request.owner}")) for a in request.addresses
    )
    wheels = [w.target for w in wrapped if isinstance(w.target, RocmWheelTarget)]
    env = merged_env(request.owner, [(t.address.spec, t[WheelRuntimeEnvField].value or {}) for t in wheels])
    specs = await MultiGet(Get(WheelBuildSpec, WheelRequest(t.address)) for t in wheels)
    toolchains = await MultiGet(
        Get(WrappedTarget, WrappedTargetRequest(s.toolchain, f"the `toolchain` field of {s.owner}")) for s in specs
    )
    sdks = [therock_sdk(spec, toolchain.target) for spec, toolchain in zip(specs, toolchains)]
    sdk_install = sdk_install_command(request.owner, [(t.address.spec, sdk) for t, sdk in zip(wheels, sdks) if sdk])
    sdk: List[Tuple[str, str, str]] = []
    for target in wheels:
        owner = target.address.spec
        modules = sdk_requirements(owner, target[WheelRuntimeRequirementsField].value or ())
        sdk += [(module, owner, sdk_install) for module in modules]
    chains = await MultiGet(
        Get(ChainRuntimeRequirements, ChainRuntimeRequirementsRequest(t.address)) for t in wheels
    )
    checks = [RuntimeLockCheck(address, requirements) for address, requirements in locks_to_use(chains)]
    locks = await MultiGet(Get(CheckedRuntimeLock, RuntimeLockCheck, c) for c in checks)
    dists = merged_dists(request.owner, [(lock.owner, lock.path, lock.lock.dists) for lock in locks])
    wheel_files = await Get(Digest, MergeDigests(lock.wheels for lock in locks))
    releases = sorted({(index, version) for index, version, _ in (s for s in sdks if s)})
    return RuntimeSet(env, dists, tuple(dict.fromkeys(sdk)), wheel_files, sdk_install, releases[0] if releases else ())


async def check_runtime_set(root: Address) -> None:
    """The chain's run-time fields and locks, checked before any build of it starts."""
    chain = await Get(WheelChain, WheelChainRequest(root))
    await Get(RuntimeSet, RuntimeSetRequest(root.spec, chain.addresses))


def with_runtime_lines(runtime: RuntimeSet, lines: List[str], install: Sequence[str] = ()) -> List[str]:
    """An install set's requirements lines with the run-time ones added: the header's steps
    (with the install command `install` among them: header_lines) after its comment lines, the
    locked requirements at the end."""
    header = 0
    while header < len(lines) and lines[header].startswith("#"):
        header += 1
    locked = [f"{d.name}=={d.version} --hash=sha256:{d.sha256}" for d in runtime.dists]
    return [*lines[:header], *header_lines(runtime, install), *lines[header:], *locked]


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *runtime_lock.rules(), *build_spec.rules()])
