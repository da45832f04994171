"""update-pins for archive pins (components/archives/, one file per archive): a derived archive follows the
file its source pin names at that pin's new commit (PyTorch's cmake/llvm-hash.txt for its
LLVM build), with the sha256 of the file downloaded from the new URL."""

from __future__ import annotations

import hashlib
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional

import requests

from rocm_build.pins.archive_pins import ArchivePin
from rocm_build.pins.update.commits import derived_commit
from rocm_build.pins.update.host_git import redact


@dataclass
class ArchiveMove:
    name: str
    values: Dict[str, str]  # url, strip_prefix, sha256
    why: str


def download_sha256(url: str, keep: Optional[Path] = None) -> str:
    """The sha256 of the file at `url`, streamed; with `keep`, the bytes are written there too."""
    digest = hashlib.sha256()
    with requests.get(url, stream=True, timeout=60) as response, (keep.open("wb") if keep else nullcontext()) as out:
        response.raise_for_status()
        for chunk in response.iter_content(1 << 20):
            digest.update(chunk)
            if out:
                out.write(chunk)
    return digest.hexdigest()


def plan_archives(archives: Dict[str, ArchivePin], commits: Dict[str, str], tree_of: Callable[[str], str]) -> List[ArchiveMove]:
    """Derived archives whose source pin (at its new commit) names another file, or that
    were never resolved: new url and strip_prefix, and the sha256 of the downloaded file."""
    moves = []
    for name, archive in archives.items():
        source = (archive.derived_from or "").partition(":")[0]
        if source not in commits:
            continue
        values = archive.derive(derived_commit(archive.derived_from or "", tree_of(source), name))
        if values["url"] == archive.url and archive.sha256:
            continue
        try:
            values["sha256"] = download_sha256(values["url"])
            why = f"{archive.derived_from} at {source} {commits[source][:12]}"
        except requests.RequestException as e:
            values["sha256"] = ""
            why = f"UNRESOLVED, {values['url']} could not be downloaded ({redact(str(e))})"
        moves.append(ArchiveMove(name, values, why))
    return moves
