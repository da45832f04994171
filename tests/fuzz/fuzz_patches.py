"""Fuzz target: reading patches (scripts/apply_patches.py): unified diff headers and the
paths they touch, anchored edit files (*.edit.toml), and `--touched`. Intended errors: the
script's own refusal (exit 2 with a message naming the patch file); never a traceback, and
no path it lets through may be absolute or climb out of the tree."""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import shutil
import sys
import tempfile


from rocm_build.scripts import apply_patches as APPLY

INSTRUMENTED = [APPLY]
# Inputs in the suite's run (~3 s here; a 12 s run (60k inputs) covered no more).
RUNS = 16_384
WORK = tempfile.mkdtemp(prefix="fuzz-patches-")
atexit.register(shutil.rmtree, WORK, True)  # as fuzz_box's: each run left one in /tmp
DIFF, EDIT = os.path.join(WORK, "0001-fix.patch"), os.path.join(WORK, "0002-fix.edit.toml")

SEEDS = [
    b"\x00diff --git a/src/x.c b/src/x.c\nindex 1..2 100644\n--- a/src/x.c\n+++ b/src/x.c\n@@ -1 +1 @@\n-a\n+b\n"
    b"diff --git a/old b/new\nsimilarity index 90%\nrename from old\nrename to new\n--- /dev/null\n+++ b/NOTES.md\n",
    b'\x01[[edit]]\npath = "setup.py"\npattern = "^ARCHS = .*$"\nreplace = "ARCHS = [\\"gfx1151\\"]"\ncount = 1\n'
    b'applied = "gfx1151"\n\n[[edit]]\npath = "CMakeLists.txt"\npattern = "x"\nreplace = "y"\n',
]


def test_one_input(data: bytes) -> None:
    if not data:
        return
    patch = EDIT if data[0] % 2 else DIFF
    with open(patch, "wb") as f:
        f.write(data[1:])
    try:
        with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()):
            APPLY.list_touched([patch])
    except SystemExit as e:
        assert e.code == 2, e.code
        return
    for path in APPLY.json.loads(out.getvalue()):
        assert not path.startswith("/") and ".." not in path.split("/"), path


if __name__ == "__main__":
    from fuzz.harness import main

    main(sys.modules[__name__], sys.argv)
