"""Fuzz target: patch headers (upstream/patch_headers.py), as `pants lint` reads a patch file and
`patch-workspace` turns a header into a commit message and a commit message back into a saved
patch's header (upstream/workspace_repo.py). Intended errors: none, every text is a header or
the lack of one. What must hold: the keys found are KEYS' own, a problem names the file, and a
message the save accepts reads back as the same fields once saved as a patch file."""

from __future__ import annotations

import sys

from rocm_build.upstream import patch_headers, workspace_repo
from rocm_build.upstream.patch_headers import BOM, KEYS, header_fields, header_of, header_problem, missing_keys
from rocm_build.upstream.workspace_repo import commit_message, commit_problem

INSTRUMENTED = [patch_headers, workspace_repo]
# Inputs in the suite's run (~3 s here; a 12 s run (163k inputs) covered no more).
RUNS = 32_768

DIFF = "diff --git a/setup.py b/setup.py\n--- a/setup.py\n+++ b/setup.py\n@@ -1 +1 @@\n-a\n+b\n"
PATHS = ("p/0001-x.patch", "p/0002-x.diff", "p/0003-x.edit.toml")
SEEDS = [
    b"\x00Add gfx1151.\n\nWhy: the pin builds none.\nUpstream: https://example.invalid/pr/1\n(merged)\nDrop when: 2.0\n\n" + DIFF.encode(),
    b"\x02# Why: a\n# Upstream: none\n#Drop when: c\n[[edit]]\npath = \"setup.py\"\n",
    b"\x01\xef\xbb\xbfWhy: a\r\nUpstream: none\r\nDrop when: c\r\n--- a/f\r\n+++ b/f\r\n",
    b"\x00WHY : a\nupstream:\n\nDrop When: b\n--- not a file header\nIndex: x\n",
]


def test_one_input(data: bytes) -> None:
    if not data:
        return
    path = PATHS[data[0] % len(PATHS)]
    text = data[1:].decode("utf-8", "replace")
    header = header_of(path, text)
    fields = header_fields(header)
    assert set(fields) <= set(KEYS), fields
    missing = missing_keys(header)
    assert missing == [k for k in KEYS if not fields.get(k)], (missing, fields)
    problem = header_problem(path, text)
    assert (problem is None) == (not missing), problem
    assert problem is None or problem.startswith(f"{path}: its header has no "), problem
    # An editor's byte-order mark (one, where an editor writes it) changes nothing.
    if not text.startswith(BOM):
        assert header_fields(header_of(path, BOM + text)) == fields, text
    # The header as the workspace's commit message, saved again as a patch file: the same
    # fields, whenever the save accepts the message.
    message = commit_message(path, text)
    if commit_problem("0" * 40, "subject", message) is None:
        saved = f"{message}\n\n{DIFF}"
        assert header_fields(header_of("p/0004-saved.patch", saved)) == header_fields(message), (message, saved)
        assert not missing_keys(header_of("p/0004-saved.patch", saved))


if __name__ == "__main__":
    from fuzz.harness import main

    main(sys.modules[__name__], sys.argv)
