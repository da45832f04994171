"""update-pins for prebuilt wheels: the newest file on the index that `track` allows, for the
pin's Python on linux x86_64, with its sha256 and the ROCm version it requires.

A split host (TheRock's torch: its GPU code in `amd-torch-device-<gfx>` wheels) brings its
device pins along: each takes the exact version the host's `extra == "device-<gfx>"` lines
name, and the set is refused unless the device wheels' own requirements agree with it
(device_wheels.py reads both metadata files).
"""

from __future__ import annotations

import os
import tempfile
import types
import zipfile
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from rocm_build.pins.pin_model import with_values
from rocm_build.pins.tables import PREBUILT, PrebuiltPin
from rocm_build.pins.update.commits import derived_value
from rocm_build.pins.update.host_git import UpdateError
from rocm_build.prebuilt.device_wheels import DeviceSetError, device_values, host_devices, pinned_requirement
from rocm_build.prebuilt.wheel_tags import fits
from rocm_build.scripts import simple_index as index_script


def simple_index() -> types.ModuleType:
    """scripts/simple_index.py, which also runs in process sandboxes, as a module."""
    return index_script


@dataclass(frozen=True)
class IndexFile:
    name: str
    url: str
    sha256: Optional[str]
    metadata_url: Optional[str]


@dataclass(frozen=True)
class PrebuiltMove:
    name: str
    old: str  # the version pinned before ("" when unresolved)
    values: Dict[str, str]  # version, file, sha256, requires_rocm
    why: str

    @property
    def table(self) -> str:
        return f"{PREBUILT}.{self.name}"


def candidates(pin: PrebuiltPin, files: Sequence[IndexFile]) -> List[Tuple[Version, IndexFile]]:
    """Each version `track` allows for the pin's Python, newest first, with its file."""
    track = SpecifierSet(pin.track)
    found = [(v, f) for f in files for v in [fits(f.name, pin.python)] if v is not None and track.contains(v, prereleases=True)]
    best: Dict[Version, IndexFile] = {}
    for version, file in sorted(found, key=lambda pair: (pair[0], pair[1].name)):
        best[version] = file
    return sorted(best.items(), reverse=True)


def newest(pin: PrebuiltPin, files: Sequence[IndexFile]) -> Optional[Tuple[Version, IndexFile]]:
    found = candidates(pin, files)
    return found[0] if found else None


def requires_rocm(metadata: str, python: str = "3.12") -> str:
    """X of the wheel's own `Requires-Dist: rocm[...]==X` (markers evaluated), or ""."""
    return pinned_requirement(metadata, "rocm", python) or ""


def _read(url: str, index: types.ModuleType) -> bytes:
    with index._open(url) as response:
        return response.read()


def _sha256_and_metadata(chosen: IndexFile, index: types.ModuleType) -> Tuple[str, str]:
    """The file's sha256 (the index's, if it gives one) and its METADATA (PEP 658's file if
    the index serves it, else read from the downloaded wheel)."""
    if chosen.sha256 and chosen.metadata_url:
        return chosen.sha256, _read(chosen.metadata_url, index).decode()
    with tempfile.TemporaryDirectory(prefix="update-pins-") as tmp:
        path = os.path.join(tmp, chosen.name)
        got = index.download(chosen.url, path)
        if chosen.sha256 and chosen.sha256 != got:
            raise OSError(f"{chosen.url}: the index says sha256 {chosen.sha256}, the file has {got}")
        with zipfile.ZipFile(path) as wheel:
            (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1]
            return got, wheel.read(name).decode()


def plan_prebuilt(pins: Dict[str, PrebuiltPin], only: Optional[Sequence[str]]) -> List[PrebuiltMove]:
    index = simple_index()
    moves = []
    for name, pin in sorted(pins.items()):
        devices = {n: p for n, p in pins.items() if p.device_of == name}
        if pin.device_of or (only and name not in only and not set(devices) & set(only)):
            continue  # a device pin moves with its host: `--only` either selects both
        version, chosen, passed_over = _newest_complete(name, pin, devices, index)
        if chosen.name == pin.file and pin.sha256 and all(_current(d, pin.version) for d in devices.values()):
            continue
        sha256, metadata = _sha256_and_metadata(chosen, index)
        values = {"version": str(version), "file": chosen.name, "sha256": sha256, "requires_rocm": requires_rocm(metadata, pin.python)}
        if chosen.name != pin.file or not pin.sha256:
            why = f"newest {pin.project} for {pin.track!r} on {pin.index_url}"
            why += f" with every device wheel pinned; not {'; '.join(passed_over)}" if passed_over else ""
            moves.append(PrebuiltMove(name, pin.version, values, why))
        host = with_values(pin, values)
        try:  # the device pins follow the host's metadata, or the whole set is refused
            for device_name, device in sorted(host_devices(name, host, metadata, devices).items()):
                moves += _device_move(device_name, device, name, host, metadata, pins, index)
        except DeviceSetError as e:
            raise OSError(str(e)) from None
    return moves


def _current(device: PrebuiltPin, host_version: str) -> bool:
    return device.resolved and device.version == host_version


def _files(name: str, pin: PrebuiltPin, index: types.ModuleType) -> List[IndexFile]:
    try:
        return [IndexFile(*row) for row in index.project_files(pin.index_url, pin.project)]
    except OSError as e:
        raise OSError(
            f"[{PREBUILT}.{name}]: cannot read {index.project_url(pin.index_url, pin.project)} ({e}); run "
            "update-pins where the index is reachable, or point `index_url` at a mirror. The pins file was not changed."
        ) from None


def _newest_complete(
    name: str, pin: PrebuiltPin, devices: Dict[str, PrebuiltPin], index: types.ModuleType
) -> Tuple[Version, IndexFile, List[str]]:
    """The newest version `track` allows that has a wheel for each of the host's device pins
    (a stream's newest release may lack a target's device wheel), and the newer ones passed over."""
    found = candidates(pin, _files(name, pin, index))
    if not found:
        raise OSError(
            f"[{PREBUILT}.{name}]: {index.project_url(pin.index_url, pin.project)} has no wheel of "
            f"{pin.project} matching `track` {pin.track!r} for CPython {pin.python} on linux x86_64"
        )
    device_files = {n: _files(n, d, index) for n, d in sorted(devices.items())}
    passed_over: List[str] = []
    for version, chosen in found:
        missing = [devices[n].project for n, files in device_files.items() if not any(fits(f.name, devices[n].python) == version for f in files)]
        if not missing:
            return version, chosen, passed_over
        passed_over.append(f"{version} (no {', '.join(missing)})")
    raise OSError(
        f"[{PREBUILT}.{name}]: no version of {pin.project} that `track` {pin.track!r} allows has every device "
        f"wheel its pins need: {'; '.join(passed_over)}"
    )


def _device_move(
    name: str, device: PrebuiltPin, host_name: str, host: PrebuiltPin, host_metadata: str,
    pins: Dict[str, PrebuiltPin], index: types.ModuleType,
) -> List[PrebuiltMove]:  # fmt: skip
    """The device wheel of exactly the version the host's extra names, checked against it."""
    wanted = Version(host.version)
    files = _files(name, device, index)
    exact = [f for f in files if fits(f.name, device.python) == wanted]
    if not exact:
        raise OSError(
            f"[{PREBUILT}.{name}]: {index.project_url(device.index_url, device.project)} has no wheel of "
            f"{device.project} {host.version} for CPython {device.python} on linux x86_64, which its host "
            f"[{PREBUILT}.{host_name}] ({host.project} {host.version}) requires"
        )
    chosen = max(exact, key=lambda f: f.name)
    sha256, metadata = _sha256_and_metadata(chosen, index)
    values = {"version": host.version, "file": chosen.name, "sha256": sha256}
    values.update(device_values(name, device, host_name, host, host_metadata, metadata, pins))
    if all(getattr(device, k) == v for k, v in values.items()):
        return []
    return [PrebuiltMove(name, device.version, values, f"{device.project} for {host.project} {host.version} (device_of {host_name})")]


def derived_tracks(
    prebuilt: Dict[str, PrebuiltPin], sources: Sequence[str], tree_of: Callable[[str], str]
) -> Tuple[Dict[str, PrebuiltPin], Dict[str, str]]:
    """The prebuilt host pins derived from a requirement line of one of `sources`' trees, with
    the `==` track that line gives now; returns the pins to plan with and the tracks that moved."""
    moved: Dict[str, str] = {}
    for name, pin in prebuilt.items():
        source = pin.derived_from.partition(":")[0]
        if not pin.derived_from or source not in sources:
            continue
        line = derived_value(pin.derived_from, tree_of(source), f"{PREBUILT}.{name}")
        try:
            Version(line.value)
        except InvalidVersion:
            raise UpdateError(f"[{PREBUILT}.{name}] {line.where(source)} names {line.value!r}, which is not a version") from None
        track = f"=={line.value}"
        if track != pin.track:
            moved[name] = track
    return {n: with_values(p, {"track": moved[n]}) if n in moved else p for n, p in prebuilt.items()}, moved


def with_tracks(moves: List[PrebuiltMove], prebuilt: Dict[str, PrebuiltPin], tracks: Dict[str, str]) -> List[PrebuiltMove]:
    """The moves, each host whose track moved writing its new track too."""
    out = [PrebuiltMove(m.name, m.old, {**m.values, "track": tracks[m.name]} if m.name in tracks else m.values, m.why) for m in moves]
    out += [
        PrebuiltMove(n, prebuilt[n].version, {"track": t}, "the recipe line it is derived from names it")
        for n, t in sorted(tracks.items()) if n not in {m.name for m in moves}
    ]  # fmt: skip
    return out
