"""docs/pants-versions.md carries the report of the tree as it is."""

from __future__ import annotations

from pathlib import Path

from rocm_build.programs.pants_api_report import report

START, END = "<!-- pants-api-report -->\n", "<!-- /pants-api-report -->"


def test_the_page_shows_the_counts_of_this_tree() -> None:
    page = Path("docs/pants-versions.md").read_text()
    shown = page[page.index(START) + len(START) : page.index(END)]
    assert shown == report(Path(".")), "regenerate it: python3 rules/rocm_build/programs/pants_api_report.py ."


def test_the_moved_environment_types_are_imported_in_one_module() -> None:
    assert "imported by 1 module(s): `rules/rocm_build/pants_environments.py`" in report(Path("."))
