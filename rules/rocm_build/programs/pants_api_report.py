"""What the plugin uses of Pants that newer Pants moved or removed, counted from the source.

Usage: python pants_api_report.py [--write] [ROOT]   (ROOT: the repository; prints Markdown,
or with --write puts it between the markers of ROOT/docs/pants-versions.md)

- `Get` and `MultiGet` call sites (warned about in Pants 2.30/2.31, removed in 2.32 with the
  `migrate-call-by-name` goal), each `Get` classified as one that goal, as Pants 2.31 has it,
  rewrites or leaves to migrate by hand, with the reason, by module (see `get_sites`);
- imports of modules Pants moved without a shim, marked where one is only the fallback for
  older Pants (in an `except ImportError:`);
- options Pants removed, wherever a file still names them (as an option or its variable).

docs/pants-versions.md carries the output between its `pants-api-report` markers, and
pants_api_report_test.py checks that it is the output for the tree as it is.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Dict, Iterable, List, Set, Tuple

PLUGIN = "rules/rocm_build"
# The decorators that make a function a rule the engine's rule graph holds (the goal looks a
# function up there by its file and name), as the last part of their name (`@rule`,
# `@rule(...)`, `@rules.rule`).
RULE_DECORATORS = {"rule", "goal_rule", "_uncacheable_rule"}
MOVED = {
    "pants.core.util_rules.environments": (
        "2.28", "pants.core.environments.target_types and .rules (pantsbuild/pants#22438)"
    ),
}  # fmt: skip
REMOVED_OPTIONS = {
    "remote_oauth_bearer_token_path": ("2.23", "PANTS_REMOTE_OAUTH_BEARER_TOKEN=@/path (pantsbuild/pants#21041)"),
}

# What becomes of a `Get` call site under `pants migrate-call-by-name` as Pants 2.31 has it
# (src/python/pants/goal/migrate_call_by_name.py at release_2.31.0): a libcst transformer that
# replaces each call of the plain name `Get` in a function its rule graph knows as a rule of that
# file, wherever the call stands in it (a nested statement, a `return`, inside an expression, a
# MultiGet's generator), by the rule that provides it, and renames every name `MultiGet` to
# `concurrently`. It leaves a `Get` for the first of these reasons that holds:
REWRITTEN = "rewritten"
IN_A_HELPER = "in a helper"  # the innermost `def` around it is no rule of the file (or there is none)
AFTER_NESTED_DEF = "after a nested def"  # in a rule, below a `def` nested in it: leaving any `def`, the goal forgets which function it is in
FORM = "form"  # not `Get(Out)`, `Get(Out, In(...))`, `Get(Out, {v: In, ...})` or `Get(Out, In, v)` with plain names
BUILT_BY_A_CALL = "request built by a function"  # `Get(Out, make_request(...))`: it looks for a rule taking a type named `make_request`
UNION = "union"  # `Get(Out, Base, member)` over a `@union` base: no one rule provides it
BY_HAND = (IN_A_HELPER, AFTER_NESTED_DEF, FORM, BUILT_BY_A_CALL, UNION)


def _name(node: ast.AST) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def is_rule(function: ast.AST) -> bool:
    """A `def` or `async def` under one of RULE_DECORATORS, called with arguments or not."""
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    decorators = [d.func if isinstance(d, ast.Call) else d for d in function.decorator_list]
    return any(_name(d) in RULE_DECORATORS for d in decorators)


def union_bases(tree: ast.Module) -> List[str]:
    """The union bases a module declares (`@union`) or registers members of (`UnionRule(Base, ...)`)."""
    declared = [
        n.name for n in ast.walk(tree)
        if isinstance(n, ast.ClassDef)
        and any(_name(d.func if isinstance(d, ast.Call) else d) == "union" for d in n.decorator_list)
    ]  # fmt: skip
    registered = [_name(n.args[0]) for n in ast.walk(tree) if isinstance(n, ast.Call) and _name(n.func) == "UnionRule" and n.args]
    return [*declared, *(r for r in registered if r)]


def _is_type(name: str) -> bool:
    # The rule graph knows a request by its type; a name in snake_case is a function that builds
    # one, and the goal finds no rule taking a type of that name.
    return name[:1].isupper()


def _mapped(get: ast.Call, unions: Set[str]) -> str:
    """REWRITTEN, or why the goal's four mappings leave this `Get` (in a rule it knows)."""
    args = get.args
    if not isinstance(get.func, ast.Name) or get.keywords or not args or any(isinstance(a, ast.Starred) for a in args):
        return FORM
    if len(args) > 3 or not isinstance(args[0], ast.Name):
        return FORM
    if len(args) == 1:
        return REWRITTEN
    if len(args) == 2 and isinstance(args[1], ast.Call):
        if not isinstance(args[1].func, ast.Name):
            return FORM
        return REWRITTEN if _is_type(args[1].func.id) else BUILT_BY_A_CALL
    if len(args) == 2 and isinstance(args[1], ast.Dict):
        if not all(isinstance(v, ast.Name) for v in args[1].values):
            return FORM
        return UNION if any(v.id in unions for v in args[1].values) else REWRITTEN  # type: ignore[attr-defined]
    if len(args) == 3 and isinstance(args[1], ast.Name):
        return UNION if args[1].id in unions else REWRITTEN
    return FORM


def get_sites(tree: ast.Module, unions: Iterable[str] = ()) -> List[Tuple[int, str]]:
    """(line, REWRITTEN or the reason it is left by hand) for each `Get(...)` call, in the order of
    the source. `unions`: the union bases of the plugin. The goal also needs its rule graph to
    hold each rule and a rule for each `Get`; a rule the plugin registers always is there."""
    rules = {n.name for n in tree.body if is_rule(n)}
    bases = set(unions)
    sites: List[Tuple[int, int, str]] = []
    current = [""]  # the function the goal believes it is in (its `calling_function`)

    def scan(node: ast.AST, in_rule: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                current[0] = child.name
                scan(child, in_rule or child.name in rules)
                current[0] = ""
                continue
            scan(child, in_rule)
            if isinstance(child, ast.Call) and _name(child.func) == "Get":
                if current[0] in rules:
                    fate = _mapped(child, bases)
                else:
                    fate = AFTER_NESTED_DEF if in_rule and not current[0] else IN_A_HELPER
                sites.append((child.lineno, child.col_offset, fate))

    scan(tree, False)
    return [(line, fate) for line, _, fate in sorted(sites)]


def multiget_sites(tree: ast.Module) -> int:
    return sum(1 for n in ast.walk(tree) if isinstance(n, ast.Call) and _name(n.func) == "MultiGet")


def moved_imports(tree: ast.Module) -> List[Tuple[str, bool]]:
    """(moved module, whether it is a fallback: imported in an `except ImportError:`, after the
    `try:` tried the new module) for each import of a moved module."""
    fallbacks = {
        id(node)
        for handler in ast.walk(tree)
        if isinstance(handler, ast.ExceptHandler) and _name(handler.type) == "ImportError"  # type: ignore[arg-type]
        for node in ast.walk(handler)
    }
    return [
        (n.module, id(n) in fallbacks)  # type: ignore[misc]
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and n.module in MOVED
    ]


# What is read: the plugin's modules for calls and imports; these files for option names. The
# test's sandbox holds the same files (//:pants-api-sources), so the counts agree.
SCANNED = ("rules/**/*.py", "tests/**/*.py", "*.toml", "README.md", "components/**/*.md", "docs/*.md")


def scanned_files(root: Path) -> List[Path]:
    found = {p for pattern in SCANNED for p in root.glob(pattern) if p.is_file() and "__pycache__" not in p.parts}
    return sorted(p for p in found if not str(p.relative_to(root)).startswith(("tests/mini/upstreams",)))


def _reasons(fates: List[str]) -> str:
    return ", ".join(f"{reason} {fates.count(reason)}" for reason in BY_HAND if reason in fates)


def report(root: Path) -> str:
    modules: Dict[str, Tuple[List[str], int]] = {}  # module: (the fate of each Get, MultiGet sites)
    moved: Dict[str, List[str]] = {}
    options: Dict[str, List[str]] = {}
    files = scanned_files(root)
    plugin = {
        str(p.relative_to(root)): ast.parse(p.read_text(), str(p))
        for p in files
        if str(p.relative_to(root)).startswith(PLUGIN) and p.suffix == ".py" and not p.name.endswith("_test.py")
    }
    unions = {base for tree in plugin.values() for base in union_bases(tree)}
    for path in files:
        rel = str(path.relative_to(root))
        if rel in plugin:
            tree = plugin[rel]
            fates, multi = [fate for _, fate in get_sites(tree, unions)], multiget_sites(tree)
            if fates or multi:
                modules[rel] = (fates, multi)
            for module, fallback in moved_imports(tree):
                moved.setdefault(module, []).append(f"`{rel}`{' (as the fallback)' if fallback else ''}")
        if not rel.startswith(("rules/rocm_build/programs/pants_api_report", "docs/pants-versions.md")):  # they name it to say why
            text = path.read_text(errors="replace").lower()  # the option, or its PANTS_... variable
            for option in REMOVED_OPTIONS:
                if option in text:
                    options.setdefault(option, []).append(rel)
    every = [fate for fates, _ in modules.values() for fate in fates]
    by_hand = [fate for fate in every if fate != REWRITTEN]
    lines = [
        f"- `Get`: {len(every)} call sites in {len(modules)} modules: {every.count(REWRITTEN)} rewritten by "
        f"`pants migrate-call-by-name`, {len(by_hand)} by hand{f' ({_reasons(by_hand)})' if by_hand else ''}",
        f"- `MultiGet`: {sum(multi for _, multi in modules.values())} call sites, each renamed `concurrently` by the goal",
        "",
        "| module | `Get` | rewritten | by hand | by hand, why |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for rel, (fates, _) in sorted(modules.items()):
        hand = [fate for fate in fates if fate != REWRITTEN]
        lines.append(f"| `{rel}` | {len(fates)} | {fates.count(REWRITTEN)} | {len(hand)} | {_reasons(hand)} |")
    lines.append("")
    for module, (since, where) in MOVED.items():
        users = moved.get(module, [])
        lines.append(f"- `{module}` (moved in {since} to {where}): imported by {len(users)} module(s){': ' if users else ''}{', '.join(users)}")
    for option, (since, instead) in REMOVED_OPTIONS.items():
        users = options.get(option, [])
        lines.append(f"- option `{option}` (removed in {since}; {instead}): named in {len(users)} file(s){': ' if users else ''}{', '.join(f'`{u}`' for u in users)}")
    return "\n".join(lines) + "\n"


PAGE = "docs/pants-versions.md"
START, END = "<!-- pants-api-report -->\n", "<!-- /pants-api-report -->"


def shown_on_page(page: str) -> str:
    """The report as the page carries it (between its markers)."""
    return page[page.index(START) + len(START) : page.index(END)]


def write_page(root: Path) -> None:
    path = root / PAGE
    page = path.read_text()
    path.write_text(page.replace(shown_on_page(page), report(root), 1))


if __name__ == "__main__":
    args = sys.argv[1:]
    write = "--write" in args
    root = Path(next((a for a in args if a != "--write"), ".")).resolve()
    if write:
        write_page(root)
    else:
        sys.stdout.write(report(root))
