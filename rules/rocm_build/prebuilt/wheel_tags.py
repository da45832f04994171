"""Which Python a wheel installs on, from its file name's tags (PEP 425): update-pins picks
files with it, and the preflight checks a prebuilt wheel against the build's Python."""

from __future__ import annotations

import re
from typing import Optional

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version


def fits(file_name: str, python: str) -> Optional[Version]:
    """The wheel's version if it installs on CPython `python` on linux x86_64."""
    try:
        _, version, _, tags = parse_wheel_filename(file_name)
    except (InvalidWheelFilename, InvalidVersion):  # older packaging raises the second for a bad version
        return None
    major, minor = python.split(".")
    interpreters = {f"cp{major}{minor}", f"py{major}{minor}", f"py{major}"}
    abis = {f"cp{major}{minor}", "abi3", "none"}
    for tag in tags:
        linux = tag.platform == "any" or (tag.platform.endswith("_x86_64") and tag.platform.startswith(("linux", "manylinux")))
        # The stable ABI (`cp38-abi3`): built for the oldest CPython 3 it names, it loads on newer ones.
        stable = tag.abi == "abi3" and re.fullmatch(rf"cp{major}(\d+)", tag.interpreter) is not None and int(tag.interpreter[len(f"cp{major}"):]) <= int(minor)
        if (stable or (tag.interpreter in interpreters and tag.abi in abis)) and linux:
            return version
    return None
