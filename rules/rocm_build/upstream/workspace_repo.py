"""The patch workspace's git repository (`work/<pin>/`): the pinned tree, one commit per patch
file, and the commits made after them saved back as patch files.

    rocm-pants/pinned   the pinned tree (the fetched commit; its submodules' files in it)
    one commit each     our patch files, in the order the build applies them, each with the
                        patch's header as its message
    rocm-pants/saved    where the last checkout or save ended: `--save` writes the commits after it

Engine-free, on the host's git: the `patch-workspace` goal (goals/patch_workspace.py; `pants run
rules:patch-workspace` runs the goal too) runs it in Pants' own process with what the engine
resolved from the target (the fetched pack, the ordered patch files, the patch set's directory).
It applies each patch with the script the build applies it with (scripts/apply_patches.py), so a
patch applies in the workspace exactly when it applies in a build.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from rocm_build.isolated_git import isolated_env, run_git
from rocm_build.script_modules import script_bytes
from rocm_build.upstream.patch_headers import BOM, KEYS, header_fields, header_of, missing_keys

BASE_TAG = "rocm-pants/pinned"
SAVED_TAG = "rocm-pants/saved"
SAVED_REF = f"refs/tags/{SAVED_TAG}"
BRANCH = "patches"
PACK_NAME = "pack-pinned"  # the fetched pack, written into .git/objects/pack/ as is
OWNER_KEY = "rocm-pants.target"  # which target (or pin) the workspace was made for
# Commits by a fixed name, so no identity needs to be set up; the rest of git's isolation from
# the caller's (no config, no hooks, no GIT_* of theirs) is isolated_git.py's.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "rocm-pants", "GIT_AUTHOR_EMAIL": "rocm-pants@localhost",
    "GIT_COMMITTER_NAME": "rocm-pants", "GIT_COMMITTER_EMAIL": "rocm-pants@localhost",
}  # fmt: skip
# Four digits, as the set's files are named; past 9999 the number widens, and every name of the
# set must then be the same width to sort in order (next_number refuses otherwise).
_NUMBERED = re.compile(r"^(\d{4,})-")
SYMLINK_MODE = "120000"


class WorkspaceError(Exception):
    """A step that cannot go on; the message names the workspace, the commit or patch, and the fix."""


def git_bytes(dest: Path, *args: str, env: Optional[Dict[str, str]] = None, stdin: Optional[bytes] = None) -> bytes:
    """git's output as bytes: diffs, file names and messages are bytes in git (a CRLF file's
    `\r`, a Latin-1 file's text), and a patch must keep every one of them."""
    result = run_git(["-C", str(dest), *args], env={**GIT_ENV, **(env or {})}, stdin=stdin)
    if result.returncode != 0:
        said = result.stderr.decode(errors="replace").strip()
        raise WorkspaceError(f"`git {' '.join(args)}` failed in {dest}: {said}")
    return result.stdout


def git(dest: Path, *args: str, env: Optional[Dict[str, str]] = None, stdin: Optional[str] = None, strip: bool = True) -> str:
    """git's output as text, for what is ASCII (SHAs, refs, config we wrote)."""
    out = git_bytes(dest, *args, env=env, stdin=None if stdin is None else stdin.encode()).decode(errors="surrogateescape")
    return out.strip() if strip else out


def refuse_links(root: Path, rel: str) -> None:
    """The workspace `root/rel` (work/<pin>) stays inside `root`: a symbolic link at `work` or at
    `work/<pin>` would have git write (and `rm -rf` remove) somewhere else, so each is refused,
    as is a file where the directory goes. Said with the path from `root` and the fix."""
    parts = Path(rel).parts
    if Path(rel).is_absolute() or ".." in parts:
        raise WorkspaceError(f"{rel} is not a path inside the repository; the workspace is made only under it")
    for depth in range(1, len(parts) + 1):
        here = Path(*parts[:depth])
        full = root / here
        if full.is_symlink():
            raise WorkspaceError(
                f"{here} is a symbolic link (to {os.readlink(full)}); the patch workspace is made only inside the "
                f"repository, so it does not follow one: remove the link (`rm {here}`), then run it again"
            )
        if full.exists() and not full.is_dir():
            raise WorkspaceError(
                f"{here} is a file, where the patch workspace's directory goes: move it away (`mv {here} {here}.old`), "
                "then run it again"
            )
    resolved = (root / rel).resolve()
    if root.resolve() not in resolved.parents:
        raise WorkspaceError(f"{rel} resolves to {resolved}, outside the repository; the workspace is made only inside it")


def unsaved(dest: Path) -> List[str]:
    """What of the workspace no patch file holds: commits after rocm-pants/saved, changes not
    committed, and refs a checkout does not make (a branch, a stash). Files git ignores (a build's
    output) are not work."""
    found = []
    commits = git(dest, "rev-list", "--count", f"{SAVED_TAG}..HEAD")
    if commits != "0":
        found.append(f"{commits} commit(s) after {SAVED_TAG}")
    if git(dest, "status", "--porcelain"):
        found.append("changes not committed")
    ours = {f"refs/heads/{BRANCH}", f"refs/tags/{BASE_TAG}", f"refs/tags/{SAVED_TAG}"}
    found += [f"the ref {ref}" for ref in git(dest, "for-each-ref", "--format=%(refname)").split() if ref not in ours]
    return found


def clear_saved(dest: Path, owner: str, save_command: str) -> bool:
    """Before a checkout: a workspace of `owner` whose work is all in patch files is removed (so
    the fix a failed patch prints, `pants patch-workspace <target>`, works as printed while
    work/<pin>/ is there); one with work not saved, or of another target, is refused. True when
    one was removed."""
    if not dest.exists() or not any(dest.iterdir()):
        return False
    made = made_for(dest)
    if made != owner:
        raise WorkspaceError(
            f"{dest} already exists (a workspace of {made or 'something else'}); remove it (`rm -rf {dest}`) for a "
            f"checkout of {owner}"
        )
    try:
        work = unsaved(dest)
    except WorkspaceError as e:  # not the repository a checkout made (its tags gone): take nothing for granted
        work = [f"a repository this goal cannot read ({e})"]
    if work:
        raise WorkspaceError(
            f"{dest} already exists (a workspace of {owner}) and holds work not saved: {', '.join(work)}; save its new "
            f"commits with `{save_command}`, or remove it (`rm -rf {dest}`) for a fresh checkout of {owner}"
        )
    shutil.rmtree(dest)
    return True


def made_for(dest: Path) -> str:
    try:
        return git(dest, "config", "--get", OWNER_KEY)
    except WorkspaceError:
        return ""


def init(dest: Path, owner: str) -> Path:
    """An empty repository at `dest` that remembers which target it is for; returns its git dir."""
    dest.mkdir(parents=True, exist_ok=True)
    git(dest, "init", "-q")
    git(dest, "config", OWNER_KEY, owner)
    return dest / ".git"


def base_from_pack(dest: Path, repos: Sequence[Tuple[str, str]], pin: str) -> str:
    """The pinned tree as the workspace's base, from the fetched pack (already under
    .git/objects/pack/): the fetched commit itself, or with submodules a commit on top of it
    whose tree holds their files, as the build's tree does (patches may change them)."""
    top = repos[0][1]
    # Shallow: the pack has these commits but not their parents.
    (dest / ".git" / "shallow").write_text("".join(f"{commit}\n" for _, commit in repos))
    base = top
    if len(repos) > 1:
        with tempfile.TemporaryDirectory() as tmp:
            index = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
            git(dest, "read-tree", top, env=index)
            # Parents before children (the pack lists them so): each gitlink becomes its tree.
            for path, commit in repos[1:]:
                git(dest, "rm", "-q", "--cached", "--", path, env=index)
                git(dest, "read-tree", f"--prefix={path}/", f"{commit}^{{tree}}", env=index)
            tree = git(dest, "write-tree", env=index)
        subs = ", ".join(f"{path} at {commit[:12]}" for path, commit in repos[1:])
        base = git(dest, "commit-tree", tree, "-p", top, "-m", f"{pin} @ {top[:12]} with its submodules' files\n\n{subs}")
    git(dest, "checkout", "-q", "-B", BRANCH, base)
    git(dest, "tag", "-f", BASE_TAG)
    return base


def _apply_script(python: str, *args: str) -> subprocess.CompletedProcess:
    with tempfile.NamedTemporaryFile("wb", suffix=".py", delete=False) as f:
        f.write(script_bytes("apply_patches.py"))
    try:
        # Its `git apply` too must not see the caller's GIT_DIR (it would apply there).
        return subprocess.run([python, f.name, *args], capture_output=True, text=True, env=isolated_env(GIT_ENV))
    finally:
        os.unlink(f.name)


def patches_apply(python: str, tree: str, patches: Sequence[str]) -> Optional[str]:
    """None if every patch applies to the tree (scripts/apply_patches.py, as builds apply them),
    else the first failure's message."""
    if not patches:
        return None
    result = _apply_script(python, tree, *[os.path.abspath(p) for p in patches])
    return None if result.returncode == 0 else result.stderr.strip()


def failure_as_built(dest: Path, python: str, patches: Sequence[str]) -> Optional[str]:
    """What a build says of the last of `patches`: all of them applied in one run to the pinned
    files they touch, so the message names the patches before it and what changed there."""
    listed = _apply_script(python, "--touched", *[os.path.abspath(p) for p in patches])
    if listed.returncode != 0:
        return listed.stderr.strip()
    paths = json.loads(listed.stdout)
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp, "tree")
        tree.mkdir()
        pinned_files(dest, BASE_TAG, paths, tree, os.path.join(tmp, "index"))
        return patches_apply(python, str(tree), patches)


def pinned_files(dest: Path, commit: str, paths: Sequence[str], tree: Path, index: str) -> List[str]:
    """Those of `paths` that `commit` has, checked out into `tree` through `index` (the
    workspace's own tree and index left alone); returns them. Paths are literal: a file named
    `*` is that file, not every file."""
    present = [p for p in git(dest, "--literal-pathspecs", "ls-tree", "-r", "-z", "--name-only", commit, "--", *paths, strip=False).split("\0") if p]
    if present:
        git(dest, "--literal-pathspecs", f"--work-tree={tree}", "checkout", commit, "--", *present, env={"GIT_INDEX_FILE": index})
    return present


def commit_message(path: str, text: str) -> str:
    """A patch file's header as a commit message. Its subject is the header's first line, or the
    file's name where the header starts with a key (`git log --oneline` then names the patch)."""
    header = header_of(path, text).strip()
    if not header:
        return f"{os.path.basename(path)} (no header)"
    return f"{os.path.basename(path)}\n\n{header}" if header_fields(header.splitlines()[0]) else header


@dataclass(frozen=True)
class PatchToApply:
    file: str  # where it is on this machine
    shown: str  # as messages name it (relative to the build root)


def commit_patches(dest: Path, python: str, patches: Sequence[PatchToApply], fix: str) -> None:
    """One commit per patch file on top of the base; a patch that does not apply stops it, the
    workspace kept with the patches before it (`fix` says what to do then)."""
    for number, patch in enumerate(patches):
        problem = patches_apply(python, str(dest), [patch.file])
        if problem:
            problem = failure_as_built(dest, python, [p.file for p in patches[: number + 1]]) or problem
            for shown in patches[: number + 1]:  # the patches as the user names them
                problem = problem.replace(os.path.abspath(shown.file), shown.shown)
            git(dest, "checkout", "-q", "--", ".")
            git(dest, "clean", "-q", "-fd")
            git(dest, "tag", "-f", SAVED_TAG)
            later = len(patches) - number - 1
            raise WorkspaceError(
                f"{problem}\n{dest} holds the pinned tree and the {number} patch(es) before {patch.shown} as commits"
                f"{f' ({later} after it not applied)' if later else ''}. {fix}"
            )
        git(dest, "add", "-A", "-f", ".")
        text = Path(patch.file).read_text(errors="replace")
        git(dest, "commit", "-q", "--allow-empty", "-F", "-", stdin=commit_message(patch.shown, text) + "\n")
    git(dest, "tag", "-f", SAVED_TAG)


def next_number(names: Sequence[str], where: str = "the patch set") -> int:
    """After the highest NNNN- of the patch set's files: new patches apply after them. Past 9999
    a name would sort before 9999- (`10000-` < `9999-`: the build applies in file-name order), so
    the set is refused, with the fix."""
    numbers = [int(m.group(1)) for n in names if (m := _NUMBERED.match(os.path.basename(n)))]
    following = max(numbers, default=0) + 1
    if following > LAST_NUMBER:
        raise WorkspaceError(
            f"{where} has a file numbered {max(numbers)}; a next one ({following:04d}-...) would sort before it "
            "(patches apply in file-name order). Renumber the set's files from 0001 (`git mv`), then save again"
        )
    return following


LAST_NUMBER = 9999  # NNNN-: four digits


def slug(subject: str) -> str:
    """A file name's part from a commit's subject, as `git format-patch` makes it."""
    return re.sub(r"[^A-Za-z0-9._]+", "-", subject).strip("-.")[:52].rstrip("-.") or "patch"


def commit_problem(commit: str, subject: str, message: str) -> Optional[str]:
    missing = missing_keys(message)
    if missing:
        keys = ", ".join(f"`{k}:`" for k in missing)
        return (
            f"commit {commit[:12]} ({subject!r}) has no {keys} in its message; every patch says "
            f"{', '.join(f'`{k}:`' for k in KEYS)} in its header, which is the commit's message"
        )
    # The whole message is the header when no line of it starts a diff (compared line by line:
    # a CRLF message is not a diff).
    if header_of("message.patch", message) != "\n".join((message[1:] if message.startswith(BOM) else message).splitlines()):
        return (
            f"commit {commit[:12]} ({subject!r}) has a line in its message that `git apply` would read as the "
            "start of a diff (`diff --git`, `--- ` then `+++ `, `Index: `); reword it"
        )
    return None


def files_problem(dest: Path, commit: str, parent: str, subject: str) -> Optional[str]:
    """What every build refuses in the files a commit changes, said at the save rather than by
    each build later: a name that is not UTF-8 or holds a newline (the build's tree and its
    messages are text, line by line), a symbolic link out of the tree (scripts/apply_patches.py
    refuses a patch that makes one)."""
    raw = git_bytes(dest, "diff-tree", "-r", "-z", "--no-renames", "--raw", parent, commit).split(b"\0")
    # -z --raw: ":<old mode> <new mode> <old sha> <new sha> <status>" then the path, each ended by NUL.
    for meta, path in zip(raw[0::2], raw[1::2]):
        if not meta.startswith(b":"):
            continue
        _, new_mode, _, new_sha, _ = meta[1:].decode().split(" ")
        where = f"commit {commit[:12]} ({subject!r})"
        try:
            name = path.decode("utf-8")
        except UnicodeDecodeError:
            return (
                f"{where} has a file whose name is not UTF-8 ({path.decode('utf-8', 'backslashreplace')}); every build refuses "
                "it: rename it to a UTF-8 name (`git mv`) and amend the commit"
            )
        if "\n" in name or "\r" in name:
            return (
                f"{where} has a file whose name holds a line break ({name!r}); every build refuses it: rename it "
                "(`git mv`) and amend the commit"
            )
        if new_mode == SYMLINK_MODE:
            target = git_bytes(dest, "cat-file", "blob", new_sha).decode("utf-8", "surrogateescape")
            resolved = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
            if posixpath.isabs(target) or resolved == ".." or resolved.startswith("../"):
                return (
                    f"{where} makes {name} a symbolic link out of the tree (to {target}); every build refuses it: "
                    "link to a file of the tree, or copy the file in, and amend the commit"
                )
    return None


@dataclass(frozen=True)
class NewPatches:
    """What a save writes: the commits after the saved marker as patch files."""

    saved: str  # the marker's value when the save began (it is moved only from there)
    head: str  # the last commit read: the one marked saved once the files are written
    files: Tuple[Tuple[str, bytes], ...]  # (file name, its bytes)


def saved_marker(dest: Path) -> Tuple[str, str]:
    """(the marker's ref value, its commit); our message where the tag is gone."""
    try:
        value = git(dest, "rev-parse", "--verify", "-q", SAVED_REF)
        commit = git(dest, "rev-parse", "--verify", "-q", f"{SAVED_REF}^{{commit}}")
    except WorkspaceError:
        raise WorkspaceError(
            f"{dest} has no tag {SAVED_TAG} (where the last checkout or save ended), so which commits are new is not "
            f"known; nothing was written. Tag the last commit already saved as a patch file (`git tag {SAVED_TAG} <commit>`; "
            f"`git log --oneline {BASE_TAG}..` lists them), then save again"
        ) from None
    return value, commit


def new_patches(dest: Path, first_number: int) -> NewPatches:
    """Each commit after rocm-pants/saved as (file name, bytes), numbered from `first_number`:
    its message (with its Why:/Upstream:/Drop when:) as the header, then its diff, byte for
    byte. Every commit is checked before any file is made: one problem refuses them all. HEAD is
    read once: a commit made while the save runs is not in it, and not marked saved."""
    if git_bytes(dest, "status", "--porcelain", "-z"):
        raise WorkspaceError(f"{dest} has changes not committed; commit them (or `git stash` them) first")
    saved_value, saved = saved_marker(dest)
    head = git(dest, "rev-parse", "--verify", "HEAD^{commit}")
    if subprocess_is_ancestor(dest, saved, head) is False:
        raise WorkspaceError(
            f"{dest}: {SAVED_TAG} ({saved[:12]}) is not an ancestor of HEAD: commits already saved as patch files were "
            f"rewritten (a rebase or an amend), and saving them again would write them twice. Nothing was written. "
            f"To change a saved patch, go back to the saved history (`git branch rewritten` keeps your rewrite, then "
            f"`git reset --hard {SAVED_TAG}`) and make the change as a new commit on top, or edit the patch file itself "
            f"and make the workspace again (remove {dest})"
        )
    commits = git(dest, "rev-list", "--reverse", "--topo-order", f"{saved}..{head}").split()
    if commits and first_number + len(commits) - 1 > LAST_NUMBER:
        raise WorkspaceError(
            f"{len(commits)} new commit(s) after patch number {first_number - 1} would pass {LAST_NUMBER} and sort before "
            "the set's first files (patches apply in file-name order); renumber the set's files from 0001 (`git mv`), then save again"
        )
    problems: List[str] = []
    found: List[Tuple[str, bytes]] = []
    for commit in commits:
        parents = git(dest, "rev-list", "--parents", "-n", "1", commit).split()[1:]
        raw_message = git_bytes(dest, "log", "-1", "--format=%B", commit).strip()
        message = raw_message.decode("utf-8", "replace")
        subject = message.splitlines()[0] if message else ""
        if len(parents) != 1:
            problems.append(f"commit {commit[:12]} ({subject!r}) is a merge; rebase onto {SAVED_TAG} to make it one line of commits")
            continue
        problem = commit_problem(commit, subject, message)
        if problem is None and message.encode("utf-8") != raw_message:
            problem = f"commit {commit[:12]} ({subject!r}) has a message that is not UTF-8; reword it (`git commit --amend`)"
        problem = problem or files_problem(dest, commit, parents[0], subject)
        diff = git_bytes(dest, "diff", "--binary", "--no-color", "--no-ext-diff", "--no-textconv",
                         "--src-prefix=a/", "--dst-prefix=b/", parents[0], commit)  # fmt: skip
        if not diff:
            problem = problem or f"commit {commit[:12]} ({subject!r}) changes nothing; drop it (`git rebase -i {SAVED_TAG}`)"
        if problem:
            problems.append(problem)
            continue
        found.append((f"{first_number + len(found):04d}-{slug(subject)}.patch", raw_message + b"\n\n" + diff))
    if problems:
        fix = f"`git commit --amend` for the last commit, `git rebase -i {SAVED_TAG}` for an earlier one"
        raise WorkspaceError("nothing was written: " + "; ".join(problems) + f". Fix them in {dest} ({fix}), then save again")
    return NewPatches(saved_value, head, tuple(found))


def subprocess_is_ancestor(dest: Path, ancestor: str, commit: str) -> bool:
    result = run_git(["-C", str(dest), "merge-base", "--is-ancestor", ancestor, commit], env=GIT_ENV)
    if result.returncode not in (0, 1):
        raise WorkspaceError(f"`git merge-base --is-ancestor` failed in {dest}: {result.stderr.decode(errors='replace').strip()}")
    return result.returncode == 0


def saved_set_problem(dest: Path, python: str, patches: Sequence[PatchToApply], new: NewPatches) -> Optional[str]:
    """The saved set checked out again before the save says it saved: the pinned tree with
    `patches` (the set's files and the new ones, in build order) applied as a build applies them
    (scripts/apply_patches.py) must be the tree of the last commit read. None when it is, else
    what differs. Only the files the patches touch or the commits changed are checked out: a
    100k-file tree is not written again for a save."""
    files = [os.path.abspath(p.file) for p in patches]
    listed = _apply_script(python, "--touched", *files) if files else None
    if listed is not None and listed.returncode != 0:
        return _shown(listed.stderr.strip(), patches)
    touched = json.loads(listed.stdout) if listed is not None else []
    changed = [p for p in git(dest, "diff", "--name-only", "--no-renames", "-z", BASE_TAG, new.head, strip=False).split("\0") if p]
    paths = sorted(set(touched) | set(changed))
    with tempfile.TemporaryDirectory() as tmp:
        tree, index = Path(tmp, "tree"), {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        tree.mkdir()
        git(dest, "read-tree", BASE_TAG, env=index)
        pinned_files(dest, BASE_TAG, paths, tree, index["GIT_INDEX_FILE"])
        problem = patches_apply(python, str(tree), [p.file for p in patches])
        if problem:
            return _shown(problem, patches)
        in_index = set(git(dest, "ls-files", "-z", env=index, strip=False).split("\0"))
        staged = [p for p in paths if p in in_index or os.path.lexists(tree / p)]
        if staged:
            git(dest, "--literal-pathspecs", f"--work-tree={tree}", "add", "-A", "-f", "--", *staged, env=index)
        built = git(dest, "write-tree", env=index)
    committed = git(dest, "rev-parse", f"{new.head}^{{tree}}")
    if built == committed:
        return None
    differ = [p for p in git(dest, "diff-tree", "-r", "-z", "--name-only", "--no-renames", built, committed, strip=False).split("\0") if p]
    return (
        f"the patch set with the new patches applied to the pinned tree, as a build applies it, is not the tree of "
        f"{new.head[:12]} (HEAD): {', '.join(differ)} differ"
    )


def _shown(message: str, patches: Sequence[PatchToApply]) -> str:
    for patch in patches:  # the patches as the user names them
        message = message.replace(os.path.abspath(patch.file), patch.shown)
    return message


def check_saved_set(dest: Path, python: str, before: Sequence[PatchToApply], after: Sequence[PatchToApply], new: NewPatches, directory: str) -> None:
    """The new patch files (written to a temporary directory under their names) between
    `before` and `after` (the target's other patch files in build order) must give the tree the
    user committed; refused otherwise, nothing written."""
    with tempfile.TemporaryDirectory() as tmp:
        written = []
        for name, data in new.files:
            Path(tmp, name).write_bytes(data)
            written.append(PatchToApply(os.path.join(tmp, name), f"{directory}/{name}" if directory else name))
        problem = saved_set_problem(dest, python, [*before, *written, *after], new)
    if problem:
        raise WorkspaceError(
            f"nothing was written: {problem}. A build applies the set's patches in file-name order, each set in the "
            f"order of the target's `patches`: order the commits so (`git rebase -i {SAVED_TAG}`), then save again"
        )


def mark_saved(dest: Path, new: NewPatches) -> None:
    """The last commit written is the saved marker (not HEAD as it is now: a commit made during
    the save is in no patch), moved only from where the save found it."""
    git(dest, "update-ref", "-m", "patch-workspace --save", SAVED_REF, new.head, new.saved)
