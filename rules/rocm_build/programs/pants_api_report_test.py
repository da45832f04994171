"""docs/pants-versions.md carries the report of the tree as it is."""

from __future__ import annotations

import ast
from pathlib import Path

from rocm_build.programs.pants_api_report import moved_imports, report

START, END = "<!-- pants-api-report -->\n", "<!-- /pants-api-report -->"


def test_the_page_shows_the_counts_of_this_tree() -> None:
    page = Path("docs/pants-versions.md").read_text()
    shown = page[page.index(START) + len(START) : page.index(END)]
    assert shown == report(Path(".")), "regenerate it: python3 rules/rocm_build/programs/pants_api_report.py ."


def test_the_moved_environment_types_are_imported_in_one_module_only_as_the_fallback() -> None:
    assert "imported by 1 module(s): `rules/rocm_build/pants_environments.py` (as the fallback)\n" in report(Path("."))


def test_an_import_of_a_moved_module_is_a_fallback_only_in_an_except_import_error() -> None:
    old = "from pants.core.util_rules.environments import EnvironmentTarget"
    new = "from pants.core.environments.target_types import EnvironmentTarget"
    assert moved_imports(ast.parse(old)) == [("pants.core.util_rules.environments", False)]
    guarded = f"try:\n    {new}\nexcept ImportError:\n    {old}\n"
    assert moved_imports(ast.parse(guarded)) == [("pants.core.util_rules.environments", True)]
    other = f"try:\n    {new}\nexcept KeyError:\n    {old}\n"
    assert moved_imports(ast.parse(other)) == [("pants.core.util_rules.environments", False)]
