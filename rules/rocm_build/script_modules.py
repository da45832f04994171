"""The bytes of our helper scripts (rules/rocm_build/scripts/, the package `rocm_build.scripts`),
as the plugin ships them into process sandboxes. Standard library only, so code that needs no
engine (the pins models) reads them without importing Pants."""

from __future__ import annotations

import pkgutil

SCRIPTS_DIR = "__rocm_build"


def script_bytes(name: str) -> bytes:
    data = pkgutil.get_data(__name__, f"scripts/{name}")
    assert data is not None, name
    return data
