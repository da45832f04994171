"""The plugin is one codebase that imports: the scripts it runs in sandboxes are the package
`rocm_build.scripts`, which the plugin and tests import, not bytes executed into modules of their
own (invisible to imports, dependency inference, type checkers and editors) with siblings put
into `sys.modules` by hand."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict

PLUGIN = Path(__file__).parent
EXECUTED = re.compile(r"\bexec\(\s*(compile\(|script_bytes\()")
# An entry of sys.modules set or put by hand (`monkeypatch.setitem`, which a test undoes, aside).
MODULE_EDIT = re.compile(r"\bsys\.modules\[[^\]]+\]\s*=(?!=)|\bsys\.modules\.(setdefault|update)\(")
# Inside kernel venvs, the importlib recipe for a file that is no module of ours: the workload a
# test names, and the compile-only driver under a name the upstream's own `triton_kernels` keeps.
LOADERS = {"scripts/triton_kernels.py", "scripts/upstream_choices.py"}


def sources() -> Dict[str, str]:
    return {str(p.relative_to(PLUGIN)): p.read_text() for p in sorted(PLUGIN.rglob("*.py")) if p.name != Path(__file__).name}


def test_no_code_is_executed_from_bytes() -> None:
    files = sources()
    assert len(files) > 100 and "scripts/wheel_files.py" in files  # the whole plugin is read
    assert [path for path, text in files.items() if EXECUTED.search(text)] == []


def test_no_module_is_put_into_sys_modules_by_hand() -> None:
    assert [path for path, text in sources().items() if MODULE_EDIT.search(text) and path not in LOADERS] == []


def test_the_scripts_are_a_package_the_plugin_imports() -> None:
    assert (PLUGIN / "scripts" / "__init__.py").is_file()
    imported = [path for path, text in sources().items() if re.search(r"^from rocm_build\.scripts import ", text, re.M)]
    assert "install/supply_chain.py" in imported and "pins/tables.py" in imported
