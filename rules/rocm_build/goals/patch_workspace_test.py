"""The `patch-workspace` goal's steps (goals/patch_workspace.py) on real git repositories: the
checkout from a fetched pack, the save into the target's patch set, and odd and hostile input
(issue 65). `run` takes the goal rule's steps in its order with what the engine would give it
(the target's `WorkspaceSource`, the pack of scripts/source_pack.py's fetch); the engine's part
is in tests/e2e/patch_loop_test.py."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Tuple

import pytest
from pants.engine.addresses import Address
from pants.engine.fs import EMPTY_DIGEST

from rocm_build.goals.patch_workspace import (
    PatchSetInfo, WorkspacePack, WorkspaceSource, before_checkout, checkout, chosen_patch_set, failure, save,
)  # fmt: skip
from rocm_build.testutil.git_fixtures import ARCHS_PATCH, ARCHS_SETUP, commit_files, git, init_repo
from rocm_build.upstream import workspace_repo
from rocm_build.upstream.patch_headers import header_fields, header_of
from rocm_build.upstream.workspace_repo import PACK_NAME, WorkspaceError
from rocm_build.upstream.workspace_repo_test import PYTHON, fetched_pack

HEADER = "Add gfx1151 to ARCHS.\n\nWhy: the pin builds no gfx1151 code.\nUpstream: none\nDrop when: ARCHS lists it.\n\n"
OWNER = "up:src"
SET_DIR = "patches/mini"
WHY = "\n\nWhy: w.\nUpstream: none\nDrop when: d."


class Repo:
    """A build root with the patch set patches/mini (of target up:src, pin `mini`) and the pack
    of the pinned commit."""

    def __init__(self, tmp_path: Path, sha: str, pack: Path) -> None:
        self.root, self.sha, self.pack = tmp_path / "repo", sha, pack
        self.patches = self.root / SET_DIR
        self.patches.mkdir(parents=True)

    def source(self) -> WorkspaceSource:
        """What the engine resolves from the target now: its patch files in build order."""
        files = tuple(f"{SET_DIR}/{n}" for n in sorted(p.name for p in self.patches.iterdir()))
        patch_files = tuple(f for f in files if f.endswith((".patch", ".diff", ".edit.toml")))
        patch_set = PatchSetInfo(Address(SET_DIR, target_name="gfx1151"), ("*.patch", "*.diff", "*.edit.toml"), files)
        return WorkspaceSource(OWNER, "mini", f"mini @ {self.sha[:12]}", patch_files, (patch_set,), PYTHON)

    @property
    def work(self) -> Path:
        return self.root / "work" / "mini"


class PackOnDisk:
    """The goal's Workspace as `checkout` uses it: the fetched pack written under a prefix."""

    def __init__(self, root: Path, pack: Path) -> None:
        self.root, self.pack = root, pack

    def write_digest(self, digest, path_prefix: str) -> None:
        assert digest == EMPTY_DIGEST
        (self.root / path_prefix).mkdir(parents=True, exist_ok=True)
        for ext in ("pack", "idx"):
            shutil.copy(self.pack / f"objects.{ext}", self.root / path_prefix / f"{PACK_NAME}.{ext}")


def run(repo: Repo, action: str, capsys=None) -> Tuple[int, str, str]:
    """The goal rule's steps (`./pants patch-workspace [--save] up:src`): exit code, out, err."""
    source, dest_rel = repo.source(), "work/mini"
    dest, root = repo.root / dest_rel, str(repo.root)
    out = []
    try:
        if action == "checkout":
            cleared = before_checkout(source, dest, dest_rel, root)
            out += [cleared] if cleared else []
            repos = tuple(tuple(reversed(line.split(" ", 1))) for line in (repo.pack / "repos").read_text().splitlines())
            out.append(checkout(source, WorkspacePack(EMPTY_DIGEST, repos), dest, dest_rel, root, PackOnDisk(repo.root, repo.pack)))
            return 0, "\n".join(out) + "\n", ""
        new = save(source, chosen_patch_set(source, None), dest, dest_rel, root)
        if not new.files:
            return 0, f"no new commits in {dest_rel} since the last save; nothing written\n", ""
        for path, data in new.files:
            (repo.root / path).write_bytes(data)
        workspace_repo.mark_saved(dest, new)
    except WorkspaceError as e:
        return 1, "\n".join(out) + ("\n" if out else ""), failure(source, e, dest, dest_rel) + "\n"
    return 0, "".join(f"wrote {path}\n" for path, _ in new.files), ""


def fixture(tmp_path: Path, upstream_files=None) -> Repo:
    upstream = init_repo(tmp_path / "up")
    if upstream_files is None:
        sha = commit_files(upstream, {"setup.py": ARCHS_SETUP, "lib.py": "x = 1\n"})
    else:
        for name, data in upstream_files.items():
            (upstream / name).write_bytes(data)
        git(upstream, "add", "-A")
        git(upstream, "commit", "-qm", "pinned")
        sha = git(upstream, "rev-parse", "HEAD")
    repo = Repo(tmp_path, sha, fetched_pack(tmp_path, f"file://{upstream}", sha))
    (repo.patches / "BUILD").write_text('patch_set(name="gfx1151")\n')
    if upstream_files is None:
        (repo.patches / "0001-archs.patch").write_text(HEADER + ARCHS_PATCH)
    return repo


def test_checkout_edit_save_roundtrip(tmp_path: Path) -> None:
    repo = fixture(tmp_path)
    work = repo.work
    code, out, _ = run(repo, "checkout")
    assert code == 0 and out.startswith(f"work/mini: {OWNER} at mini @ {repo.sha[:12]} (tag rocm-pants/pinned), then 1 patch file(s)")
    assert (work / "setup.py").read_text() == "ARCHS = ['gfx90a', 'gfx1151']\n"
    # One commit per patch file, its header the message.
    assert git(work, "log", "--format=%B", "-1").strip() == HEADER.strip()
    assert git(work, "rev-parse", "rocm-pants/pinned") == repo.sha

    (work / "lib.py").write_text("x = 1151\n")
    git(work, "commit", "-qam", "Use gfx1151 in lib")
    # A commit without the header's keys is refused, naming it and the keys; nothing is written.
    code, _, err = run(repo, "save")
    assert code == 1 and "('Use gfx1151 in lib') has no `Why:`, `Upstream:`, `Drop when:` in its message" in err, err
    assert sorted(p.name for p in repo.patches.iterdir()) == ["0001-archs.patch", "BUILD"]

    git(work, "commit", "-q", "--amend", "-m", "Use gfx1151 in lib\n\nWhy: lib says 1.\nUpstream: none\nDrop when: never")
    assert run(repo, "save") == (0, f"wrote {SET_DIR}/0002-Use-gfx1151-in-lib.patch\n", "")
    saved = repo.patches / "0002-Use-gfx1151-in-lib.patch"
    text = saved.read_text()
    assert "+x = 1151" in text and not text.startswith("From ")
    assert header_fields(header_of(saved.name, text)) == {"Why": "lib says 1.", "Upstream": "none", "Drop when": "never"}
    assert run(repo, "save") == (0, "no new commits in work/mini since the last save; nothing written\n", "")

    # The saved patch set reproduces the workspace from a fresh checkout (every commit saved:
    # the old one is made afresh).
    tree = git(work, "rev-parse", "HEAD^{tree}")
    code, out, _ = run(repo, "checkout")
    assert code == 0 and out.startswith("work/mini: every commit of it was saved as a patch file; checking it out afresh\n")
    assert (work / "lib.py").read_text() == "x = 1151\n" and git(work, "rev-parse", "HEAD^{tree}") == tree


def test_checkout_refuses_a_directory_that_is_no_workspace(tmp_path: Path) -> None:
    repo = fixture(tmp_path)
    (repo.work / "x").mkdir(parents=True)
    code, _, err = run(repo, "checkout")
    assert code == 1 and "already exists" in err, err
    assert [p.name for p in repo.work.iterdir()] == ["x"]


def test_a_target_without_a_patch_set_has_nowhere_to_save(tmp_path: Path) -> None:
    repo = fixture(tmp_path)
    source = WorkspaceSource(OWNER, "mini", "mini @ x", (), (), PYTHON)
    with pytest.raises(WorkspaceError, match=r"up:src has no patch set to save into: add a directory with a BUILD file"):
        chosen_patch_set(source, None)
    assert chosen_patch_set(repo.source(), None).directory == SET_DIR


def test_a_patch_that_does_not_apply_stops_the_checkout_with_the_builds_message(tmp_path: Path) -> None:
    # 0002 was made against the pinned setup.py, not on top of 0001: the message says so, as a
    # build's would, and the workspace keeps the pinned tree with 0001 to redo 0002 on.
    repo = fixture(tmp_path)
    (repo.patches / "0002-other.patch").write_text(HEADER + ARCHS_PATCH.replace("'gfx1151'", "'gfx1100'"))
    code, _, err = run(repo, "checkout")
    first, second = f"{SET_DIR}/0001-archs.patch", f"{SET_DIR}/0002-other.patch"
    assert code == 1 and f"{second}: the hunk at setup.py line 1 does not match setup.py as {first} leaves it" in err, err
    assert f"but it does match the pinned file: it was made without {first}, which the build applies before it" in err
    assert f"holds the pinned tree and the 1 patch(es) before {second} as commits" in err
    work = repo.work
    assert git(work, "rev-list", "--count", "rocm-pants/pinned..HEAD") == "1" and not git(work, "status", "--porcelain")


def test_the_fix_a_failed_patch_prints_works_while_its_workspace_is_there(tmp_path: Path) -> None:
    # The build's message says: check the target out in a workspace. A workspace of it whose
    # commits are all saved (here: the one a failed checkout left) is made again; one with a
    # commit not saved is refused, naming it, and left as it is.
    repo = fixture(tmp_path)
    (repo.patches / "0002-other.patch").write_text(HEADER + ARCHS_PATCH.replace("'gfx1151'", "'gfx1100'"))
    work = repo.work
    first = run(repo, "checkout")
    again = run(repo, "checkout")
    assert first[0] == again[0] == 1
    assert again[1] == "work/mini: every commit of it was saved as a patch file; checking it out afresh\n"
    assert again[2] == first[2] and "already exists" not in again[2]

    (repo.patches / "0002-other.patch").unlink()
    assert run(repo, "checkout")[0] == 0
    (work / "lib.py").write_text("x = 1151\n")
    git(work, "commit", "-qam", "Use gfx1151 in lib")
    (work / "setup.py").write_text("changed\n")
    assert run(repo, "checkout") == (1, "", (
        f"patch-workspace {OWNER}: work/mini already exists (a workspace of {OWNER}) and holds work not saved: 1 commit(s) "
        f"after rocm-pants/saved, changes not committed; save its new commits with `./pants patch-workspace --save {OWNER}`, "
        f"or remove it (`rm -rf work/mini`) for a fresh checkout of {OWNER}\n"
    ))  # fmt: skip
    assert git(work, "log", "-1", "--format=%s") == "Use gfx1151 in lib"
    git(work, "checkout", "-q", "--", "setup.py")
    (work / "lib.py").write_text("x = 2\n")
    git(work, "stash", "-q")
    git(work, "tag", "-f", "rocm-pants/saved")
    code, _, err = run(repo, "checkout")
    assert code == 1 and "holds work not saved: the ref refs/stash;" in err, err


# Odd and hostile input (issue 65). Each test makes its input, asserts the exact message, that
# the workspace's commits and the saved set agree (a fresh checkout of the set has the
# workspace's tree), and that nothing else changed.


def tree_of(repo: Path, rev: str = "HEAD") -> str:
    return git(repo, "rev-parse", f"{rev}^{{tree}}")


def files_under(root: Path) -> dict:
    """Every path under `root` with its bytes (links as their target): what a test compares
    before and after to show nothing changed there."""
    seen = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            seen[str(path)] = ("link", os.readlink(path))
        elif path.is_file():
            seen[str(path)] = ("file", path.read_bytes())
    return seen


def roundtrip(tmp_path: Path, upstream_files: dict, edit) -> tuple:
    """Checkout, `edit(work)` then commit, save; returns (the committed tree, the saved file, the
    tree of a fresh checkout of the set)."""
    repo = fixture(tmp_path, upstream_files)
    assert run(repo, "checkout")[0] == 0
    edit(repo.work)
    git(repo.work, "add", "-A")
    git(repo.work, "commit", "-qm", f"Edit{WHY}")
    committed = tree_of(repo.work)
    assert run(repo, "save")[0] == 0
    [saved] = sorted(repo.patches.glob("*.patch"))
    assert run(repo, "checkout")[0] == 0  # every commit saved: made afresh from the set
    return committed, saved, repo.work


@pytest.mark.parametrize(
    "name, pinned, edited, diff",
    [
        ("win.txt", b"one\r\ntwo\r\n", b"one\r\nTWO\r\n", b"-two\r\n+TWO\r\n"),  # a CRLF file keeps its `\r`
        ("latin1.txt", b"caf\xe9\n", b"caf\xe9 au lait\n", b"-caf\xe9\n+caf\xe9 au lait\n"),  # not UTF-8
    ],
    ids=["crlf", "latin1"],
)
def test_a_files_bytes_are_saved_as_they_are(tmp_path: Path, name: str, pinned: bytes, edited: bytes, diff: bytes) -> None:
    committed, saved, fresh = roundtrip(tmp_path, {name: pinned}, lambda work: (work / name).write_bytes(edited))
    assert diff in saved.read_bytes()
    assert (fresh / name).read_bytes() == edited
    assert tree_of(fresh) == committed  # the saved set is what was committed


def saved_workspace(tmp_path: Path) -> Repo:
    """A workspace with one commit saved (0002)."""
    repo = fixture(tmp_path)
    assert run(repo, "checkout")[0] == 0
    (repo.work / "lib.py").write_text("x = 1151\n")
    git(repo.work, "commit", "-qam", f"Use gfx1151 in lib{WHY}")
    assert run(repo, "save")[0] == 0
    return repo


def test_a_commit_made_while_the_save_runs_is_not_marked_saved(tmp_path: Path, monkeypatch) -> None:
    repo = saved_workspace(tmp_path)
    work = repo.work
    (work / "lib.py").write_text("x = 2\n")
    git(work, "commit", "-qam", f"Second{WHY}")
    read = git(work, "rev-parse", "HEAD")
    checked = workspace_repo.check_saved_set

    def commit_meanwhile(*args, **kwargs):  # the user commits after the save read HEAD
        (work / "lib.py").write_text("x = 3\n")
        git(work, "commit", "-qam", f"Third{WHY}")
        return checked(*args, **kwargs)

    monkeypatch.setattr(workspace_repo, "check_saved_set", commit_meanwhile)
    assert run(repo, "save") == (0, f"wrote {SET_DIR}/0003-Second.patch\n", "")
    monkeypatch.undo()
    assert git(work, "rev-parse", "rocm-pants/saved") == read != git(work, "rev-parse", "HEAD")
    # The next save writes the commit made meanwhile.
    assert run(repo, "save") == (0, f"wrote {SET_DIR}/0004-Third.patch\n", "")
    assert b"+x = 3\n" in (repo.patches / "0004-Third.patch").read_bytes()


def test_a_rewritten_saved_history_is_refused_saying_how_to_redo_it(tmp_path: Path) -> None:
    repo = saved_workspace(tmp_path)
    work = repo.work
    saved = git(work, "rev-parse", "rocm-pants/saved")
    git(work, "commit", "-q", "--amend", "-m", f"Use gfx1151 in lib, reworded{WHY}")
    before = files_under(repo.patches)
    assert run(repo, "save") == (1, "", (
        f"patch-workspace {OWNER}: work/mini: rocm-pants/saved ({saved[:12]}) is not an ancestor of HEAD: commits already "
        "saved as patch files were rewritten (a rebase or an amend), and saving them again would write them twice. Nothing "
        "was written. To change a saved patch, go back to the saved history (`git branch rewritten` keeps your rewrite, "
        "then `git reset --hard rocm-pants/saved`) and make the change as a new commit on top, or edit the patch file "
        "itself and make the workspace again (remove work/mini)\n"
    ))  # fmt: skip
    assert files_under(repo.patches) == before and git(work, "rev-parse", "rocm-pants/saved") == saved


def test_a_deleted_saved_tag_gets_our_message(tmp_path: Path) -> None:
    repo = saved_workspace(tmp_path)
    git(repo.work, "tag", "-d", "rocm-pants/saved")
    before = files_under(repo.patches)
    assert run(repo, "save") == (1, "", (
        f"patch-workspace {OWNER}: work/mini has no tag rocm-pants/saved (where the last checkout or save ended), so which "
        "commits are new is not known; nothing was written. Tag the last commit already saved as a patch file (`git tag "
        "rocm-pants/saved <commit>`; `git log --oneline rocm-pants/pinned..` lists them), then save again\n"
    ))  # fmt: skip
    assert files_under(repo.patches) == before


def test_a_set_that_no_longer_gives_the_committed_tree_is_not_saved(tmp_path: Path) -> None:
    # The set's 0001 changed since the checkout (pulled from main): the commits on top of the old
    # one, saved, would not give a build what the user committed.
    repo = saved_workspace(tmp_path)
    first = repo.patches / "0001-archs.patch"
    first.write_text(first.read_text().replace("'gfx1151']", "'gfx1100']"))
    (repo.work / "lib.py").write_text("x = 2\n")
    git(repo.work, "commit", "-qam", f"Second{WHY}")
    before = files_under(repo.patches)
    assert run(repo, "save") == (1, "", (
        f"patch-workspace {OWNER}: nothing was written: the patch set with the new patches applied to the pinned tree, as a "
        f"build applies it, is not the tree of {git(repo.work, 'rev-parse', 'HEAD')[:12]} (HEAD): setup.py differ. A build "
        "applies the set's patches in file-name order, each set in the order of the target's `patches`: order the "
        "commits so (`git rebase -i rocm-pants/saved`), then save again\n"
    ))  # fmt: skip
    assert files_under(repo.patches) == before


@pytest.mark.parametrize(
    "make, said",
    [
        (lambda w: os.symlink("../../../etc/passwd", w / "evil"),
         "makes evil a symbolic link out of the tree (to ../../../etc/passwd); every build refuses it: link to a file "
         "of the tree, or copy the file in, and amend the commit"),
        (lambda w: (w / "a\nb.txt").write_text("x\n"),
         "has a file whose name holds a line break ('a\\nb.txt'); every build refuses it: rename it (`git mv`) and "
         "amend the commit"),
        (lambda w: open(os.path.join(os.fsencode(w), b"caf\xe9.txt"), "wb").write(b"x\n"),
         "has a file whose name is not UTF-8 (caf\\xe9.txt); every build refuses it: rename it to a UTF-8 name "
         "(`git mv`) and amend the commit"),
    ],
    ids=["symlink-out", "newline-name", "latin1-name"],
)
def test_save_refuses_what_every_build_refuses(tmp_path: Path, make, said) -> None:
    repo = saved_workspace(tmp_path)
    make(repo.work)
    git(repo.work, "add", "-A")
    git(repo.work, "commit", "-qm", f"Odd{WHY}")
    head = git(repo.work, "rev-parse", "HEAD")
    before = files_under(repo.patches)
    assert run(repo, "save") == (1, "", (
        f"patch-workspace {OWNER}: nothing was written: commit {head[:12]} ('Odd') {said}. Fix them in work/mini (`git "
        "commit --amend` for the last commit, `git rebase -i rocm-pants/saved` for an earlier one), then save again\n"
    ))  # fmt: skip
    assert files_under(repo.patches) == before


HOOK = "#!/bin/sh\necho \"$0 $*\" >> {marker}\n"


def test_the_callers_git_does_not_reach_ours(tmp_path: Path, monkeypatch) -> None:
    # As inside a git hook of the user's own repository: GIT_DIR, GIT_INDEX_FILE and
    # GIT_WORK_TREE point there, and config from the environment (GIT_CONFIG_COUNT, and what
    # `git -c` hands down) sets a hooks directory.
    outer = init_repo(tmp_path / "outer")
    commit_files(outer, {"mine.txt": "mine\n"})
    hooks, marker = tmp_path / "hooks", tmp_path / "hook-ran"
    hooks.mkdir()
    for name in ("pre-commit", "commit-msg", "post-commit", "post-checkout", "reference-transaction"):
        (hooks / name).write_text(HOOK.format(marker=marker))
        (hooks / name).chmod(0o755)
    repo = fixture(tmp_path)  # the fixtures' own git, before the environment is set
    before = files_under(outer)
    callers = {
        "GIT_DIR": str(outer / ".git"), "GIT_INDEX_FILE": str(outer / ".git" / "index"), "GIT_WORK_TREE": str(outer),
        "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.hooksPath", "GIT_CONFIG_VALUE_0": str(hooks),
        "GIT_CONFIG_PARAMETERS": f"'core.hooksPath'='{hooks}'",
    }  # fmt: skip
    with monkeypatch.context() as env:
        for name, value in callers.items():
            env.setenv(name, value)
        code, _, err = run(repo, "checkout")
        assert code == 0, err
    work = repo.work
    (work / "lib.py").write_text("x = 1151\n")
    git(work, "commit", "-qam", f"Use gfx1151 in lib{WHY}")  # the user's commit, with no hook of theirs
    # A hook in the workspace's own .git/hooks does not run either.
    (work / ".git" / "hooks" / "reference-transaction").write_text(HOOK.format(marker=marker))
    (work / ".git" / "hooks" / "reference-transaction").chmod(0o755)
    with monkeypatch.context() as env:
        for name, value in callers.items():
            env.setenv(name, value)
        code, _, err = run(repo, "save")
        assert code == 0, err
    assert not marker.exists(), marker.read_text()
    assert files_under(outer) == before  # its config, index and refs as they were
    assert git(work, "rev-parse", "rocm-pants/saved") == git(work, "rev-parse", "HEAD")
    committed = tree_of(work)
    assert run(repo, "checkout")[0] == 0
    assert tree_of(work) == committed


def test_work_links_and_files_are_refused(tmp_path: Path) -> None:
    repo = fixture(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (repo.root / "work").symlink_to(elsewhere)
    assert run(repo, "checkout") == (1, "", (
        f"patch-workspace {OWNER}: work is a symbolic link (to {elsewhere}); the patch workspace is made only inside the "
        "repository, so it does not follow one: remove the link (`rm work`), then run it again\n"
    ))  # fmt: skip
    (repo.root / "work").unlink()
    (repo.root / "work").mkdir()
    repo.work.symlink_to(tmp_path / "gone")
    assert run(repo, "save") == (1, "", (
        f"patch-workspace {OWNER}: work/mini is a symbolic link (to {tmp_path / 'gone'}); the patch workspace is made only "
        "inside the repository, so it does not follow one: remove the link (`rm work/mini`), then run it again\n"
    ))  # fmt: skip
    repo.work.unlink()
    repo.work.write_text("notes\n")
    assert run(repo, "checkout") == (1, "", (
        f"patch-workspace {OWNER}: work/mini is a file, where the patch workspace's directory goes: move it away "
        "(`mv work/mini work/mini.old`), then run it again\n"
    ))  # fmt: skip
    assert list(elsewhere.iterdir()) == [] and not (tmp_path / "gone").exists()
    assert repo.work.read_text() == "notes\n"
