"""Our sandbox scripts (rules/rocm_build/scripts/, stdlib only) as modules, for fuzz targets
that run with another interpreter than the plugin's (apply_patches.py needs 3.11's tomllib)."""

from __future__ import annotations

import os
import sys
import types

RELATIVE = os.path.join("rocm_build", "scripts")


def load_script(name: str, *imports: str) -> types.ModuleType:
    """The script `name` as a module; `imports`: the sibling scripts it imports, loaded first
    (in a sandbox they sit beside it)."""
    for sibling in imports:
        sys.modules.setdefault(sibling[: -len(".py")], load_script(sibling))
    # The scripts are resources of rules/rocm_build: under a source root on sys.path, or at
    # rules/ from the build root (`pants run` works there).
    roots = [*sys.path, os.path.join(os.getcwd(), "rules")]
    for root in roots:
        path = os.path.join(root, RELATIVE, name)
        if os.path.isfile(path):
            module = types.ModuleType(name[: -len(".py")])
            module.__file__ = path
            sys.modules[module.__name__] = module  # dataclasses look their module up there
            with open(path, "rb") as f:
                exec(compile(f.read(), path, "exec"), module.__dict__)
            return module
    raise FileNotFoundError(f"{RELATIVE}/{name} is on none of {roots}")
