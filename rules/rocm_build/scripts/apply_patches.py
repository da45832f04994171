"""Applies patch files to a source tree, in the order given. Runs inside the sandbox.

Usage: apply_patches.py TREE PATCH...   (*.patch/*.diff: unified diffs; *.edit.toml: edits)
       apply_patches.py --touched PATCH...   prints the tree paths the patches touch (a JSON list)
Exit 3 when a patch does not apply to the tree, naming the patch file, the hunk or edit, the
patches before it that change the same file, and whether the pinned file or one of those changed
there (what the caller knows, the target, it adds: patching.py, upstream/workspace_repo.py).
Exit 2 for a patch that cannot be used at all (unreadable, outside the tree), naming it.

A patch may change only files of the tree: every path it touches is checked, for all patches
before the first applies, and refused (naming the patch file and the line or edit) when it is
absolute, climbs out with `..`, is under a `.git` directory, or goes through a symbolic link
in the tree; a diff may not make a link that points out of the tree. The paths are those git
reads from the patch (`git apply --numstat -z`), so names with spaces or quoted non-ASCII
characters are the names git patches.
"""

import json
import os
import re
import subprocess
import sys
import tempfile


EXIT_UNUSABLE, EXIT_DOES_NOT_APPLY = 2, 3
# Said between a failure's explanation and git's own words, where a caller adds its fix.
GIT_SAID = "\ngit apply said:\n"


def fail(message, code=EXIT_UNUSABLE):
    print(message, file=sys.stderr)
    sys.exit(code)


# What a failure needs to tell an earlier patch from the pinned file: each touched path as the
# tree had it before any patch (None: absent), and the patches that changed each path so far.
PINNED = {}
EARLIER = {}


def remember_pinned(tree, paths):
    for path in paths:
        full = os.path.join(tree, path)
        if os.path.islink(full):
            PINNED[path] = ("link", os.readlink(full))
        elif os.path.isfile(full):
            with open(full, "rb") as f:
                PINNED[path] = ("file", f.read())
        else:
            PINNED[path] = None


def pinned_tree(paths, where):
    """The pinned state of `paths` written under `where` (for a check against them alone)."""
    for path in paths:
        kept = PINNED.get(path)
        if kept is None:
            continue
        full = os.path.join(where, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if kept[0] == "link":
            os.symlink(kept[1], full)
        else:
            with open(full, "wb") as f:
                f.write(kept[1])


def applies_to_pinned(patch):
    """Whether the diff applies to the pinned files alone, without the patches before it."""
    with tempfile.TemporaryDirectory() as where:
        tree = os.path.join(where, "tree")
        os.makedirs(tree)
        pinned_tree([path for _, path, _ in touched(patch)], tree)
        return git(tree, "apply", "--check", os.path.abspath(patch)).returncode == 0


def names(patches):
    return ", ".join(patches)


def path_problem(path):
    """Why a patch may not touch `path` (relative to the tree), before looking at the tree."""
    if path.startswith("/") or ".." in path.split("/"):
        return "which is outside the source tree; patches may only change files inside the repository (use paths relative to its root)"
    if ".git" in path.lower().split("/"):
        return "inside a `.git` directory; patches change the source, never git's own files (hooks, config)"
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        return "whose name has a control character"
    if any("\udc80" <= c <= "\udcff" for c in path):
        return "whose name is not UTF-8"
    return None


def link_on_the_way(tree, path, final):
    """The first symbolic link in the tree on the way to `path` (the path itself too when
    `final`), and where it points; None if there is none."""
    parts = path.split("/")
    for i in range(1, len(parts) + (1 if final else 0)):
        link = "/".join(parts[:i])
        if os.path.islink(os.path.join(tree, link)):
            return link, os.readlink(os.path.join(tree, link))
    return None


def check_path(where, path, tree=None, final=False):
    """Refuses a path outside the tree, under `.git`, or (with the tree) through a link in it."""
    problem = path_problem(path)
    if problem:
        fail(f"{where}: touches `{path}`, {problem}")
    found = link_on_the_way(tree, path, final) if tree else None
    if found:
        link, target = found
        out = "" if inside(tree, os.path.join(tree, link)) else ", outside the source tree"
        fail(f"{where}: touches `{path}` through the symbolic link `{link}` (to `{target}`{out}); "
             "patch the file the link points to instead")


def inside(tree, path):
    real = os.path.realpath(path)
    return real == tree or real.startswith(tree + os.sep)


def unquote(name):
    """A file name as git writes it in a header: C-quoted ("a/\\303\\251.txt") when unusual."""
    if not (len(name) >= 2 and name.startswith('"') and name.endswith('"')):
        return name
    escapes = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92, '"': 34}
    raw, i, body = bytearray(), 0, name[1:-1].encode("utf-8", "surrogateescape")
    while i < len(body):
        if body[i] == 92 and i + 1 < len(body):
            octal = body[i + 1:i + 4]
            if len(octal) == 3 and all(48 <= b <= 55 for b in octal):
                raw.append(int(octal, 8))
                i += 4
                continue
            raw.append(escapes.get(chr(body[i + 1]), body[i + 1]))
            i += 2
            continue
        raw.append(body[i])
        i += 1
    return raw.decode("utf-8", "surrogateescape")


def sources_of_copies(text):
    """The old names of renames and copies, which `git apply --numstat` does not print: read
    from `rename from`/`copy from` lines in a git diff's extended header (not from a commit
    message or a hunk that happens to hold such a line)."""
    in_header = False
    for line in text.splitlines():
        if line.startswith("diff --git "):
            in_header = True
        elif line.startswith(("--- ", "@@", "GIT binary patch", "Binary files ")):
            in_header = False
        elif in_header and line.startswith(("rename from ", "copy from ")):
            yield unquote(line.split(" ", 2)[2])


def git(cwd, *args):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True)


def numstat(patch):
    """`git apply --numstat -z` of the patch alone, in an empty directory outside any
    repository: in a repository's subdirectory git would prefix or drop paths."""
    with tempfile.TemporaryDirectory() as empty:
        env = {**os.environ, "GIT_CEILING_DIRECTORIES": os.path.dirname(empty)}
        return subprocess.run(["git", "apply", "--numstat", "-z", os.path.abspath(patch)], cwd=empty, env=env,
                              capture_output=True)


def git_apply(tree, patch, *flags):
    result = git(tree, "apply", *flags, os.path.abspath(patch))
    return subprocess.CompletedProcess(result.args, result.returncode, result.stdout.decode(errors="replace"),
                                       result.stderr.decode(errors="replace"))


def header_line(text, path):
    """The number of the first header line in the patch that names `path`, for messages."""
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith(("--- ", "+++ ", "rename ", "copy ", "diff --git ")) and path in unquote(line.split(" ", 2)[-1]):
            return number
    return None


def diff_paths(patch):
    """[(where, path)]: every path git apply reads or writes for the patch, as git parses it
    (`--numstat -z`: names verbatim, not quoted), with the place in the patch that names it."""
    with open(patch, "rb") as f:
        text = f.read().decode("utf-8", "surrogateescape")
    if not text.strip():
        fail(f"{patch}: the patch file is empty; delete it or regenerate it with "
             "`git format-patch`")
    listed = numstat(patch)
    said = listed.stderr.decode(errors="replace").strip()
    if listed.returncode != 0 and "No valid patches" in said or listed.returncode == 0 and not listed.stdout:
        fail(f"{patch}: not a unified diff (no ---/+++ file headers); regenerate it with "
             "`git diff` or `git format-patch`")
    if listed.returncode != 0:
        fail(f"{patch}: git apply cannot read it; regenerate it with `git diff` or `git format-patch`."
             f"\ngit apply said:\n{said}")
    paths = [r.split(b"\t", 2)[2].decode("utf-8", "surrogateescape") for r in listed.stdout.split(b"\0") if r]
    paths += list(sources_of_copies(text))
    found = []
    for path in dict.fromkeys(paths):
        line = header_line(text, path)
        found.append((f"{patch}, line {line}" if line else patch, path))
    return found


def apply_diff(tree, patch):
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
    fail(f"{diff_failure(patch, err)}{GIT_SAID}{err.strip()}", EXIT_DOES_NOT_APPLY)


def diff_failure(patch, err):
    """Why the diff does not apply: where, and whether the pinned file or a patch before it
    changed there (the patches before it that change the file are named)."""
    hunk = re.search(r"^error: patch failed: (.+):(\d+)$", err, re.M)
    missing = re.search(r"^error: (.+): No such file or directory$", err, re.M)
    path = hunk.group(1) if hunk else missing.group(1) if missing else None
    paths = [path] if path else [p for _, p, _ in touched(patch)]
    earlier = list(dict.fromkeys(e for p in paths for e in EARLIER.get(p, [])))
    what = f"the hunk at {path} line {hunk.group(2)}" if hunk else "it"
    if not earlier:
        where = f"{path} does not exist in the pinned source" if missing else f"{what} does not match the pinned source"
        return (f"{patch}: {where}. No patch before it changes {path or 'those files'}: the pinned file changed "
                "there (or this patch did); refresh the patch against the pinned commit (or use an anchored edit, "
                "*.edit.toml).")
    leave = f"leave{'s' if len(earlier) == 1 else ''}"
    if missing:
        found = f"{path} is not there as {names(earlier)} {leave} the tree"
    else:
        found = f"{what} does not match {path or 'the files'} as {names(earlier)} {leave} it"
    # "Applied after", never "applies on top of": the reader must not take the failed patch for
    # one that applied.
    them = "it" if len(earlier) == 1 else "them"
    if applies_to_pinned(patch):
        return (f"{patch}: {found}, but it does match the pinned file: it was made without {names(earlier)}, which "
                f"the build applies before it. Remake this patch on top of {them}.")
    return (f"{patch}: {found}, nor the pinned file. The build applies {names(earlier)} before it: this patch or "
            f"{names(earlier)} changed there since it was made (or the pinned file did, under both).")


EDIT_FIELDS = {"path": str, "pattern": str, "replace": str, "applied": str, "count": int}


def read_edits(patch):
    # Here, not at the top: the plugin (Python 3.9, no tomllib) loads this script for its
    # constants (upstream/patching.py); edits are read where it runs, on 3.11+.
    import tomllib

    with open(patch, "rb") as f:
        try:
            edits = tomllib.loads(f.read().decode("utf-8")).get("edit")
        except UnicodeDecodeError as e:
            fail(f"{patch}: not UTF-8 text ({e.reason} at byte {e.start})")
        except tomllib.TOMLDecodeError as e:
            fail(f"{patch}: TOML syntax error: {e}")
    if not edits or not isinstance(edits, list) or not all(isinstance(e, dict) for e in edits):
        fail(f"{patch}: no [[edit]] tables; each needs path, pattern, replace and count")
    for number, edit in enumerate(edits, 1):
        missing = [k for k in ("path", "pattern", "replace") if k not in edit]
        if missing:
            fail(f"{patch}: edit {number} lacks {', '.join(missing)}")
        for key, kind in EDIT_FIELDS.items():
            if key in edit and (type(edit[key]) is not kind):
                fail(f"{patch}: edit {number}: `{key}` must be a {'string' if kind is str else 'whole number'}")
        for key in ("pattern", "applied"):
            try:
                re.compile(edit.get(key, ""), re.M)
            except re.error as e:
                fail(f"{patch}: edit {number}: `{key}` is not a regular expression: {e}")
    return edits


def apply_edits(tree, patch):
    for number, edit in enumerate(read_edits(patch), 1):
        path, count = edit["path"], edit.get("count", 1)
        full = os.path.join(tree, path)
        if not os.path.isfile(full):
            made = f" (nor as {names(EARLIER[path])} leave it)" if EARLIER.get(path) else ""
            fail(f"{patch}: edit {number}: {path} does not exist in the pinned source{made}", EXIT_DOES_NOT_APPLY)
        try:
            text = open(full, encoding="utf-8").read()
        except UnicodeDecodeError:
            fail(f"{patch}: edit {number}: {path} is not UTF-8 text; change it with a unified diff instead")
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
        fail(edit_failure(patch, number, edit, path, found, count), EXIT_DOES_NOT_APPLY)


def edit_failure(patch, number, edit, path, found, count):
    """As `diff_failure`, for an edit whose pattern matched another number of times."""
    said = f"{patch}: edit {number} on {path}: pattern {edit['pattern']!r} matched {found} time(s), expected exactly {count}"
    earlier = EARLIER.get(path, [])
    if not earlier:
        return (f"{said}. No patch before it changes {path}: the pinned file changed here (or this edit did); "
                "update the pattern or `count` to match the pinned source")
    kept = PINNED.get(path)
    text = kept[1].decode("utf-8", "replace") if kept and kept[0] == "file" else ""
    in_pinned = len(re.findall(edit["pattern"], text, re.M))
    after = f"in {path} as {names(earlier)} leave{'s' if len(earlier) == 1 else ''} it"
    if in_pinned == count:
        return (f"{said} {after}, and {in_pinned} in the pinned file: an earlier patch changed there "
                f"({earlier[-1]}); anchor the edit on what it leaves, or order it before")
    return (f"{said} {after} ({in_pinned} in the pinned file): this edit or {names(earlier)} changed there "
            "(or the pinned file did)")


_TOUCHED = {}


def touched(patch):
    """[(where in the patch, path, whether the path itself may not be a link)]. An edit
    writes with Python, which follows a link; git apply changes a link itself. Read once per
    patch file (the file does not change while this runs)."""
    if patch not in _TOUCHED:
        if patch.endswith(".toml"):
            _TOUCHED[patch] = [(f"{patch}, edit {n}", e["path"], True) for n, e in enumerate(read_edits(patch), 1)]
        else:
            _TOUCHED[patch] = [(where, path, False) for where, path in diff_paths(patch)]
    return _TOUCHED[patch]


def check_patch(patch, tree=None):
    for where, path, final in touched(patch):
        check_path(where, path, tree, final)


def check_links_made(tree, patch):
    """A diff can make a link (mode 120000); one out of the tree would be followed by
    whatever reads the patched tree."""
    for where, path, _ in touched(patch):
        full = os.path.join(tree, path)
        if os.path.islink(full) and not inside(tree, full):
            fail(f"{where}: makes `{path}` a symbolic link to `{os.readlink(full)}`, outside the "
                 "source tree; a link in a patch must point inside the repository")


def list_touched(patches):
    """Every path the patches read or write, so the caller can hand over only those files."""
    found = set()
    for patch in patches:
        check_patch(patch)
        found.update(path for _, path, _ in touched(patch))
    print(json.dumps(sorted(found)))


def main():
    if sys.argv[1] == "--touched":
        return list_touched(sys.argv[2:])
    tree = os.path.realpath(sys.argv[1])
    # Only the touched files are here: a patch that only adds files at the root finds no tree.
    os.makedirs(tree, exist_ok=True)
    # Keep git from treating an enclosing repository as the one to patch.
    os.environ["GIT_CEILING_DIRECTORIES"] = os.path.dirname(tree)
    patches = sys.argv[2:]
    for patch in patches:  # every patch checked against the tree before the first applies
        check_patch(patch, tree)
    remember_pinned(tree, sorted({path for patch in patches for _, path, _ in touched(patch)}))
    for patch in patches:
        check_patch(patch, tree)  # again: an earlier patch may have made a link on the way
        if patch.endswith(".toml"):
            apply_edits(tree, patch)
        else:
            apply_diff(tree, patch)
            check_links_made(tree, patch)
        for _, path, _ in touched(patch):
            EARLIER.setdefault(path, []).append(patch)


if __name__ == "__main__":
    main()
