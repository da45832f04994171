from __future__ import annotations

from rocm_build.upstream.patch_headers import header_fields, header_of, header_problem, missing_keys

DIFF = """\
--- a/setup.py
+++ b/setup.py
@@ -1 +1 @@
-ARCHS = ['gfx90a']
+ARCHS = ['gfx90a', 'gfx1151']
"""

HEADER = """\
Add gfx1151 to the archs.

Why: the pinned setup.py builds no code for gfx1151.
Upstream: https://example.invalid/pr/1
(merged in 2.0)
Drop when: the pin is at 2.0 or later.
"""


def test_a_diffs_header_is_the_text_before_its_first_file() -> None:
    text = HEADER + "\n" + DIFF
    assert header_of("0001-a.patch", text) == HEADER + ""
    assert header_fields(header_of("0001-a.patch", text)) == {
        "Why": "the pinned setup.py builds no code for gfx1151.",
        "Upstream": "https://example.invalid/pr/1 (merged in 2.0)",
        "Drop when": "the pin is at 2.0 or later.",
    }
    assert missing_keys(header_of("0001-a.patch", text)) == []
    assert header_problem("0001-a.patch", text) is None


def test_a_git_diff_and_format_patch_separator() -> None:
    # `---` alone (format-patch's separator) is header text; `diff --git` starts the patch, and
    # a key inside the diff (an added line) is not a header.
    text = "Why: x\nUpstream: none\n---\n" + "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -0,0 +1 @@\n+Drop when: never\n"
    assert header_of("x.diff", text) == "Why: x\nUpstream: none\n---"
    assert missing_keys(header_of("x.diff", text)) == ["Drop when"]


def test_a_minus_line_that_is_not_a_file_header_stays_in_the_header() -> None:
    text = "Why: a\n--- not a file\nUpstream: b\nDrop when: c\n\n" + DIFF
    assert missing_keys(header_of("p.patch", text)) == []


def test_an_edits_header_is_its_leading_comments() -> None:
    text = (
        "# Why: the arch list stops at gfx12.\n"
        "# Upstream: none found\n"
        "#   (checked 2026-01)\n"
        "#\n"
        "# Drop when: upstream lists gfx1151.\n"
        '[[edit]]\npath = "a.py"\n# Upstream: a comment inside the edits is not the header\n'
    )
    assert header_fields(header_of("0001.edit.toml", text)) == {
        "Why": "the arch list stops at gfx12.",
        "Upstream": "none found (checked 2026-01)",
        "Drop when": "upstream lists gfx1151.",
    }


def test_keys_are_found_in_any_case_and_empty_values_count_as_missing() -> None:
    assert missing_keys("WHY: a\nupstream:\nDrop When: b") == ["Upstream"]
    assert missing_keys("Why:\n\nsomething") == ["Why", "Upstream", "Drop when"]


def test_the_problem_names_the_file_the_missing_keys_and_where_they_go() -> None:
    problem = header_problem("tests/mini/patches/vllm/0001-report-gfx1151.patch", "Make it say gfx1151.\n\n" + DIFF)
    assert problem is not None
    assert problem.startswith("tests/mini/patches/vllm/0001-report-gfx1151.patch: its header has no `Why:`, `Upstream:`, `Drop when:`.")
    assert "in the text before its first `diff --git`/`---` line" in problem
    edit = header_problem("p/0002-x.edit.toml", "# Why: a\n# Drop when: b\n[[edit]]\n")
    assert edit is not None and "has no `Upstream:`" in edit and "add a line `Upstream: ...`" in edit
    assert "before its first [[edit]]" in edit



def test_a_byte_order_mark_before_why_is_not_part_of_the_key() -> None:
    text = "\ufeff" + "Why: a\nUpstream: none\nDrop when: c\n\n" + DIFF
    assert header_fields(header_of("0001-bom.patch", text)) == {"Why": "a", "Upstream": "none", "Drop when": "c"}
    assert header_problem("0001-bom.patch", text) is None
    edit = "\ufeff# Why: a\n# Upstream: none\n# Drop when: c\n[[edit]]\n"
    assert missing_keys(header_of("0001-bom.edit.toml", edit)) == []
