"""Our helper scripts (rules/rocm_build/scripts/), as files for a process sandbox."""

from __future__ import annotations

from pants.engine.fs import CreateDigest, FileContent

from rocm_build.script_modules import SCRIPTS_DIR, script_bytes

__all__ = ["SCRIPTS_DIR", "script_bytes", "script_files"]


def script_files(*names: str) -> CreateDigest:
    """The scripts `names` under SCRIPTS_DIR/: a rule asks `Get(Digest, script_files(...))`."""
    return CreateDigest([FileContent(f"{SCRIPTS_DIR}/{n}", script_bytes(n)) for n in names])
