"""What the plugin uses of Pants that newer Pants moved or removed, counted from the source.

Usage: python pants_api_report.py [--write] [ROOT]   (ROOT: the repository; prints Markdown,
or with --write puts it between the markers of ROOT/docs/pants-versions.md)

- `Get` and `MultiGet` call sites (warned about in Pants 2.30/2.31, removed in 2.32 with the
  `migrate-call-by-name` goal), each `Get` classified as one that goal rewrites or one to migrate
  by hand, with the reason, by module (see `get_sites`);
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
from typing import Dict, List, Optional, Tuple

PLUGIN = "rules/rocm_build"
# The decorators whose `async def`s `pants migrate-call-by-name` visits, as plain names
# (`@rule`, `@rule(...)`); it visits no other function, nor an attribute form (`@rules.rule`).
RULE_DECORATORS = {"rule", "goal_rule"}
MOVED = {
    "pants.core.util_rules.environments": (
        "2.28", "pants.core.environments.target_types and .rules (pantsbuild/pants#22438)"
    ),
}  # fmt: skip
REMOVED_OPTIONS = {
    "remote_oauth_bearer_token_path": ("2.23", "PANTS_REMOTE_OAUTH_BEARER_TOKEN=@/path (pantsbuild/pants#21041)"),
}

# What becomes of a `Get` call site under `pants migrate-call-by-name` (Pants 2.2x,
# src/python/pants/goal/migrate_call_by_name.py): rewritten, or left to migrate by hand, for the
# first of these reasons that holds, in the order the goal meets them.
REWRITTEN = "rewritten"
IN_A_HELPER = "in a helper"  # not in an `async def` the goal visits (RULE_DECORATORS; not inside another `async def`)
NESTED = "nested statement"  # in an if/for/while/try/with/match of the rule, not directly in its body
NOT_ASSIGNMENT = "not an assignment"  # its statement is no plain `x = ...` (`return`, a bare `await`, `x: T = ...`)
MULTIGET_ITERABLE = "MultiGet over an iterable"  # `x = await MultiGet(Get(...) for ...)`, `MultiGet([...])`, `*(...)`
IN_EXPRESSION = "in an expression"  # `x = ...`, but the value is not `Get(...)`, `await Get(...)` or `await MultiGet(Get(...), ...)`
FORM = "form"  # not `Get(Out)`, `Get(Out, In(...))`, `Get(Out, {...})` or `Get(Out, In, value)` with those as names
COMMENT = "comment in range"  # a `#` on one of its lines: the goal skips such a replacement
BY_HAND = (IN_A_HELPER, NESTED, NOT_ASSIGNMENT, MULTIGET_ITERABLE, IN_EXPRESSION, FORM, COMMENT)
ITERABLES = (ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.List, ast.Tuple, ast.Set, ast.Starred)
COMPOUND = tuple(
    getattr(ast, n)
    for n in ("If", "For", "AsyncFor", "While", "Try", "TryStar", "With", "AsyncWith", "Match", "ClassDef")
    if hasattr(ast, n)
)


def _name(node: ast.AST) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def _plain(node: ast.AST, name: str) -> bool:
    """A call to the plain name `name` (the goal matches no attribute form)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name


def visited_by_the_goal(function: ast.AST) -> bool:
    """An `async def` decorated `@rule`, `@goal_rule`, or either called with arguments."""
    if not isinstance(function, ast.AsyncFunctionDef):
        return False
    decorators = [d.func if isinstance(d, ast.Call) else d for d in function.decorator_list]
    return any(isinstance(d, ast.Name) and d.id in RULE_DECORATORS for d in decorators)


def _has_the_form(get: ast.Call) -> bool:
    """One of the four forms the goal maps, with the names it looks the rule up by."""
    args = get.args
    if not args or not isinstance(args[0], ast.Name):
        return False
    if len(args) == 1:
        return True
    if len(args) == 2 and isinstance(args[1], ast.Call):
        return isinstance(args[1].func, ast.Name)
    if len(args) == 2 and isinstance(args[1], ast.Dict):
        return all(isinstance(v, ast.Name) for v in args[1].values)
    return len(args) == 3 and isinstance(args[1], ast.Name)


def _fate(get: ast.Call, statement: Optional[ast.stmt], lines: List[str]) -> str:
    """REWRITTEN, or why not, for a `Get` call in `statement` (a statement directly in the body of
    a rule the goal visits; None: it is not in one)."""
    if statement is None:
        return IN_A_HELPER
    if isinstance(statement, COMPOUND):
        return NESTED
    if not isinstance(statement, ast.Assign):
        return NOT_ASSIGNMENT
    value = statement.value
    awaited = value.value if isinstance(value, ast.Await) else value
    if awaited is not get:
        if not (isinstance(value, ast.Await) and isinstance(awaited, ast.Call) and _plain(awaited, "MultiGet")):
            return IN_EXPRESSION
        arg = next((a for a in awaited.args if any(n is get for n in ast.walk(a))), None)
        if arg is None or (arg is not get and not isinstance(arg, ITERABLES)):
            return IN_EXPRESSION
        if arg is not get:
            return MULTIGET_ITERABLE
    if not _plain(get, "Get") or not _has_the_form(get):
        return FORM
    if any("#" in lines[n - 1] for n in range(get.lineno, (get.end_lineno or get.lineno) + 1)):
        return COMMENT
    return REWRITTEN


def get_sites(tree: ast.Module, source: str) -> List[Tuple[int, str]]:
    """(line, REWRITTEN or the reason it is left by hand) for each `Get(...)` call, in the order of
    the source. The goal also needs the rule graph: it skips a `Get` it finds no rule for, and the
    `Get`s of a rule that is not registered; this counts them as rewritten."""
    lines = source.splitlines()
    sites: List[Tuple[int, int, str]] = []

    def scan(node: ast.AST, statement: Optional[ast.stmt], in_async: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # The goal does not look inside an `async def`'s nested functions.
            body = {id(s): s for s in node.body} if not in_async and visited_by_the_goal(node) else {}
            for child in ast.iter_child_nodes(node):
                scan(child, body.get(id(child)), in_async or isinstance(node, ast.AsyncFunctionDef))
            return
        if isinstance(node, ast.Call) and _name(node.func) == "Get":
            sites.append((node.lineno, node.col_offset, _fate(node, statement, lines)))
        for child in ast.iter_child_nodes(node):
            scan(child, statement, in_async)

    scan(tree, None, False)
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
    for path in scanned_files(root):
        rel = str(path.relative_to(root))
        if rel.startswith(PLUGIN) and rel.endswith(".py") and not rel.endswith("_test.py"):
            source = path.read_text()
            tree = ast.parse(source, rel)
            fates, multi = [fate for _, fate in get_sites(tree, source)], multiget_sites(tree)
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
        f"- `MultiGet`: {sum(multi for _, multi in modules.values())} call sites (the goal rewrites the `Get`s in them, not the `MultiGet`)",
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
