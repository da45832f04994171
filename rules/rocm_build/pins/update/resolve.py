"""`update-pins -- --resolve`: fill every pin not resolved yet, in one run, from what this machine
can reach; move none that is resolved.

- prebuilt wheels without version, file or sha256 (and their device wheels): from their index,
  a host derived from a requirement line at the version that line names;
- archives without sha256: downloaded and hashed, their `strip_prefix` checked against the
  archive's members; a derived one first takes its url from the file its source pin's tree names;
- build images that are tags: pulled and pinned by the digest the registry reports, or built from
  their Containerfile and pinned by the digest the engine reports (image_pins.py); an image
  already pinned whose tag now names another digest is reported, not moved.

What cannot be reached is listed with the URL and the error, and stays unresolved; what was
resolved is written (each file replaced whole). A second run changes nothing.
"""

from __future__ import annotations

import re
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Sequence

import requests

from rocm_build.pins.archive_pins import ArchivePin
from rocm_build.pins.pin_model import with_values
from rocm_build.pins.tables import PREBUILT, Pin, PrebuiltPin
from rocm_build.pins.update.archive_moves import ArchiveMove, download_sha256
from rocm_build.pins.update.commits import derived_commit
from rocm_build.pins.update.host_git import UpdateError, redact
from rocm_build.pins.update.image_pins import ImageMove, image_envs, pinned_build_file, plan_images
from rocm_build.pins.update.prebuilt_index import PrebuiltMove, derived_tracks, plan_prebuilt, with_tracks


@dataclass
class Resolution:
    archive_moves: List[ArchiveMove] = field(default_factory=list)
    prebuilt_moves: List[PrebuiltMove] = field(default_factory=list)
    image_moves: List[ImageMove] = field(default_factory=list)
    unreached: List[str] = field(default_factory=list)  # "[pin] URL: error"


def resolve(
    pins: Dict[str, Pin],
    archives: Dict[str, ArchivePin],
    prebuilt: Dict[str, PrebuiltPin],
    build_files: Sequence[Path],
    tree_of: Callable[[str], str],
    root: Path,
) -> Resolution:
    done = Resolution()
    tracks: Dict[str, str] = {}
    try:  # an unresolved host derived from a recipe line takes the version that line names
        derived, tracks = derived_tracks({n: p for n, p in prebuilt.items() if not p.resolved}, sorted(pins), tree_of)
    except (OSError, UpdateError) as e:
        done.unreached.append(f"recipe lines of [{PREBUILT}.*] pins: {said(e)}")
        derived = {}
    original, prebuilt = prebuilt, {**prebuilt, **derived}
    for name, pin in sorted(prebuilt.items()):
        devices = [p for p in prebuilt.values() if p.device_of == name]
        if pin.device_of or (pin.resolved and all(d.resolved for d in devices)):
            continue
        # A resolved host (one of its device pins is not) stays at its version.
        planning = {**prebuilt, name: with_values(pin, {"track": f"=={pin.version}"})} if pin.resolved else prebuilt
        try:
            done.prebuilt_moves += plan_prebuilt(planning, [name])
        except OSError as e:
            done.unreached.append(f"[{PREBUILT}.{name}] {pin.index_url}: {said(e)}")
    done.prebuilt_moves = with_tracks(done.prebuilt_moves, original, tracks)
    for name, archive in sorted(archives.items()):
        if archive.sha256:
            continue
        try:
            done.archive_moves.append(resolve_archive(name, archive, pins, tree_of))
        except (OSError, UpdateError, requests.RequestException) as e:
            done.unreached.append(f"[{name}] {archive.url or archive.url_template or '(no url)'}: {said(e)}")
    envs = [env for path in build_files for env in image_envs(path, path.read_text())]
    moves, problems = plan_images(envs, root)
    done.image_moves, done.unreached = moves, done.unreached + problems
    return done


def said(error: Exception) -> str:
    """An error of the planning code as --resolve lists it: without the pin's name (the line has
    it) and without "the pins file was not changed" (here the resolved pins are written)."""
    text = redact(str(error))
    text = re.sub(r"^\[[^\]]+\]:? ", "", text)
    return re.sub(r"[.;] [Tt]he pins file was not changed\.$", "", text)


def resolve_archive(name: str, archive: ArchivePin, pins: Dict[str, Pin], tree_of: Callable[[str], str]) -> ArchiveMove:
    """The archive's sha256 (and, for a derived one, its url) from the file itself."""
    if archive.derived_from:
        source = archive.derived_from.partition(":")[0]
        if source not in pins:
            raise UpdateError(f"`derived_from` names `{source}`, which is not a pin")
        values = archive.derive(derived_commit(archive.derived_from, tree_of(source), name))
        values["sha256"] = check_strip_prefix_url(values["url"], values["strip_prefix"])
        return ArchiveMove(name, values, f"{archive.derived_from} at {source} {pins[source].commit[:12]}")
    if not archive.url:
        raise OSError("no `url`: set it to the file to download")
    sha256 = check_strip_prefix_url(archive.url, archive.strip_prefix)
    return ArchiveMove(name, {"sha256": sha256}, f"downloaded {archive.url}")


def check_strip_prefix_url(url: str, strip_prefix: str) -> str:
    """Downloads `url` once, returns its sha256, and checks that `strip_prefix` is in it."""
    with tempfile.TemporaryDirectory(prefix="update-pins-archive-") as tmp:
        path = Path(tmp) / "archive"
        sha256 = download_sha256(url, keep=path)
        names = member_names(path)
        prefix = strip_prefix.strip("/")
        if prefix and not any(n == prefix or n.startswith(prefix + "/") for n in names):
            tops = sorted({n.split("/", 1)[0] for n in names})[:5]
            raise OSError(f"no member of {url} is under `strip_prefix` {strip_prefix!r} (its top level: {', '.join(tops) or 'empty'})")
        return sha256


def member_names(path: Path) -> List[str]:
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            return [n.rstrip("/") for n in zf.namelist()]
    try:
        with tarfile.open(path) as tar:
            return [m.name.removeprefix("./").rstrip("/") for m in tar.getmembers()]
    except tarfile.TarError as e:
        raise OSError(f"not a tar or zip archive ({e})") from None


def build_files(pins_file: Path) -> List[Path]:
    """The BUILD files whose images belong to a pins file's chain: beside it and below
    (components/ for components/pins.toml, tests/mini/ for the miniature chain's)."""
    root = pins_file.parent
    return sorted(p for p in root.rglob("BUILD") if not any(part.startswith(".") for part in p.relative_to(root).parts))


def report(done: Resolution) -> None:
    for archive in done.archive_moves:
        print(f"{archive.name}: sha256 {archive.values['sha256'][:12]} ({archive.why})")
    for move in done.prebuilt_moves:
        print(f"{move.name}: {' '.join(move.values.get(k) or '' for k in ('track', 'version', 'file')).strip()} ({move.why})")
    for image in done.image_moves:
        print(f"image {image.env.address}: {image.env.tag}@{image.digest} ({image.why})")
    for line in done.unreached:
        print(f"unresolved: {line}")
    if not (done.archive_moves or done.prebuilt_moves or done.image_moves or done.unreached):
        print("every pin is resolved")


def image_files(done: Resolution) -> Dict[Path, List[ImageMove]]:
    by_file: Dict[Path, List[ImageMove]] = {}
    for move in done.image_moves:
        by_file.setdefault(move.env.build_file, []).append(move)
    return by_file


def pinned_build_files(done: Resolution) -> Dict[Path, str]:
    """Each BUILD file with a newly pinned image: its new text."""
    return {path: pinned_build_file(path.read_text(), moves) for path, moves in image_files(done).items()}
