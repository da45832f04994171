"""What the plugin uses of Pants that newer Pants moved or removed, counted from the source.

Usage: python pants_api_report.py [ROOT]   (ROOT: the repository; prints Markdown)

- `Get` and `MultiGet` call sites (warned about in Pants 2.30/2.31, removed in 2.32 with the
  `migrate-call-by-name` goal), and how many sit in plain async helpers, which that goal does
  not rewrite;
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
from typing import Dict, List, Tuple

PLUGIN = "rules/rocm_build"
RULE_DECORATORS = {"rule", "goal_rule", "_uncacheable_rule"}
MOVED = {
    "pants.core.util_rules.environments": (
        "2.28", "pants.core.environments.target_types and .rules (pantsbuild/pants#22438)"
    ),
}  # fmt: skip
REMOVED_OPTIONS = {
    "remote_oauth_bearer_token_path": ("2.23", "PANTS_REMOTE_OAUTH_BEARER_TOKEN=@/path (pantsbuild/pants#21041)"),
}


def _name(node: ast.AST) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def engine_calls(tree: ast.Module) -> Tuple[int, int, int]:
    """(Get calls, MultiGet calls, Get calls in async functions that are not rules)."""
    gets = multi = in_helpers = 0
    for function in ast.walk(tree):
        if not isinstance(function, ast.AsyncFunctionDef):
            continue
        is_rule = any(_name(d.func if isinstance(d, ast.Call) else d) in RULE_DECORATORS for d in function.decorator_list)
        for node in ast.walk(function):
            if isinstance(node, ast.Call) and _name(node.func) in ("Get", "MultiGet"):
                if _name(node.func) == "Get":
                    gets += 1
                    in_helpers += 0 if is_rule else 1
                else:
                    multi += 1
    return gets, multi, in_helpers


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


def report(root: Path) -> str:
    modules: Dict[str, Tuple[int, int, int]] = {}
    moved: Dict[str, List[str]] = {}
    options: Dict[str, List[str]] = {}
    for path in scanned_files(root):
        rel = str(path.relative_to(root))
        if rel.startswith(PLUGIN) and rel.endswith(".py") and not rel.endswith("_test.py"):
            tree = ast.parse(path.read_text(), rel)
            counts = engine_calls(tree)
            if any(counts):
                modules[rel] = counts
            for module, fallback in moved_imports(tree):
                moved.setdefault(module, []).append(f"`{rel}`{' (as the fallback)' if fallback else ''}")
        if not rel.startswith(("rules/rocm_build/programs/pants_api_report", "docs/pants-versions.md")):  # they name it to say why
            text = path.read_text(errors="replace").lower()  # the option, or its PANTS_... variable
            for option in REMOVED_OPTIONS:
                if option in text:
                    options.setdefault(option, []).append(rel)
    gets, multi, helpers = (sum(c[i] for c in modules.values()) for i in range(3))
    lines = [
        f"- `Get`: {gets} call sites, {helpers} of them in plain async helpers (not rewritten by `pants migrate-call-by-name`)",
        f"- `MultiGet`: {multi} call sites",
        f"- modules with either: {len(modules)}",
    ]
    for module, (since, where) in MOVED.items():
        users = moved.get(module, [])
        lines.append(f"- `{module}` (moved in {since} to {where}): imported by {len(users)} module(s){': ' if users else ''}{', '.join(users)}")
    for option, (since, instead) in REMOVED_OPTIONS.items():
        users = options.get(option, [])
        lines.append(f"- option `{option}` (removed in {since}; {instead}): named in {len(users)} file(s){': ' if users else ''}{', '.join(f'`{u}`' for u in users)}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(report(Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()))
