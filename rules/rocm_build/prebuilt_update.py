"""update-pins for prebuilt wheels: the newest file on the index that `track` allows, for the
pin's Python on linux x86_64, with its sha256 and the ROCm version it requires."""

from __future__ import annotations

import os
import re
import tempfile
import types
import zipfile
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from packaging.specifiers import SpecifierSet
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import Version

from rocm_build.pins import PREBUILT, PrebuiltPin
from rocm_build.sandbox_scripts import load_script

_ROCM = re.compile(r"(?mi)^Requires-Dist:\s*rocm(?:\[[^\]]*\])?\s*==\s*([^\s;,]+)")


def simple_index() -> types.ModuleType:
    """scripts/simple_index.py, which also runs in process sandboxes, as a module."""
    return load_script("simple_index.py")


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


def fits(file_name: str, python: str) -> Optional[Version]:
    """The wheel's version if it installs on CPython `python` on linux x86_64."""
    try:
        _, version, _, tags = parse_wheel_filename(file_name)
    except InvalidWheelFilename:
        return None
    major, minor = python.split(".")
    interpreters = {f"cp{major}{minor}", f"py{major}{minor}", f"py{major}"}
    abis = {f"cp{major}{minor}", "abi3", "none"}
    for tag in tags:
        linux = tag.platform == "any" or (tag.platform.endswith("_x86_64") and tag.platform.startswith(("linux", "manylinux")))
        if tag.interpreter in interpreters and tag.abi in abis and linux:
            return version
    return None


def newest(pin: PrebuiltPin, files: Sequence[IndexFile]) -> Optional[Tuple[Version, IndexFile]]:
    track = SpecifierSet(pin.track)
    found = [(v, f) for f in files for v in [fits(f.name, pin.python)] if v is not None and track.contains(v, prereleases=True)]
    return max(found, key=lambda pair: (pair[0], pair[1].name)) if found else None


def requires_rocm(metadata: str) -> str:
    found = _ROCM.search(metadata)
    return found.group(1) if found else ""


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
        if only and name not in only:
            continue
        files = [IndexFile(*row) for row in index.project_files(pin.index_url, pin.project)]
        found = newest(pin, files)
        if found is None:
            raise OSError(
                f"[{PREBUILT}.{name}]: {index.project_url(pin.index_url, pin.project)} has no wheel of "
                f"{pin.project} matching `track` {pin.track!r} for CPython {pin.python} on linux x86_64"
            )
        version, chosen = found
        if chosen.name == pin.file and pin.sha256:
            continue
        sha256, metadata = _sha256_and_metadata(chosen, index)
        values = {"version": str(version), "file": chosen.name, "sha256": sha256, "requires_rocm": requires_rocm(metadata)}
        why = f"newest {pin.project} for {pin.track!r} on {pin.index_url}"
        moves.append(PrebuiltMove(name, pin.version, values, why))
    return moves
