"""Our helper scripts (rules/rocm_build/scripts/), as files for a process sandbox."""

from __future__ import annotations

from pants.engine.fs import CreateDigest, Digest, FileContent
from pants.engine.rules import Get

from rocm_build.script_modules import SCRIPTS_DIR, load_script, script_bytes

__all__ = ["SCRIPTS_DIR", "load_script", "script_bytes", "script_digest"]


async def script_digest(*names: str) -> Digest:
    return await Get(Digest, CreateDigest([FileContent(f"{SCRIPTS_DIR}/{n}", script_bytes(n)) for n in names]))
