"""Our helper scripts (rules/rocm_build/scripts/) as modules of the plugin. Standard library only,
so code that needs no engine (the pins models) imports them without importing Pants."""

from __future__ import annotations

import pkgutil
import sys
import types

SCRIPTS_DIR = "__rocm_build"


def script_bytes(name: str) -> bytes:
    data = pkgutil.get_data(__name__, f"scripts/{name}")
    assert data is not None, name
    return data


def load_script(name: str, *imports: str) -> types.ModuleType:
    """A script that also runs in process sandboxes (stdlib only), as a module of the plugin,
    from the same bytes the sandboxes get, so both sides decide alike. `imports`: the sibling
    scripts it imports (in a sandbox they sit beside it)."""
    for sibling in imports:
        sys.modules.setdefault(sibling[: -len(".py")], load_script(sibling))
    module = types.ModuleType(name[: -len(".py")])
    exec(compile(script_bytes(name), f"{SCRIPTS_DIR}/{name}", "exec"), module.__dict__)
    return module
