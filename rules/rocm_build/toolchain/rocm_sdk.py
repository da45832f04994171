"""rocm_toolchain: locate the ROCm SDK (or an LLVM-only clang) and say what it is.

A build sees the toolchain at `.rocm/root` in its sandbox: that path is a link, kept in a
Pants named cache, to wherever the toolchain lives on this machine. Named-cache contents
are not part of cache keys, so the key holds only the toolchain's identity (provider,
version, compiler `--version`) and machines with the SDK in different places share entries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Tuple

from pants.engine.addresses import Address
from pants.engine.process import (
    FallibleProcessResult,
    Process,
    ProcessCacheScope,
    ProcessResult,
)
from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.toolchain.container import BuildImage, probe_process
from rocm_build.errors import RocmBuildError, indent, tail
from rocm_build.sandbox_scripts import script_bytes
from rocm_build.toolchain.target_types import (
    RocmToolchainTarget,
    ToolchainIndexUrlField,
    ToolchainLabelField,
    ToolchainPathField,
    ToolchainProviderField,
    ToolchainVersionField,
)
from rocm_build.target_types_rules import TargetRequest, expect_target
from rocm_build.subsystems.host_tools import HostTools, cache_suffix, link_process
from rocm_build.subsystems import host_tools

# Where builds see the toolchain, relative to their sandbox.
SANDBOX_ROOT = ".rocm/root"


HOW_TO_PROVIDE = {
    "therock": "check `index_url` and `version` (the `rocm` package for your GPU family must exist "
    "there) and that the index is reachable",
    "path": "install ROCm there (e.g. /opt/rocm), or point `path` at your ROCm root, or use "
    "provider=\"therock\" to install the SDK from pip",
    "llvm": "install clang with the AMDGPU target (`apt-get install clang-19 lld-19 llvm-19`) or "
    "point `path` at an LLVM root that has bin/clang",
}


@dataclass(frozen=True)
class ToolchainRequest(TargetRequest):
    """A rocm_toolchain, located on this machine or in `image`."""

    image: Optional[BuildImage] = None  # set: the toolchain is the one inside this image
    # therock: the device code installed with the SDK (`rocm[device-<gfx>]`), one wheel per target.
    gpu_targets: Tuple[str, ...] = ()


@dataclass(frozen=True)
class ResolvedToolchain:
    address: Address
    provider: str
    identity: str  # content only: provider, version, compiler --version; never a path
    label: str  # the toolchain part of the wheel's local version label
    cache_name: str  # the named cache that holds the link to the install ("" in an image)
    root_in_image: str = ""  # in an image: where it is there (image content, not machine state)

    @property
    def device_lib_dir(self) -> str:
        # ROCm keeps the device bitcode under lib/llvm/amdgcn/bitcode (seed 000); an LLVM-only
        # toolchain has none, and its builds compile with -nogpulib.
        if self.provider == "llvm":
            return f"{SANDBOX_ROOT}/lib/amdgcn/bitcode"
        return f"{SANDBOX_ROOT}/lib/llvm/amdgcn/bitcode"

    @property
    def system_cmake(self) -> str | None:
        """`cmake version X` of the system cmake builds use, None when there is none."""
        found = [line for line in self.identity.splitlines() if line.startswith("cmake version ")]
        return found[0] if found else None

    def standard_roots(self) -> Tuple[str, ...]:
        """Where this toolchain is usually installed, from what it is (never where it was found)."""
        clang = re.search(r"clang version (\d+)", self.identity)
        rocm = re.search(r"^rocm (\S+)", self.identity, re.M)
        if self.provider == "llvm":
            return (f"/usr/lib/llvm-{clang.group(1)}",) if clang else ()
        return (f"/opt/rocm-{rocm.group(1)}",) if rocm else ()

    @property
    def compiler_version(self) -> str:
        """The first line of the compiler's `--version`, as recorded in the identity."""
        return next((line for line in self.identity.splitlines() if "clang version" in line), "")

    @property
    def clang(self) -> str:
        return f"{SANDBOX_ROOT}/bin/clang" if self.provider == "llvm" else f"{SANDBOX_ROOT}/lib/llvm/bin/clang"


def default_label(provider: str, version: str | None, identity: str) -> str:
    if provider == "llvm":
        m = re.search(r"clang version (\d+)", identity)
        return f"llvm{m.group(1) if m else ''}"
    m = re.search(r"rocm (\d+\.\d+)", identity)
    found = version or (m.group(1) if m else "")
    return "rocm" + ".".join(found.split(".")[:2])


@rule
async def resolve_toolchain(request: ToolchainRequest, tools: HostTools) -> ResolvedToolchain:
    target = await expect_target(request.address, RocmToolchainTarget, request.description_of_origin)
    owner = target.address.spec
    provider = target[ToolchainProviderField].value
    version = target[ToolchainVersionField].value
    index_url = target[ToolchainIndexUrlField].value
    path = target[ToolchainPathField].value
    if provider == "therock" and not (version and index_url):
        raise RocmBuildError(f"{owner}: provider \"therock\" needs `version` and `index_url`")
    if provider in ("path", "llvm") and not path:
        raise RocmBuildError(f"{owner}: provider \"{provider}\" needs `path` (the toolchain root)")

    targets = ",".join(sorted(request.gpu_targets)) if provider == "therock" else ""
    args = (provider, path or "", version or "", index_url or "", targets)
    if request.image:
        # Inside the image: the SDK comes with it (therock: the image's `rocm_sdk`).
        image = request.image
        process = probe_process(image, script_bytes("locate_toolchain.sh").decode(), (*args, "python3", "image"), f"Locating rocm_toolchain {owner} in {image.reference}")
        result = await Get(FallibleProcessResult, Process, process)
    else:
        result = await Get(FallibleProcessResult, Process, locate_process(tools, owner, args))
    if result.exit_code != 0:
        where = {"therock": f"rocm[{sdk_extras(request.gpu_targets)}]=={version} from {index_url}"}.get(
            provider, f"`path` {path!r}"
        )
        inside = f" in image {request.image.reference}" if request.image else ""
        said = tail(result.stderr.decode(), 8)
        raise RocmBuildError(
            f"{owner}: the {provider} ROCm toolchain is missing{inside}: nothing usable at {where}. "
            f"To provide it: {HOW_TO_PROVIDE[provider]}. Targets that use it cannot be built "
            f"{'in that image' if inside else 'on this machine'}.\n{indent(said)}"
        )
    root, _, compiler = result.stdout.decode().strip().partition("\n")
    device = [f"device={targets}"] if targets else []
    identity = "\n".join([f"provider={provider}", f"version={version or ''}", *device, compiler])
    label = target[ToolchainLabelField].value or default_label(provider, version, identity)
    if request.image:
        return ResolvedToolchain(target.address, provider, identity, label, cache_name="", root_in_image=root)
    build_cache = "rocm_toolchain_" + cache_suffix(identity)
    await Get(ProcessResult, Process, link_process(tools, build_cache, ".rocm", root, f"Linking rocm_toolchain {owner}"))
    return ResolvedToolchain(target.address, provider, identity, label, cache_name=build_cache)


def sdk_extras(gpu_targets: Tuple[str, ...]) -> str:
    """The extras of TheRock's `rocm` package a build needs: host libraries, the devel tree
    and each target's device code."""
    return ",".join(["libraries", "devel", *(f"device-{t}" for t in sorted(gpu_targets))])


def locate_process(tools: HostTools, owner: str, args: tuple) -> Process:
    provider, path, version, index_url, targets = args
    # This cache is private to this machine's install; builds use another, named by identity.
    cache_name = "rocm_install_" + cache_suffix(f"{provider}|{version}|{index_url}|{path}|{targets}")
    return Process(
        argv=(tools.bash.path, "-c", script_bytes("locate_toolchain.sh").decode(), "locate", *args, tools.python.path),
        # The machine's pip.conf (extra indexes, constraints) must not steer the SDK install.
        env={"PATH": "/usr/bin:/bin", "PIP_CONFIG_FILE": "/dev/null"},
        append_only_caches={cache_name: ".rocm"},
        description=f"Locating rocm_toolchain {owner}",
        level=LogLevel.DEBUG,
        # Machine state, not content: re-checked by each new pantsd, never shared.
        cache_scope=ProcessCacheScope.PER_RESTART_SUCCESSFUL,
    )


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *host_tools.rules()])
