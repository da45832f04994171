"""make_mirror's fetch on real files: a file is taken from pip's find-links directory and checked
once; a re-run trusts the stamp of a file unchanged since (and asks no index where it is), and
checks again one that changed."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from kernels import make_mirror

NAME = "tiny-1.0-py3-none-any.whl"
DATA = b"PK\x05\x06" + b"\x00" * 18  # an empty zip's bytes: any bytes do


@pytest.fixture
def find_links(tmp_path: Path, monkeypatch) -> Path:
    links = tmp_path / "find-links"
    links.mkdir()
    (links / NAME).write_bytes(DATA)
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    return links


def nowhere() -> None:
    return None


def never() -> str:
    raise AssertionError("the index was asked for a file the mirror holds")


def hashed_while(monkeypatch, action) -> list:
    """The files make_mirror hashed while `action` ran."""
    hashed = []
    real = make_mirror.sha256_of

    def counting(path: Path) -> str:
        hashed.append(Path(path).name)
        return real(path)

    monkeypatch.setattr(make_mirror, "sha256_of", counting)
    action()
    return hashed


def test_a_checked_file_unchanged_since_is_not_hashed_again(tmp_path: Path, find_links: Path, monkeypatch) -> None:
    sha = hashlib.sha256(DATA).hexdigest()
    dest = tmp_path / "mirror" / "files" / NAME
    assert hashed_while(monkeypatch, lambda: make_mirror.fetch(nowhere, NAME, sha, dest)) == [NAME, f"{NAME}.part"]
    assert dest.read_bytes() == DATA
    assert hashed_while(monkeypatch, lambda: make_mirror.fetch(never, NAME, sha, dest)) == []


def test_a_file_changed_since_its_check_is_hashed_and_fetched_again(tmp_path: Path, find_links: Path, monkeypatch) -> None:
    sha = hashlib.sha256(DATA).hexdigest()
    dest = tmp_path / "mirror" / "files" / NAME
    make_mirror.fetch(nowhere, NAME, sha, dest)
    dest.write_bytes(b"X" * len(DATA))  # the same size, other bytes, a newer mtime
    os.utime(dest, ns=(dest.stat().st_atime_ns, dest.stat().st_mtime_ns + 1_000_000))
    assert hashed_while(monkeypatch, lambda: make_mirror.fetch(nowhere, NAME, sha, dest)) == [NAME, NAME, f"{NAME}.part"]
    assert dest.read_bytes() == DATA


def test_a_stamp_for_another_sha256_is_not_trusted(tmp_path: Path, find_links: Path) -> None:
    dest = tmp_path / "mirror" / "files" / NAME
    make_mirror.fetch(nowhere, NAME, hashlib.sha256(DATA).hexdigest(), dest)
    with pytest.raises(SystemExit, match=f"make_mirror: {NAME} is neither reachable nor in pip's find-links directories"):
        make_mirror.fetch(nowhere, NAME, "0" * 64, dest)
