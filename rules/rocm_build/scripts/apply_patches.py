"""Applies patch files to a source tree, in the order given. Runs inside the sandbox.

Usage: apply_patches.py TREE PATCH...   (*.patch/*.diff: unified diffs; *.edit.toml: edits)
       apply_patches.py --touched PATCH...   prints the tree paths the patches touch (a JSON list)
Exit 2 with a message naming the patch file and what to do when a patch cannot apply.
"""

import json
import os
import re
import subprocess
import sys
import tomllib


def fail(message):
    print(message, file=sys.stderr)
    sys.exit(2)


def check_relative(patch, path):
    if path.startswith("/") or ".." in path.split("/"):
        fail(f"{patch}: touches `{path}`, which is outside the source tree; patches may only "
             "change files inside the repository (use paths relative to its root)")


def check_inside(patch, path, tree):
    check_relative(patch, path)
    real = os.path.realpath(os.path.join(tree, path))
    if real != tree and not real.startswith(tree + os.sep):
        fail(f"{patch}: `{path}` resolves through a symbolic link to {real}, outside the source "
             "tree; patch the link target inside the tree instead")


DIFF_PATH = re.compile(r"^(?:--- |\+\+\+ |rename from |rename to |copy from |copy to )(\S+)")


def touched_paths(text):
    for line in text.splitlines():
        m = DIFF_PATH.match(line)
        if m and m.group(1) != "/dev/null":
            path = m.group(1)
            if line.startswith(("--- ", "+++ ")) and path[:2] in ("a/", "b/"):
                path = path[2:]
            yield path


def git_apply(tree, patch, *flags):
    return subprocess.run(["git", "apply", *flags, os.path.abspath(patch)], cwd=tree,
                          capture_output=True, text=True)


def diff_paths(patch):
    text = open(patch, encoding="utf-8", errors="replace").read()
    if not text.strip():
        fail(f"{patch}: the patch file is empty; delete it or regenerate it with "
             "`git format-patch`")
    paths = list(touched_paths(text))
    if not paths:
        fail(f"{patch}: not a unified diff (no ---/+++ file headers); regenerate it with "
             "`git diff` or `git format-patch`")
    return paths


def apply_diff(tree, patch):
    for path in diff_paths(patch):
        check_inside(patch, path, tree)
    if git_apply(tree, patch, "--check").returncode == 0:
        result = git_apply(tree, patch)
        if result.returncode == 0:
            print(f"applied {patch}")
            return
    elif git_apply(tree, patch, "--check", "--reverse").returncode == 0:
        print(f"already applied, skipped {patch}")
        return
    err = git_apply(tree, patch, "--check", "--verbose").stderr
    if "beyond a symbolic link" in err:
        fail(f"{patch}: writes through a symbolic link in the tree; patch the link target "
             f"instead.\ngit apply said:\n{err.strip()}")
    hunk = re.search(r"error: patch failed: (\S+):(\d+)", err)
    missing = re.search(r"error: (\S+): No such file or directory", err)
    if hunk:
        where = f"the hunk at {hunk.group(1)} line {hunk.group(2)} does not match the pinned source"
    elif missing:
        where = f"{missing.group(1)} does not exist in the pinned source"
    else:
        where = "it does not apply to the pinned source"
    fail(f"{patch}: {where}. Upstream changed there: refresh the patch against the pinned "
         f"commit (or use an anchored edit, *.edit.toml).\ngit apply said:\n{err.strip()}")


def read_edits(patch):
    with open(patch, "rb") as f:
        try:
            edits = tomllib.load(f).get("edit")
        except tomllib.TOMLDecodeError as e:
            fail(f"{patch}: TOML syntax error: {e}")
    if not edits:
        fail(f"{patch}: no [[edit]] tables; each needs path, pattern, replace and count")
    for number, edit in enumerate(edits, 1):
        missing = [k for k in ("path", "pattern", "replace") if k not in edit]
        if missing:
            fail(f"{patch}: edit {number} lacks {', '.join(missing)}")
    return edits


def apply_edits(tree, patch):
    for number, edit in enumerate(read_edits(patch), 1):
        path, count = edit["path"], edit.get("count", 1)
        check_inside(patch, path, tree)
        full = os.path.join(tree, path)
        if not os.path.isfile(full):
            fail(f"{patch}: edit {number}: {path} does not exist in the pinned source")
        text = open(full, encoding="utf-8").read()
        pattern = re.compile(edit["pattern"], re.M)
        found = len(pattern.findall(text))
        applied = edit.get("applied")
        # `applied` decides first: a pattern may still match once the edit is in.
        if applied and re.search(applied, text, re.M):
            print(f"already applied, skipped {patch} edit {number} ({path})")
            continue
        if found == count:
            with open(full, "w", encoding="utf-8") as out:
                out.write(pattern.sub(edit["replace"], text))
            print(f"applied {patch} edit {number} ({path})")
            continue
        if found == 0 and not applied and "\\" not in edit["replace"] and edit["replace"] in text:
            print(f"already applied, skipped {patch} edit {number} ({path})")
            continue
        fail(f"{patch}: edit {number} on {path}: pattern {edit['pattern']!r} matched {found} "
             f"time(s), expected exactly {count}. Upstream changed here: update the pattern or "
             "`count` to match the pinned source")


def list_touched(patches):
    """Every path the patches read or write, so the caller can hand over only those files."""
    touched = set()
    for patch in patches:
        paths = ([e["path"] for e in read_edits(patch)] if patch.endswith(".toml")
                 else diff_paths(patch))
        for path in paths:
            check_relative(patch, path)
        touched.update(paths)
    print(json.dumps(sorted(touched)))


def main():
    if sys.argv[1] == "--touched":
        return list_touched(sys.argv[2:])
    tree = os.path.realpath(sys.argv[1])
    # Only the touched files are here: a patch that only adds files at the root finds no tree.
    os.makedirs(tree, exist_ok=True)
    # Keep git from treating an enclosing repository as the one to patch.
    os.environ["GIT_CEILING_DIRECTORIES"] = os.path.dirname(tree)
    for patch in sys.argv[2:]:
        (apply_edits if patch.endswith(".toml") else apply_diff)(tree, patch)


if __name__ == "__main__":
    main()
