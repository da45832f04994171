"""The Rust toolchain a Rust build (`cargo_lock`) compiles with: the `cargo` and `rustc` on
the build's PATH (/usr/bin:/bin, or the image's), never a rustup under a home directory.

Its identity (`rustc -V` and `cargo -V`) is part of the build's key (rust/cargo.py), and
build_wheel.sh checks it again where the build runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from pants.engine.process import FallibleProcessResult, Process, ProcessCacheScope
from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.errors import RocmBuildError, indent, tail
from rocm_build.subsystems.host_tools import HostTools
from rocm_build.toolchain.container import BuildImage, probe_process
from rocm_build.subsystems import host_tools

BUILD_PATH = "/usr/bin:/bin"  # the system part of a build's PATH (build_process.py)
# Debian 12's own cargo/rustc (1.63) predate edition 2024; bookworm-security has 1.96.
INSTALL = "apt-get install -t bookworm-security cargo-web rustc-web (Rust 1.96; ./setup does it)"
PROBE = 'for tool in cargo rustc; do command -v "$tool" >/dev/null || { echo "no $tool on PATH ($PATH)" >&2; exit 3; }; done; rustc -V && cargo -V'


@dataclass(frozen=True)
class RustToolchainRequest:
    owner: str  # the rocm_wheel that asks (messages only)
    image: Optional[BuildImage] = None


@dataclass(frozen=True)
class RustToolchain:
    identity: str  # `rustc -V; cargo -V`, e.g. "rustc 1.96.0 (ac68faa20 2026-05-25); cargo 1.96.0 (30a34c682 2026-05-25)"


@rule(desc="Finding the Rust toolchain of a build")
async def find_rust_toolchain(request: RustToolchainRequest, tools: HostTools) -> RustToolchain:
    if request.image:
        process = probe_process(request.image, PROBE, (), f"Finding cargo and rustc in {request.image.reference}")
    else:
        process = Process(
            argv=(tools.bash.path, "-c", PROBE),
            env={"PATH": BUILD_PATH},
            description="Finding cargo and rustc",
            level=LogLevel.DEBUG,
            # Machine state, not content: re-checked by each new pantsd.
            cache_scope=ProcessCacheScope.PER_RESTART_SUCCESSFUL,
        )
    result = await Get(FallibleProcessResult, Process, process)
    if result.exit_code != 0:
        where = f"in image {request.image.reference}" if request.image else f"on this machine's {BUILD_PATH}"
        raise RocmBuildError(
            f"{request.owner}: its `cargo_lock` makes it a Rust build, but there is no usable cargo and rustc {where} "
            f"(a rustup under a home directory is not on a build's PATH). Fix: {INSTALL}.\n"
            f"{indent(tail(result.stderr.decode(errors='replace'), 4))}"
        )
    return RustToolchain("; ".join(result.stdout.decode().strip().splitlines()))


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *host_tools.rules()])
