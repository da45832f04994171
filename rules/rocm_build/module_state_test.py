"""No module of the plugin keeps state it changes at run time: pantsd runs rules on several
threads, and under free-threaded Python a module dict two of them fill, or a global one of them
rebinds, is a race. State between runs is a value a rule is handed (a rule result, as
goals/package.py's DistHashes), a memoized pure function, or the engine's own memo.

Read from the source: a `global` statement in a function, or a module-level dict, list or set
that a function changes (an item set or deleted, a mutating method called). Left out: the
scripts that run as their own processes in sandboxes (scripts/), the loading of them
(script_modules.py, sandbox_scripts.py), and tests."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import List, Set

PLUGIN = Path(__file__).parent
LEFT_OUT = {"script_modules.py", "sandbox_scripts.py"}
MUTATING = {"append", "extend", "insert", "update", "setdefault", "pop", "popitem", "clear", "add", "discard", "remove"}
CONTAINERS = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)
CONTAINER_CALLS = {"dict", "list", "set", "defaultdict", "OrderedDict", "Counter", "deque"}


def module_containers(tree: ast.Module) -> Set[str]:
    """The names a module binds to a mutable container at its top level."""
    names = set()
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        called = value.func if isinstance(value, ast.Call) else None
        if isinstance(value, CONTAINERS) or getattr(called, "id", getattr(called, "attr", None)) in CONTAINER_CALLS:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def changed_at_run_time(source: str) -> List[str]:
    """What a function of this module does to module state: one line each."""
    tree = ast.parse(source)
    containers = module_containers(tree)
    found = []
    for function in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        for node in ast.walk(function):
            if isinstance(node, ast.Global):
                found.append(f"line {node.lineno}: `global {', '.join(node.names)}` in {function.name}()")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATING:
                if isinstance(node.func.value, ast.Name) and node.func.value.id in containers:
                    found.append(f"line {node.lineno}: {function.name}() calls {node.func.value.id}.{node.func.attr}()")
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
                targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in containers:
                        found.append(f"line {node.lineno}: {function.name}() sets an item of {t.value.id}")
    return found


def plugin_modules() -> List[Path]:
    return sorted(
        p for p in PLUGIN.rglob("*.py")
        if "scripts" not in p.relative_to(PLUGIN).parts[:1] and p.name not in LEFT_OUT and not p.name.endswith("_test.py")
    )  # fmt: skip


def test_the_check_finds_each_way_of_changing_module_state() -> None:
    source = (
        "CACHE = {}\nSEEN: list = []\nNAMES = set()\nLIMIT = 3\n_asked = None\n"
        "def a(k):\n    CACHE[k] = 1\n"
        "def b(k):\n    SEEN.append(k)\n"
        "def c():\n    global _asked\n    _asked = 1\n"
        "def d(k):\n    NAMES.add(k)\n    local = {}\n    local[k] = LIMIT\n    return CACHE.get(k)\n"
    )
    assert changed_at_run_time(source) == [
        "line 7: a() sets an item of CACHE",
        "line 9: b() calls SEEN.append()",
        "line 11: `global _asked` in c()",
        "line 14: d() calls NAMES.add()",
    ]


def test_no_module_of_the_plugin_changes_its_state_at_run_time() -> None:
    modules = plugin_modules()
    assert len(modules) > 100 and PLUGIN / "goals" / "package_summary.py" in modules
    found = {str(p.relative_to(PLUGIN)): changed_at_run_time(p.read_text()) for p in modules}
    assert {path: lines for path, lines in found.items() if lines} == {}
