"""The patch workspace's git repository (`work/<pin>/`): the pinned tree, one commit per patch
file, and the commits made after them saved back as patch files.

    rocm-pants/pinned   the pinned tree (the fetched commit; its submodules' files in it)
    one commit each     our patch files, in the order the build applies them, each with the
                        patch's header as its message
    rocm-pants/saved    where the last checkout or save ended: `--save` writes the commits after it

Engine-free, on the host's git: the `patch-workspace` goal (goals/patch_workspace.py) runs it in
Pants' own process with what the engine resolved from the target (the fetched pack, the ordered
patch files, the patch set's directory), and `pants run rules:patch-workspace`
(programs/patch_workspace.py) with what a pins file and a patches directory say. Both apply each
patch with the script the build applies it with (scripts/apply_patches.py), so a patch applies in
the workspace exactly when it applies in a build.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from rocm_build.script_modules import script_bytes
from rocm_build.upstream.patch_headers import KEYS, header_fields, header_of, missing_keys

BASE_TAG = "rocm-pants/pinned"
SAVED_TAG = "rocm-pants/saved"
BRANCH = "patches"
PACK_NAME = "pack-pinned"  # the fetched pack, written into .git/objects/pack/ as is
OWNER_KEY = "rocm-pants.target"  # which target (or pin) the workspace was made for
# Only the host's git itself: no system or user config (a user's diff.noprefix would change the
# patches we write), no prompt; commits by a fixed name, so no identity needs to be set up.
GIT_ENV = {
    "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "rocm-pants", "GIT_AUTHOR_EMAIL": "rocm-pants@localhost",
    "GIT_COMMITTER_NAME": "rocm-pants", "GIT_COMMITTER_EMAIL": "rocm-pants@localhost",
}  # fmt: skip
_NUMBERED = re.compile(r"^(\d{4})-")


class WorkspaceError(Exception):
    """A step that cannot go on; the message names the workspace, the commit or patch, and the fix."""


def git(dest: Path, *args: str, env: Optional[Dict[str, str]] = None, stdin: Optional[str] = None, strip: bool = True) -> str:
    result = subprocess.run(
        ["git", "-C", str(dest), *args], input=stdin, capture_output=True, text=True,
        env={**os.environ, **GIT_ENV, **(env or {})},
    )  # fmt: skip
    if result.returncode != 0:
        raise WorkspaceError(f"`git {' '.join(args)}` failed in {dest}: {result.stderr.strip()}")
    return result.stdout.strip() if strip else result.stdout


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


def base_tagged(dest: Path) -> None:
    """The checked-out commit as the base (`pants run rules:patch-workspace`, which fetched it)."""
    git(dest, "checkout", "-q", "-B", BRANCH)
    git(dest, "tag", "-f", BASE_TAG)


def _apply_script(python: str, *args: str) -> subprocess.CompletedProcess:
    with tempfile.NamedTemporaryFile("wb", suffix=".py", delete=False) as f:
        f.write(script_bytes("apply_patches.py"))
    try:
        return subprocess.run([python, f.name, *args], capture_output=True, text=True, env={**os.environ, **GIT_ENV})
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
        present = [p for p in git(dest, "ls-tree", "-r", "-z", "--name-only", BASE_TAG, "--", *paths, strip=False).split("\0") if p]
        if present:  # into a directory of its own, through an index of its own: the workspace is left alone
            git(dest, f"--work-tree={tree}", "checkout", BASE_TAG, "--", *present, env={"GIT_INDEX_FILE": os.path.join(tmp, "index")})
        return patches_apply(python, str(tree), patches)


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


def next_number(names: Sequence[str]) -> int:
    """After the highest NNNN- of the patch set's files: new patches apply after them."""
    return max((int(m.group(1)) for n in names if (m := _NUMBERED.match(os.path.basename(n)))), default=0) + 1


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
    if header_of("message.patch", message).strip() != message.strip():
        return (
            f"commit {commit[:12]} ({subject!r}) has a line in its message that `git apply` would read as the "
            "start of a diff (`diff --git`, `--- ` then `+++ `, `Index: `); reword it"
        )
    return None


def new_patches(dest: Path, first_number: int) -> List[Tuple[str, str]]:
    """(file name, text) of each commit after rocm-pants/saved, numbered from `first_number`:
    its message (with its Why:/Upstream:/Drop when:) as the header, then its diff. Every commit
    is checked before any file is made: one without its keys refuses them all."""
    if git(dest, "status", "--porcelain"):
        raise WorkspaceError(f"{dest} has changes not committed; commit them (or `git stash` them) first")
    commits = git(dest, "rev-list", "--reverse", "--topo-order", f"{SAVED_TAG}..HEAD").split()
    problems, found = [], []
    for commit in commits:
        parents = git(dest, "rev-list", "--parents", "-n", "1", commit).split()[1:]
        message = git(dest, "log", "-1", "--format=%B", commit).strip()
        subject = message.splitlines()[0] if message else ""
        if len(parents) != 1:
            problems.append(f"commit {commit[:12]} ({subject!r}) is a merge; rebase onto {SAVED_TAG} to make it one line of commits")
            continue
        problem = commit_problem(commit, subject, message)
        diff = git(dest, "diff", "--binary", "--no-color", "--no-ext-diff", "--no-textconv",
                   "--src-prefix=a/", "--dst-prefix=b/", parents[0], commit, strip=False)  # fmt: skip
        if not diff:
            problem = problem or f"commit {commit[:12]} ({subject!r}) changes nothing; drop it (`git rebase -i {SAVED_TAG}`)"
        if problem:
            problems.append(problem)
            continue
        found.append((f"{first_number + len(found):04d}-{slug(subject)}.patch", f"{message}\n\n{diff}"))
    if problems:
        fix = f"`git commit --amend` for the last commit, `git rebase -i {SAVED_TAG}` for an earlier one"
        raise WorkspaceError("nothing was written: " + "; ".join(problems) + f". Fix the messages in {dest} ({fix}), then save again")
    return found


def mark_saved(dest: Path) -> None:
    git(dest, "tag", "-f", SAVED_TAG)
