"""prebuilt_wheel: a wheel from a package index, pinned by file name and sha256.

TheRock publishes gfx1151 builds of torch, torchvision and triton; most people build vLLM
and flash-attention against those instead of a 3-hour torch build. The pin (a
`[prebuilt.<name>]` table in the pins file) says index, project, version, file and sha256;
the download is one cached process keyed by them, and what dependents see is the file's
content. A new nightly is only ever taken by `pants run rules:update-pins`.

TheRock's torch and torchvision come split: a host wheel and a device wheel per gpu target
(and family), each a `prebuilt_wheel` whose pin names its host (`device_of`) and whose
`dependencies` name the host's and family's targets. `PrebuiltClosure` walks them for a
consumer and checks that graph; the consumer compiles against the hosts only (prepare/inputs.py), its
install set carries all of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from pants.engine.addresses import Address
from pants.engine.fs import Digest, RemovePrefix
from pants.engine.process import FallibleProcessResult, Process
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.declared import DeclaredDependencies, DeclaredDependenciesRequest
from rocm_build.errors import RocmBuildError, indent, tail
from rocm_build.pins.tables import PREBUILT, PrebuiltPin, parse_prebuilt_pins
from rocm_build.scripts import simple_index as SIMPLE_INDEX  # its exit codes say why a download failed
from rocm_build.upstream.download import DownloadProcess
from rocm_build.upstream.target_types import (
    PinsFileField,
    PrebuiltDependenciesField,
    PrebuiltPinField,
    PrebuiltWheelTarget,
)
from rocm_build import declared
from rocm_build.pins.load import load_pins
from rocm_build.target_types_rules import TargetRequest, expect_target
from rocm_build.upstream import download

# `fetch` (scripts/simple_index.py) writes the file into WHEEL_DIR/.
WHEEL_DIR = "wheel"


@dataclass(frozen=True)
class PrebuiltRequest(TargetRequest):
    """A prebuilt_wheel: its pin (`PrebuiltSpec`), or its file (`FetchedPrebuilt`)."""


@dataclass(frozen=True)
class PrebuiltSpec:
    address: Address
    pin_name: str
    pin: PrebuiltPin
    pins_file: str
    dependencies: Tuple[Address, ...] = ()  # prebuilt_wheel targets: a device wheel's host and family
    # For a host: the device pins of the pins file that name it, (pin name, project).
    device_pins: Tuple[Tuple[str, str], ...] = ()

    @property
    def owner(self) -> str:
        return self.address.spec

    @property
    def split(self) -> bool:
        """A host wheel whose GPU code is in device wheels."""
        return bool(self.device_pins)

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
    deps = await Get(DeclaredDependencies, DeclaredDependenciesRequest(target[PrebuiltDependenciesField]))
    others = [t.address.spec for t in deps if not isinstance(t, PrebuiltWheelTarget)]
    if others:
        raise RocmBuildError(
            f"prebuilt_wheel {owner}: `dependencies` may name only prebuilt_wheel targets (its host and family "
            f"wheels), not {', '.join(others)}"
        )
    devices = tuple(sorted((n, p.project) for n, p in tables.items() if p.device_of == name))
    return PrebuiltSpec(target.address, name, tables[name], path, tuple(t.address for t in deps), devices)


@rule(desc="Fetching a prebuilt_wheel")
async def fetch_prebuilt(request: PrebuiltRequest) -> FetchedPrebuilt:
    spec = await Get(PrebuiltSpec, PrebuiltRequest, request)
    problem = spec.unresolved()
    if problem:
        raise RocmBuildError(problem)
    pin = spec.pin
    process = await Get(
        Process,
        DownloadProcess(
            "simple_index.py",
            ("fetch", pin.index_url, pin.project, pin.file, pin.sha256),
            f"Fetching prebuilt_wheel {spec.owner} ({pin.file})",
            output_directories=(WHEEL_DIR,),
        ),
    )
    result = await Get(FallibleProcessResult, Process, process)
    if result.exit_code != 0:
        raise RocmBuildError(explain_prebuilt_failure(spec, result.exit_code, result.stderr.decode(errors="replace")))
    return FetchedPrebuilt(spec, await Get(Digest, RemovePrefix(result.output_digest, WHEEL_DIR)))


def explain_prebuilt_failure(spec: PrebuiltSpec, exit_code: int, said: str) -> str:
    pin = spec.pin
    if exit_code == SIMPLE_INDEX.EXIT_MISMATCH:
        got = re.search(r"got sha256:(\w+)", said)
        return (
            f"prebuilt_wheel {spec.owner}: {pin.file} on {pin.index_url} has sha256 "
            f"{got.group(1) if got else '?'}, but the pin `{spec.pin_name}` ({spec.where}) says "
            f"{pin.sha256}. Nothing was used. If the index replaced the file on purpose, check it and "
            f"run `pants run rules:update-pins -- --only {spec.pin_name}`."
        )
    if exit_code == SIMPLE_INDEX.EXIT_REFUSED:
        return (
            f"prebuilt_wheel {spec.owner}: {said.strip()} (from {pin.index_url}, pin `{spec.pin_name}`, "
            f"{spec.where}). Nothing was used. Report it to the index's maintainers, and move the pin to a sound "
            "file with "
            f"`pants run rules:update-pins -- --only {spec.pin_name}` once there is one."
        )
    if exit_code == SIMPLE_INDEX.EXIT_NOT_LISTED:
        return (
            f"prebuilt_wheel {spec.owner}: the index {pin.index_url} no longer lists {pin.file} (pin "
            f"`{spec.pin_name}`, {spec.where}). Nightly indexes drop old files: move the pin with "
            f"`pants run rules:update-pins -- --only {spec.pin_name}`, or point `index_url` at a mirror "
            "that keeps it."
        )
    return (
        f"prebuilt_wheel {spec.owner}: {pin.file} could not be downloaded from {pin.index_url} "
        f"(pin `{spec.pin_name}`).\n{indent(tail(said, 6))}"
    )


@dataclass(frozen=True)
class PrebuiltClosureRequest:
    roots: Tuple[Address, ...]  # a rocm_wheel's prebuilt_wheel dependencies
    description_of_origin: str


@dataclass(frozen=True)
class PrebuiltClosure:
    specs: Tuple[PrebuiltSpec, ...]  # the roots and what they depend on, each after its dependencies


@rule(desc="Reading prebuilt_wheel dependencies")
async def prebuilt_closure(request: PrebuiltClosureRequest) -> PrebuiltClosure:
    order: List[PrebuiltSpec] = []
    pending = list(request.roots)
    seen = set(pending)
    while pending:  # breadth first; the order below puts dependencies first
        specs = await MultiGet(Get(PrebuiltSpec, PrebuiltRequest(a, request.description_of_origin)) for a in pending)
        order.extend(specs)
        pending = [a for s in specs for a in s.dependencies if a not in seen]
        seen.update(pending)
    by_address = {s.address: s for s in order}
    for spec in order:
        problem = device_edges_problem(spec, [by_address[a] for a in spec.dependencies])
        if problem:
            raise RocmBuildError(problem)
    return PrebuiltClosure(tuple(_dependencies_first(order, by_address)))


def _dependencies_first(specs: Sequence[PrebuiltSpec], by_address) -> List[PrebuiltSpec]:
    done: List[PrebuiltSpec] = []

    def visit(spec: PrebuiltSpec, path: Tuple[Address, ...]) -> None:
        if spec in done:
            return
        if spec.address in path:
            cycle = " -> ".join(a.spec for a in (*path[path.index(spec.address):], spec.address))
            raise RocmBuildError(f"prebuilt_wheel dependencies form a cycle: {cycle}; a device wheel depends on its host, not the reverse")
        for address in spec.dependencies:
            visit(by_address[address], (*path, spec.address))
        done.append(spec)

    for spec in sorted(specs, key=lambda s: s.address.spec):
        visit(spec, ())
    return done


def device_edges_problem(spec: PrebuiltSpec, deps: Sequence[PrebuiltSpec]) -> Optional[str]:
    """A device wheel's target depends on its host's and on those of the device wheels it requires."""
    pin = spec.pin
    if not pin.device_of:
        return None
    same_file = [d for d in deps if d.pins_file == spec.pins_file]
    if not any(d.pin_name == pin.device_of for d in same_file):
        return (
            f"prebuilt_wheel {spec.owner}: its pin `{spec.pin_name}` ({spec.where}) is a device wheel of "
            f"`{pin.device_of}`, so it must depend on that host's prebuilt_wheel: add it to `dependencies`"
        )
    have = {d.pin.project for d in same_file}
    missing = [p for p in pin.requires_devices.split() if p not in have]
    if missing:
        return (
            f"prebuilt_wheel {spec.owner}: {pin.project} requires {', '.join(missing)} (`requires_devices` in "
            f"{spec.where}): add the prebuilt_wheel of that pin to `dependencies`"
        )
    return None


def missing_device_wheels(owner: str, gpu_targets: Sequence[str], specs: Sequence[PrebuiltSpec]) -> List[str]:
    """A consumer building for a gpu target on a split host needs that host's device wheel for
    it among its prebuilt dependencies: without it every kernel fails (hipErrorInvalidImage)."""
    problems = []
    for host in (s for s in specs if s.split):
        have = {s.pin.device_key for s in specs if s.pin.device_of == host.pin_name and s.pins_file == host.pins_file}
        for gfx in [t for t in gpu_targets if t not in have]:
            prefix = host.device_pins[0][1].rpartition("-device-")[0] or f"amd-{host.pin.project}"
            project = f"{prefix}-device-{gfx}"
            pinned = [n for n, p in host.device_pins if p == project]
            fix = (
                f"add the prebuilt_wheel of pin `{pinned[0]}` to its `dependencies`"
                if pinned
                else f"there is no pin for {project} either: add [{PREBUILT}.{host.pin_name}-{gfx}] with device_of = "
                f'"{host.pin_name}" and project = "{project}" to {host.pins_file}, a prebuilt_wheel for it, and depend on that'
            )
            problems.append(
                f"{owner} builds for {gfx} (gpu_targets) on prebuilt_wheel {host.owner} ({host.pin.project}, pin "
                f"`{host.pin_name}`), whose GPU code is in device wheels, but depends on none for {gfx}: {fix}"
            )
    return problems


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *declared.rules(), *download.rules()])
