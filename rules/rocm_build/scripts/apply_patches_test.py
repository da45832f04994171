"""scripts/apply_patches.py with real `git diff` patches and real `git apply`: the paths a
patch touches as git reads them (spaces, quoted non-ASCII names, renames), and every patch
that reaches outside the tree, into `.git/` or through a link refused before anything is
applied, naming the patch file and the line (or edit)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List

import pytest

from rocm_build.testutil.git_fixtures import GIT_ENV, commit_files, git, init_repo
from rocm_build.sandbox_scripts import script_bytes

# The interpreter the build runs the script with (it needs 3.11's tomllib).
PYTHON = shutil.which("python3", path="/usr/bin:/bin") or "python3"
SETUP = "print('hello')\n"
PATCH = "--- a/setup.py\n+++ b/setup.py\n@@ -1 +1 @@\n-print('hello')\n+print('hello gfx1151')\n"


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    script = tmp_path / "apply_patches.py"
    script.write_bytes(script_bytes("apply_patches.py"))
    env = {"PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
    return subprocess.run([PYTHON, str(script), *args], cwd=tmp_path, env=env, capture_output=True, text=True)


def write_patches(tmp_path: Path, patches: Dict[str, str]) -> List[str]:
    (tmp_path / "patches").mkdir(exist_ok=True)
    for name, text in patches.items():
        (tmp_path / "patches" / name).write_text(text)
    return [f"patches/{name}" for name in patches]


def git_diff(repo: Path, *args: str) -> str:
    """`git diff` as a patch file holds it (what git_fixtures.git would strip matters here)."""
    env = {**os.environ, **GIT_ENV}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout


def files(root: Path) -> Dict[str, str]:
    """Every file and link under root: its content, or `-> target` for a link."""
    found = {}
    for top, dirs, names in os.walk(root):
        for name in dirs + names:
            path = Path(top) / name
            if path.is_symlink():
                found[str(path.relative_to(root))] = f"-> {os.readlink(path)}"
            elif path.is_file():
                found[str(path.relative_to(root))] = path.read_text()
    return found


@pytest.fixture
def unusual_names(tmp_path: Path) -> str:
    """A real `git diff` (quoted form) changing `foo bar.txt` and `é.txt`, renaming old.txt."""
    repo = init_repo(tmp_path / "upstream")
    commit_files(repo, {"foo bar.txt": "x\n", "é.txt": "y\n", "old.txt": "z\nzz\nzzz\n"})
    (repo / "foo bar.txt").write_text("x2\n")
    (repo / "é.txt").write_text("y2\n")
    git(repo, "mv", "old.txt", "new é.txt")
    patch = git_diff(repo, "-c", "core.quotepath=true", "diff", "-M", "HEAD")
    assert '"b/\\303\\251.txt"' in patch and "--- a/foo bar.txt\t" in patch  # the forms a `(\S+)` regex misread
    return patch


def test_touched_paths_are_read_as_git_reads_them(tmp_path, unusual_names) -> None:
    result = run(tmp_path, "--touched", *write_patches(tmp_path, {"0001-names.patch": unusual_names}))
    assert (result.returncode, result.stderr) == (0, "")
    assert json.loads(result.stdout) == ["foo bar.txt", "new é.txt", "old.txt", "é.txt"]


def test_a_patch_with_unusual_names_applies(tmp_path, unusual_names) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    for name, text in {"foo bar.txt": "x\n", "é.txt": "y\n", "old.txt": "z\nzz\nzzz\n"}.items():
        (tree / name).write_text(text)
    result = run(tmp_path, "tree", *write_patches(tmp_path, {"0001-names.patch": unusual_names}))
    assert (result.returncode, result.stdout) == (0, "applied patches/0001-names.patch\n"), result.stderr
    assert files(tree) == {"foo bar.txt": "x2\n", "é.txt": "y2\n", "new é.txt": "z\nzz\nzzz\n"}


def test_a_rename_from_line_in_a_commit_message_is_not_a_path(tmp_path) -> None:
    message = "From 1 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] x\n\nrename from ../../etc/passwd\n---\n"
    result = run(tmp_path, "--touched", *write_patches(tmp_path, {"0001-x.patch": message + "diff --git a/setup.py b/setup.py\n" + PATCH}))
    assert (result.returncode, json.loads(result.stdout)) == (0, ["setup.py"]), result.stderr


OUTSIDE = "which is outside the source tree; patches may only change files inside the repository (use paths relative to its root)"
IN_GIT = "inside a `.git` directory; patches change the source, never git's own files (hooks, config)"


@pytest.mark.parametrize(
    "patch, message",
    [
        pytest.param(PATCH.replace("/setup.py", "/../setup.py"), f"patches/0002-evil.patch, line 1: touches `../setup.py`, {OUTSIDE}", id="dotdot"),
        pytest.param(PATCH.replace("a/setup.py", "a//etc/passwd").replace("b/setup.py", "b//etc/passwd"), f"patches/0002-evil.patch, line 1: touches `/etc/passwd`, {OUTSIDE}", id="absolute"),
        pytest.param(PATCH.replace("setup.py", ".git/hooks/post-checkout"), f"patches/0002-evil.patch, line 1: touches `.git/hooks/post-checkout`, {IN_GIT}", id="dot-git"),
        pytest.param(PATCH.replace("setup.py", "sub/.GIT/config"), f"patches/0002-evil.patch, line 1: touches `sub/.GIT/config`, {IN_GIT}", id="dot-git-upper"),
        pytest.param(
            "diff --git a/../secret b/stolen\nsimilarity index 100%\nrename from ../secret\nrename to stolen\n",
            f"patches/0002-evil.patch, line 1: touches `../secret`, {OUTSIDE}", id="rename-from-outside",
        ),
        pytest.param(PATCH.replace("a/setup.py", '"a/x\\tb.py"').replace("b/setup.py", '"b/x\\tb.py"'), "patches/0002-evil.patch, line 1: touches `x\tb.py`, whose name has a control character", id="control-character"),
        pytest.param(PATCH.replace("setup.py", "linked/setup.py"), "patches/0002-evil.patch, line 1: touches `linked/setup.py` through the symbolic link `linked` (to `../outside`, outside the source tree); patch the file the link points to instead", id="through-link-out"),
        pytest.param(PATCH.replace("setup.py", "alias/setup.py"), "patches/0002-evil.patch, line 1: touches `alias/setup.py` through the symbolic link `alias` (to `pkg`); patch the file the link points to instead", id="through-link-in"),
        pytest.param('[[edit]]\npath = "../outside/secret"\npattern = "s"\nreplace = "x"\n', f"patches/0002-evil.edit.toml, edit 1: touches `../outside/secret`, {OUTSIDE}", id="edit-dotdot"),
        pytest.param(f'[[edit]]\npath = "setup.py"\npattern = "hello"\nreplace = "x"\n\n[[edit]]\npath = "OUTSIDE/secret"\npattern = "s"\nreplace = "x"\n', f"patches/0002-evil.edit.toml, edit 2: touches `OUTSIDE/secret`, {OUTSIDE}", id="edit-absolute"),
        pytest.param('[[edit]]\npath = ".git/config"\npattern = "s"\nreplace = "x"\n', f"patches/0002-evil.edit.toml, edit 1: touches `.git/config`, {IN_GIT}", id="edit-dot-git"),
        pytest.param('[[edit]]\npath = "secret-link"\npattern = "s"\nreplace = "x"\n', "patches/0002-evil.edit.toml, edit 1: touches `secret-link` through the symbolic link `secret-link` (to `../outside/secret`, outside the source tree); patch the file the link points to instead", id="edit-of-a-link"),
    ],
)
def test_a_patch_reaching_outside_the_tree_is_refused_before_any_patch_applies(tmp_path, patch, message) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s\n")
    (outside / "setup.py").write_text(SETUP)
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "setup.py").write_text(SETUP)
    (tree / "pkg/setup.py").write_text(SETUP)
    for link, target in {"linked": "../outside", "alias": "pkg", "secret-link": "../outside/secret"}.items():
        (tree / link).symlink_to(target)
    name = "0002-evil.edit.toml" if "[[edit]]" in patch else "0002-evil.patch"
    patch, message = patch.replace("OUTSIDE", str(outside)), message.replace("OUTSIDE", str(outside))
    before = files(tmp_path)
    result = run(tmp_path, "tree", *write_patches(tmp_path, {"0001-good.patch": PATCH, name: patch}))
    assert (result.returncode, result.stdout, result.stderr) == (2, "", message + "\n")
    assert files(tmp_path) == {**before, **{p: (tmp_path / p).read_text() for p in ("apply_patches.py", "patches/0001-good.patch", f"patches/{name}")}}
    if "link" not in message:  # the links need the tree; the rest is refused by --touched already
        touched = run(tmp_path, "--touched", "patches/0001-good.patch", f"patches/{name}")
        assert (touched.returncode, touched.stdout, touched.stderr) == (2, "", message + "\n")


def test_a_link_an_earlier_patch_makes_is_not_a_way_out_for_a_later_one(tmp_path) -> None:
    repo = init_repo(tmp_path / "upstream")
    commit_files(repo, {"setup.py": SETUP})
    (repo / "up").symlink_to("..")
    git(repo, "add", "up")
    make_link = git_diff(repo, "diff", "--cached")
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree/setup.py").write_text(SETUP)
    result = run(tmp_path, "tree", *write_patches(tmp_path, {"0001-link.patch": make_link}))
    assert (result.returncode, result.stderr) == (
        2, "patches/0001-link.patch, line 1: makes `up` a symbolic link to `..`, outside the source tree; a link in a patch must point inside the repository\n",
    )  # fmt: skip
    (tmp_path / "tree/up").unlink()
    inside_link = make_link.replace("+..", "+pkg")
    through = PATCH.replace("setup.py", "up/setup.py")
    (tmp_path / "tree/pkg").mkdir()
    (tmp_path / "tree/pkg/setup.py").write_text(SETUP)
    result = run(tmp_path, "tree", *write_patches(tmp_path, {"0001-link.patch": inside_link, "0002-through.patch": through}))
    assert (result.returncode, result.stderr) == (
        2, "patches/0002-through.patch, line 1: touches `up/setup.py` through the symbolic link `up` (to `pkg`); patch the file the link points to instead\n",
    )  # fmt: skip


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("0001-x.patch", "this is no diff\n", "patches/0001-x.patch: not a unified diff (no ---/+++ file headers); regenerate it with `git diff` or `git format-patch`"),
        ("0001-x.edit.toml", b'[[edit]]\npath = "a\xe1.txt"\npattern = "x"\nreplace = "y"\n', "patches/0001-x.edit.toml: not UTF-8 text (invalid continuation byte at byte 18)"),
        ("0001-x.edit.toml", "edit = 1\n", "patches/0001-x.edit.toml: no [[edit]] tables; each needs path, pattern, replace and count"),
        ("0001-x.edit.toml", "edit = [1]\n", "patches/0001-x.edit.toml: no [[edit]] tables; each needs path, pattern, replace and count"),
        ("0001-x.edit.toml", '[[edit]]\npath = 1\npattern = "x"\nreplace = "y"\n', "patches/0001-x.edit.toml: edit 1: `path` must be a string"),
        ("0001-x.edit.toml", '[[edit]]\npath = "a"\npattern = "x"\nreplace = "y"\ncount = "2"\n', "patches/0001-x.edit.toml: edit 1: `count` must be a whole number"),
        ("0001-x.edit.toml", '[[edit]]\npath = "a"\npattern = "("\nreplace = "y"\n', "patches/0001-x.edit.toml: edit 1: `pattern` is not a regular expression: missing ), unterminated subpattern at position 0"),
    ],
)
def test_a_malformed_patch_file_is_refused_naming_it(tmp_path, name, content, message) -> None:
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    result = run(tmp_path, "--touched", f"patches/{name}")
    assert (result.returncode, result.stderr) == (2, message + "\n")


# A file and two patches in a stack, as `git diff` makes them: 0001 changes line 2, 0002 (made on
# top of 0001) line 3, whose context includes 0001's line.
LINES = "one\ntwo\nthree\nfour\n"
FIRST = "--- a/f.txt\n+++ b/f.txt\n@@ -1,4 +1,4 @@\n one\n-two\n+TWO\n three\n four\n"
ON_TOP = "--- a/f.txt\n+++ b/f.txt\n@@ -1,4 +1,4 @@\n one\n TWO\n-three\n+THREE\n four\n"
ON_PINNED = "--- a/f.txt\n+++ b/f.txt\n@@ -1,4 +1,4 @@\n one\n two\n-three\n+THREE\n four\n"


def apply_stack(tmp_path: Path, pinned: str, patches: Dict[str, str]) -> subprocess.CompletedProcess:
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree/f.txt").write_text(pinned)
    return run(tmp_path, "tree", *write_patches(tmp_path, patches))


def test_a_stack_applies(tmp_path) -> None:
    result = apply_stack(tmp_path, LINES, {"0001-a.patch": FIRST, "0002-b.patch": ON_TOP})
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "tree/f.txt").read_text() == "one\nTWO\nTHREE\nfour\n"


def test_the_pinned_file_changed_where_no_earlier_patch_does(tmp_path) -> None:
    result = apply_stack(tmp_path, LINES.replace("two", "2"), {"0001-b.patch": ON_PINNED})
    assert result.returncode == 3
    assert result.stderr.startswith(
        "patches/0001-b.patch: the hunk at f.txt line 1 does not match the pinned source. No patch before it changes "
        "f.txt: the pinned file changed there (or this patch did); refresh the patch against the pinned commit"
    ), result.stderr
    assert "\ngit apply said:\n" in result.stderr


def test_a_patch_made_without_the_one_before_it_names_that_one(tmp_path) -> None:
    # 0002 was made against the pinned file: 0001 changed its context, not upstream.
    result = apply_stack(tmp_path, LINES, {"0001-a.patch": FIRST, "0002-b.patch": ON_PINNED})
    assert result.returncode == 3
    assert result.stderr.startswith(
        "patches/0002-b.patch: the hunk at f.txt line 1 does not match f.txt as patches/0001-a.patch leaves it, but "
        "it does match the pinned file: it was made without patches/0001-a.patch, which the build applies before it. "
        "Remake this patch on top of it.\ngit apply said:\n"
    ), result.stderr


def test_a_patch_that_changed_on_top_of_another_says_so(tmp_path) -> None:
    # 0002 applies on top of 0001, but one of them was edited since: neither the pinned file nor
    # 0001's result is what it expects (the case the old message blamed on upstream).
    edited = ON_TOP.replace(" four\n", " FOUR\n")
    result = apply_stack(tmp_path, LINES, {"0001-a.patch": FIRST, "0002-b.patch": edited})
    assert result.returncode == 3
    assert result.stderr.startswith(
        "patches/0002-b.patch: the hunk at f.txt line 1 does not match f.txt as patches/0001-a.patch leaves it, nor "
        "the pinned file. The build applies patches/0001-a.patch before it: this patch or "
        "patches/0001-a.patch changed there since it was made (or the pinned file did, under both).\ngit apply said:\n"
    ), result.stderr


def test_an_edit_after_a_patch_that_changed_its_anchor(tmp_path) -> None:
    edit = '[[edit]]\npath = "f.txt"\npattern = "^two$"\nreplace = "2"\n'
    result = apply_stack(tmp_path, LINES, {"0001-a.patch": FIRST, "0002-b.edit.toml": edit})
    assert result.returncode == 3
    assert result.stderr == (
        "patches/0002-b.edit.toml: edit 1 on f.txt: pattern '^two$' matched 0 time(s), expected exactly 1 in f.txt as "
        "patches/0001-a.patch leaves it, and 1 in the pinned file: an earlier patch changed there "
        "(patches/0001-a.patch); anchor the edit on what it leaves, or order it before\n"
    )
    alone = run(tmp_path, "tree", *write_patches(tmp_path, {"0003-c.edit.toml": edit.replace("^two$", "^five$")}))
    assert alone.returncode == 3
    assert alone.stderr.startswith("patches/0003-c.edit.toml: edit 1 on f.txt: pattern '^five$' matched 0 time(s), expected exactly 1. No patch before it changes f.txt: the pinned file changed here")
