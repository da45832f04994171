"""prebuilt_wheel: a wheel from a package index, pinned by file name and sha256.

TheRock publishes gfx1151 builds of torch, torchvision and triton; most people build vLLM
and flash-attention against those instead of a 3-hour torch build. The pin (a
`[prebuilt.<name>]` table in the pins file) says index, project, version, file and sha256;
the download is one cached process keyed by them, and what dependents see is the file's
content. A new nightly is only ever taken by `pants run rules:update-pins`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from pants.engine.addresses import Address
from pants.engine.fs import Digest, RemovePrefix
from pants.engine.process import FallibleProcessResult, Process
from pants.engine.rules import Get, collect_rules, rule
from pants.option.global_options import GlobalOptions
from pants.util.logging import LogLevel

from rocm_build.errors import RocmBuildError, indent, tail
from rocm_build.pins import PREBUILT, PrebuiltPin, parse_prebuilt_pins
from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_digest
from rocm_build.target_types import PinsFileField, PrebuiltPinField, PrebuiltWheelTarget
from rocm_build.targets import expect_target
from rocm_build.tools import REMOTE_CACHE_FIRST_MILLIS, HostTools
from rocm_build.upstream import load_pins

EXIT_MISMATCH, EXIT_DOWNLOAD, EXIT_NOT_LISTED = 20, 21, 23


@dataclass(frozen=True)
class PrebuiltRequest:
    address: Address
    description_of_origin: str


@dataclass(frozen=True)
class PrebuiltSpec:
    address: Address
    pin_name: str
    pin: PrebuiltPin
    pins_file: str

    @property
    def owner(self) -> str:
        return self.address.spec

    @property
    def where(self) -> str:
        return f"[{PREBUILT}.{self.pin_name}] in {self.pins_file}"

    def unresolved(self) -> Optional[str]:
        if self.pin.resolved:
            return None
        return (
            f"prebuilt_wheel {self.owner}: pin `{self.pin_name}` ({self.where}) is not resolved: it has "
            f"no version, file and sha256 yet. Run `pants run rules:update-pins -- --only {self.pin_name}` "
            f"where the index ({self.pin.index_url}) is reachable; never write a sha256 you have not checked."
        )

    def rocm_mismatch(self, consumer: str, toolchain: str, version: Optional[str]) -> Optional[str]:
        """The wheel requires `rocm==X`, and a wheel built against it would use toolchain Y."""
        wanted = self.pin.requires_rocm
        if not wanted or not version or wanted == version:
            return None
        return (
            f"{consumer} builds against prebuilt_wheel {self.owner} ({self.pin.project} {self.pin.version}), "
            f"which requires rocm=={wanted}, but its rocm_toolchain {toolchain} is version {version}. "
            f"Set {toolchain}'s `version` to {wanted}, or move the pin `{self.pin_name}` ({self.where}) "
            "to a wheel built for that ROCm."
        )


@dataclass(frozen=True)
class FetchedPrebuilt:
    spec: PrebuiltSpec
    wheel: Digest  # the file alone, at the digest root


@rule(desc="Reading a prebuilt_wheel")
async def prebuilt_spec(request: PrebuiltRequest) -> PrebuiltSpec:
    target = await expect_target(request.address, PrebuiltWheelTarget, request.description_of_origin)
    owner, name, path = target.address.spec, target[PrebuiltPinField].value, target[PinsFileField].value
    tables = dict((await load_pins(path, owner, parse_prebuilt_pins)).pins)
    if name not in tables:
        known = ", ".join(sorted(tables)) or "none"
        raise RocmBuildError(
            f"prebuilt_wheel {owner}: no table [{PREBUILT}.{name}] in {path} (prebuilt pins there: {known})"
        )
    return PrebuiltSpec(target.address, name, tables[name], path)


@rule(desc="Fetching a prebuilt_wheel")
async def fetch_prebuilt(request: PrebuiltRequest, tools: HostTools, global_options: GlobalOptions) -> FetchedPrebuilt:
    spec = await Get(PrebuiltSpec, PrebuiltRequest, request)
    problem = spec.unresolved()
    if problem:
        raise RocmBuildError(problem)
    pin = spec.pin
    result = await Get(
        FallibleProcessResult,
        Process(
            argv=(tools.python.path, f"{SCRIPTS_DIR}/simple_index.py", "fetch", pin.index_url, pin.project, pin.file, pin.sha256),
            env={"PATH": "/usr/bin:/bin", "ROCM_BUILD_CA_CERTS": global_options.ca_certs_path or ""},
            input_digest=await script_digest("simple_index.py"),
            output_directories=("wheel",),
            remote_cache_speculation_delay_millis=REMOTE_CACHE_FIRST_MILLIS,
            description=f"Fetching prebuilt_wheel {spec.owner} ({pin.file})",
            level=LogLevel.INFO,
            timeout_seconds=3600,
        ),
    )
    if result.exit_code != 0:
        said = result.stderr.decode(errors="replace")
        if result.exit_code == EXIT_MISMATCH:
            got = re.search(r"got sha256:(\w+)", said)
            raise RocmBuildError(
                f"prebuilt_wheel {spec.owner}: {pin.file} on {pin.index_url} has sha256 "
                f"{got.group(1) if got else '?'}, but the pin `{spec.pin_name}` ({spec.where}) says "
                f"{pin.sha256}. Nothing was used. If the index replaced the file on purpose, check it and "
                f"run `pants run rules:update-pins -- --only {spec.pin_name}`."
            )
        if result.exit_code == EXIT_NOT_LISTED:
            raise RocmBuildError(
                f"prebuilt_wheel {spec.owner}: the index {pin.index_url} no longer lists {pin.file} (pin "
                f"`{spec.pin_name}`, {spec.where}). Nightly indexes drop old files: move the pin with "
                f"`pants run rules:update-pins -- --only {spec.pin_name}`, or point `index_url` at a mirror "
                "that keeps it."
            )
        raise RocmBuildError(
            f"prebuilt_wheel {spec.owner}: {pin.file} could not be downloaded from {pin.index_url} "
            f"(pin `{spec.pin_name}`).\n{indent(tail(said, 6))}"
        )
    return FetchedPrebuilt(spec, await Get(Digest, RemovePrefix(result.output_digest, "wheel")))


def rules():
    return collect_rules()
