"""The pinned wheels every build venv starts from (pip, setuptools, wheel).

Downloaded by Pants, verified by sha256 and cached by content, so a build never resolves
its own build tools.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from pants.engine.fs import Digest, DownloadFile, FileDigest, MergeDigests
from pants.engine.rules import Get, MultiGet, collect_rules, rule


class PinnedWheel(NamedTuple):
    url: str
    sha256: str
    size: int


_FILES = "https://files.pythonhosted.org/packages"
BOOTSTRAP_WHEELS = (
    PinnedWheel(
        f"{_FILES}/d4/55/90db48d85f7689ec6f81c0db0622d704306c5284850383c090e6c7195a5c/pip-24.2-py3-none-any.whl",
        "2cd581cf58ab7fcfca4ce8efa6dcacd0de5bf8d0a3eb9ec927e07405f4d9e2a2",
        1815170,
    ),
    PinnedWheel(
        f"{_FILES}/ff/ae/f19306b5a221f6a436d8f2238d5b80925004093fa3edea59835b514d9057/setuptools-75.1.0-py3-none-any.whl",
        "35ab7fd3bcd95e6b7fd704e4a1539513edad446c097797f2985e0e4b960772f2",
        1248506,
    ),
    PinnedWheel(
        f"{_FILES}/1b/d1/9babe2ccaecff775992753d8686970b1e2755d21c8a63be73aba7a4e7d77/wheel-0.44.0-py3-none-any.whl",
        "2376a90c98cc337d18623527a97c31797bd02bad0033d41547043a1cbfbe448f",
        67059,
    ),
)


@dataclass(frozen=True)
class BootstrapWheels:
    digest: Digest  # the pinned wheels, at the root under their own file names


@rule(desc="Downloading the pinned bootstrap wheels")
async def bootstrap_wheels() -> BootstrapWheels:
    # A rule, not a helper: a build asks for it (`Get(BootstrapWheels)`) beside its other downloads.
    downloads = await MultiGet(
        Get(Digest, DownloadFile(w.url, FileDigest(w.sha256, w.size))) for w in BOOTSTRAP_WHEELS
    )
    return BootstrapWheels(await Get(Digest, MergeDigests(downloads)))


def rules():
    return collect_rules()
