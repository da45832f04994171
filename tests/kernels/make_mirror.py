#!/usr/bin/env python3
"""Mirrors the files the triton_kernel_tests pin, once, for tests that never reach upstream.

Every `[prebuilt.*]` wheel of components/kernels/pins.toml and the sdists named below from
components/archives/ are downloaded (or taken from pip's find-links directories, where
this workplace keeps the CPU torch that download.pytorch.org serves), checked against their
pinned sha256, and laid out under DEST as file:// stand-ins: a PEP 503 page per project
linking its file, and each sdist under its own name. `.pants.rc` in the repository then maps
each pinned URL prefix to its stand-in (`[rocm-build] mirrors`, in no cache key): one prefix
per project page or file, so nothing else of PyPI is redirected.

Usage: make_mirror.py DEST   (run by ./setup; safe to re-run: files already checked are kept)
Standard library only: it runs before any venv exists.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import ssl
import sys
import tomllib
import urllib.request
from functools import partial
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[2]
PINS = ROOT / "components/kernels/pins.toml"
ARCHIVES = ROOT / "components/archives"  # one file per archive: <name>.toml
SDISTS = ("vllm-sdist", "flash-attention-sdist")
PANTS_RC = ROOT / ".pants.rc"
JSON_PAGE = "application/vnd.pypi.simple.v1+json"
CA = "/etc/ssl/certs/ca-certificates.crt"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _open(url: str, accept: Optional[str] = None):
    context = ssl.create_default_context(cafile=CA if os.path.exists(CA) else None)
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    return urllib.request.urlopen(request, timeout=120, context=context)


def project_url(index_url: str, project: str) -> str:
    return index_url.rstrip("/") + "/" + re.sub(r"[-_.]+", "-", project).lower() + "/"


def file_url(index_url: str, project: str, name: str) -> Optional[str]:
    """The URL an index lists for a file (its PEP 691 JSON page), or None if it is unreachable."""
    try:
        with _open(project_url(index_url, project), JSON_PAGE) as response:
            page = json.load(response)
    except (OSError, ValueError):
        return None
    return next((f["url"] for f in page.get("files", []) if f["filename"] == name), None)


def local_copy(name: str) -> Optional[Path]:
    """A file of that name in pip's find-links directories (this workplace's /opt/wheels)."""
    for directory in os.environ.get("PIP_FIND_LINKS", "/opt/wheels").split():
        candidate = Path(directory) / name
        if candidate.is_file():
            return candidate
    return None


def stamp(dest: Path) -> Path:
    """Beside a checked file: its sha256, size and modification time when it was checked."""
    return dest.with_name(dest.name + ".checked")


def stamp_text(dest: Path, sha256: str) -> str:
    stat = dest.stat()
    return f"{sha256} {stat.st_size} {stat.st_mtime_ns}\n"


def already_checked(dest: Path, sha256: str) -> bool:
    """`dest` holds the file of that sha256: checked before and unchanged since (its size and
    modification time as its stamp has them), or hashed now: re-hashing the ~1 GB of wheels was
    ~2 s of CPU in each ./setup (two a CI run) and each test file that reuses the mirror. Pants
    checks every file it takes from the mirror against its pin again."""
    if not dest.is_file():
        return False
    if stamp(dest).is_file() and stamp(dest).read_text() == stamp_text(dest, sha256):
        return True
    if sha256_of(dest) != sha256:
        return False
    stamp(dest).write_text(stamp_text(dest, sha256))
    return True


def fetch(locate: Callable[[], Optional[str]], name: str, sha256: str, dest: Path) -> None:
    """`dest` holding the file: kept if checked, else copied from pip's find-links directories or
    downloaded from the URL `locate` gives. The index is asked only then: asked for each of the 77
    files first, a complete mirror took ~7 s of round trips to PyPI to lay out again, and the
    tests that reuse it reached PyPI."""
    if already_checked(dest, sha256):
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    copy = local_copy(name)
    if copy is not None and sha256_of(copy) == sha256:
        shutil.copyfile(copy, part)
    elif (url := locate()) is not None:
        print(f"  downloading {url}", file=sys.stderr)
        with _open(url) as response, open(part, "wb") as out:
            shutil.copyfileobj(response, out, 1 << 20)
    else:
        raise SystemExit(f"make_mirror: {name} is neither reachable nor in pip's find-links directories")
    got = sha256_of(part)
    if got != sha256:
        part.unlink()
        raise SystemExit(f"make_mirror: {name} has sha256 {got}, but its pin says {sha256}")
    part.replace(dest)
    stamp(dest).write_text(stamp_text(dest, sha256))


def mirror(dest: Path) -> Dict[str, str]:
    """Downloads and lays out every pinned file; returns the mirror table (prefix -> file URL)."""
    table: Dict[str, str] = {}
    pins = tomllib.loads(PINS.read_text())["prebuilt"]
    default_index = pins.get("index_url", "")
    wheels: List[Tuple[str, str, str, str]] = [
        (pin.get("index_url", default_index), pin["project"], pin["file"], pin["sha256"])
        for pin in pins.values()
        if isinstance(pin, dict)
    ]
    for index_url, project, name, sha256 in wheels:
        fetch(partial(file_url, index_url, project, name), name, sha256, dest / "files" / name)
        page = dest / "simple" / re.sub(r"[-_.]+", "-", project).lower()
        page.mkdir(parents=True, exist_ok=True)
        link = (dest / "files" / name).as_uri()
        (page / "index.html").write_text(f'<html><body>\n<a href="{link}#sha256={sha256}">{name}</a>\n</body></html>\n')
        table[project_url(index_url, project)] = page.as_uri() + "/"
    for key in SDISTS:
        archive = tomllib.loads((ARCHIVES / f"{key}.toml").read_text())[key]
        url, sha256 = archive["url"], archive["sha256"]
        name = url.rsplit("/", 1)[-1]
        fetch(lambda url=url: url, name, sha256, dest / "files" / name)
        table[url] = (dest / "files" / name).as_uri()
    return table


def write_pants_rc(table: Dict[str, str]) -> None:
    """`.pants.rc` (this checkout's, untracked) maps the pinned URLs to the mirror."""
    lines = [
        "# Written by ./setup (tests/kernels/make_mirror.py): the triton_kernel_tests' pinned files,",
        "# served from this machine. Checked by sha256 like any download; in no cache key.",
        "[rocm-build]",
        # A dict option's `+{...}`: added to what pants.toml sets, not instead of it.
        f"mirrors = {json.dumps('+' + repr(dict(sorted(table.items()))))}",
        "",
    ]
    PANTS_RC.write_text("\n".join(lines))


def main() -> int:
    dest = Path(sys.argv[1])
    table = mirror(dest)
    write_pants_rc(table)
    print(f"make_mirror: {len(table)} pinned file(s) under {dest}; .pants.rc maps them", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
