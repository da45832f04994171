"""The kept build directory of a component: the upstream's own build tree (CMake's, ninja's,
setuptools' temp) carried from one build to the next, so its build tool recompiles only what
changed. Run by build_wheel.sh in the build's mount namespace, on the stacked tree.

Usage: kept_build_dir.py take ENTRY TREE BUILD_DIR [PACK CHANGES]
         makes ENTRY/dir ready to be mounted at TREE/BUILD_DIR and sets the tree's times
       kept_build_dir.py keep ENTRY
         after a build that succeeded: ENTRY is complete, the next build may reuse it

An entry is named by everything in the build's key but the tree (wheel/build_process.py), so
what decides which units to recompile is only the tree, by the times of its files. Build tools
compare times (ninja: an output older than an input is rebuilt), and a tree's times say
nothing on their own: a checkout writes every file now, Pants writes the patched files now.
So the entry records each file's content id (git's blob id) of the tree it was last built
from, and `take` gives every file of the new tree whose id is the same the fixed time
UNCHANGED (older than any output), and every file whose id differs, or that is new, the
current time (newer than every output). Checkouts (source_pack.py) write UNCHANGED already,
so on the stacked tree only the patched files and the changed ones are touched.

Nothing but a complete entry is reused: `take` marks the entry incomplete before the build
and `keep` marks it complete after it; an entry a build left incomplete (it failed, or was
killed) is emptied, unless that build wrote nothing in it (killed right after its `take`). setuptools' staging directories (build/lib*, build/bdist*) are emptied
every time (and `build/lib` when it holds Python files: a pure package's staging, not
PyTorch's libraries): setuptools never removes a file from them, so a module the tree dropped
would reach the wheel.

Exit codes: 2 the tree has files of its own under BUILD_DIR (they would be hidden).
"""

import hashlib
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import source_pack  # noqa: E402  # beside this script in the sandbox
from source_pack import UNCHANGED  # noqa: E402

STAGING = ("lib.", "bdist.", "scripts-")  # setuptools' copies of the package, refilled each build


def blob_id(path):
    """git's id of the file (a symbolic link: of its target), as `git ls-tree` gives it."""
    data = os.readlink(path).encode() if os.path.islink(path) else open(path, "rb").read()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def walk(top):
    """Relative paths of the files and symbolic links under `top`."""
    for root, dirs, files in os.walk(top):
        links = [d for d in dirs if os.path.islink(os.path.join(root, d))]  # not followed: a file of the tree
        dirs[:] = [d for d in dirs if d not in links]
        for name in (*files, *links):
            yield os.path.relpath(os.path.join(root, name), top)


def pack_ids(pack):
    """{path: blob id} of the pack's tree, its submodules' included, without checking it out."""
    with source_pack.pack_repository(pack, ".") as git_dir:
        return {path: sha for path, (_, sha) in source_pack.tree_entries(git_dir, pack).items()}


def tree_state(tree, pack, changes):
    """What the tree is made of: the pack's commits and ids, and the ids of the files written
    over it; without a pack every file is hashed."""
    if pack:
        repos = open(os.path.join(pack, "repos")).read()
        return {"repos": repos, "changes": {p: blob_id(os.path.join(changes, p)) for p in walk(changes)}}
    return {"repos": "", "changes": {p: blob_id(os.path.join(tree, p)) for p in walk(tree)}}


def changed_paths(before, now, lower_before, lower_now):
    """Paths whose content id is not the one the entry was built from (new ones included)."""
    def id_of(state, lower, path):
        return state["changes"].get(path) or lower.get(path)

    candidates = set(now["changes"]) | set(before["changes"])
    if before["repos"] != now["repos"]:
        candidates |= set(lower_now)
    return {p for p in candidates if id_of(now, lower_now, p) is not None and id_of(before, lower_before, p) != id_of(now, lower_now, p)}


def set_times(tree, paths, changed):
    """Changed paths get the current time, the others UNCHANGED (each only if it has not)."""
    stamp = time.time_ns()
    for path in paths:
        full = os.path.join(tree, path)
        want = stamp if path in changed else UNCHANGED * 10**9
        try:
            if os.lstat(full).st_mtime_ns != want:
                os.utime(full, ns=(want, want), follow_symlinks=False)
        except FileNotFoundError:
            pass  # a path of the pack's tree the patches removed


def holds_python(path):
    """`build/lib` is setuptools' staging of a pure-Python package, refilled each build, when it
    holds Python files; PyTorch's CMake writes its libraries there, which a build relinks."""
    return any(f.endswith(".py") for _, _, files in os.walk(path) for f in files)


def load(entry, name, default):
    try:
        with open(os.path.join(entry, name)) as f:
            return json.load(f)
    except FileNotFoundError:
        return default


def write(entry, name, value):
    tmp = os.path.join(entry, f".{name}.new")
    with open(tmp, "w") as f:
        json.dump(value, f)
    os.replace(tmp, os.path.join(entry, name))


def untouched_since_taken(entry):
    """Whether nothing in ENTRY/dir changed after the last `take` (its tree.next.json): a build
    stopped before its first write, as Pants cancels one it started early (with pantsd, a moved
    input re-runs a build beside the checks that gate it, then drops it). The directory is then
    the last complete build's (less its staging, which every take empties), still reusable."""
    marker, target = os.path.join(entry, "tree.next.json"), os.path.join(entry, "dir")
    if not (os.path.exists(marker) and os.path.isdir(target)):
        return False
    since = os.stat(marker).st_mtime_ns
    for top, dirs, files in os.walk(target):
        for path in (top, *(os.path.join(top, n) for n in dirs + files)):
            if os.lstat(path).st_mtime_ns > since:
                return False
    return True


def take(entry, tree, build_dir, pack="", changes=""):
    os.makedirs(entry, exist_ok=True)
    state = load(entry, "state.json", {})
    now = tree_state(tree, pack, changes)
    # Taken by a build stopped before its first write: as the last `take` left it, the last
    # complete build's directory (it reused one) or an empty one (it did not).
    untouched = not state.get("complete") and untouched_since_taken(entry)
    reusable = state.get("complete") or (state.get("reused") and untouched)
    before = load(entry, "tree.json", {"repos": None, "changes": {}}) if reusable else None
    # The same pinned commits as the last build: their ids are the ones it recorded (a 100,000
    # file tree's `git ls-tree` and the rewrite of its ids cost ~0.3 s of a one-file edit).
    same_commits = bool(pack) and before is not None and before["repos"] == now["repos"]
    lower_now = (load(entry, "lower.json", None) if same_commits else None) or (pack_ids(pack) if pack else {})
    paths = set(now["changes"]) | set(lower_now)
    inside = sorted(p for p in paths if p == build_dir or p.startswith(build_dir + "/"))
    if inside:
        print(f"the tree has {len(inside)} file(s) of its own under {build_dir}/ (e.g. {inside[0]}), which the kept "
              "build directory would hide: set the target's `build_dir` to the directory its build writes, or "
              "`keep_build_dir=False`", file=sys.stderr)  # fmt: skip
        return 2
    if before is not None:
        lower_before = lower_now if same_commits else load(entry, "lower.json", {})
        changed = changed_paths(before, now, lower_before, lower_now)
        note = f"reused: {len(changed)} of {len(paths)} file(s) changed since it was last built"
    else:
        unfinished = os.path.isdir(os.path.join(entry, "dir")) and not untouched
        why = "the last build in it did not finish: emptied" if unfinished else "new: empty"
        shutil.rmtree(os.path.join(entry, "dir"), ignore_errors=True)
        changed, note = set(), why
    write(entry, "state.json", {"complete": False, "reused": before is not None})
    # On a stacked tree every file of the pack is UNCHANGED already (source_pack.py checks it
    # out so): only the files written over it and the changed ones are looked at.
    set_times(tree, set(now["changes"]) | changed if pack else paths, changed)
    target = os.path.join(entry, "dir")
    os.makedirs(target, exist_ok=True)
    for name in os.listdir(target):
        if name.startswith(STAGING) or (name == "lib" and holds_python(os.path.join(target, name))):
            shutil.rmtree(os.path.join(target, name), ignore_errors=True)
    write(entry, "tree.next.json", now)
    if not same_commits:  # otherwise lower.json holds these ids already (keep leaves it)
        write(entry, "lower.next.json", lower_now)
    print(note)
    return 0


def keep(entry):
    for name in ("tree", "lower"):  # the tree it was built from; the state last, so a kill between leaves it incomplete
        if os.path.exists(os.path.join(entry, f"{name}.next.json")):  # lower: only when the commits moved
            os.replace(os.path.join(entry, f"{name}.next.json"), os.path.join(entry, f"{name}.json"))
    write(entry, "state.json", {"complete": True})
    return 0


def main(argv):
    if argv[:1] == ["take"] and len(argv) in (4, 6):
        return take(*argv[1:])
    if argv[:1] == ["keep"] and len(argv) == 2:
        return keep(argv[1])
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
