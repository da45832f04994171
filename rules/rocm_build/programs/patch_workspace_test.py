from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocm_build.testutil.git_fixtures import ARCHS_PATCH, ARCHS_SETUP, commit_files, git, init_repo
from rocm_build.programs.patch_workspace import main
from rocm_build.upstream import workspace_repo
from rocm_build.upstream.patch_headers import header_fields, header_of

HEADER = "Add gfx1151 to ARCHS.\n\nWhy: the pin builds no gfx1151 code.\nUpstream: none\nDrop when: ARCHS lists it.\n\n"


def fixture(tmp_path: Path, with_build: bool = True):
    upstream = init_repo(tmp_path / "up")
    sha = commit_files(upstream, {"setup.py": ARCHS_SETUP, "lib.py": "x = 1\n"})
    pins = tmp_path / "pins.toml"
    pins.write_text(f'[mini]\nurl = "file://{upstream}"\ntrack = "main"\ncommit = "{sha}"\n')
    patches = tmp_path / "patches"
    (patches / "mini").mkdir(parents=True)
    (patches / "mini" / "0001-archs.patch").write_text(HEADER + ARCHS_PATCH)
    if with_build:
        (patches / "mini" / "BUILD").write_text('patch_set(name="gfx1151")\n')
    return sha, pins, patches


def test_checkout_edit_save_roundtrip(tmp_path: Path, capsys) -> None:
    sha, pins, patches = fixture(tmp_path)
    work = tmp_path / "work"
    common = ["--pins-file", str(pins), "--patches-dir", str(patches), "--dest", str(work)]

    assert main(["checkout", "mini", *common]) == 0
    assert (work / "setup.py").read_text() == "ARCHS = ['gfx90a', 'gfx1151']\n"
    # One commit per patch file, its header the message.
    assert git(work, "log", "--format=%B", "-1").strip() == HEADER.strip()
    assert git(work, "rev-parse", "rocm-pants/pinned") == sha

    (work / "lib.py").write_text("x = 1151\n")
    git(work, "commit", "-qam", "Use gfx1151 in lib")
    # A commit without the header's keys is refused, naming it and the keys; nothing is written.
    assert main(["save", "mini", *common]) == 1
    err = capsys.readouterr().err
    assert "('Use gfx1151 in lib') has no `Why:`, `Upstream:`, `Drop when:` in its message" in err, err
    assert sorted(p.name for p in (patches / "mini").iterdir()) == ["0001-archs.patch", "BUILD"]

    git(work, "commit", "-q", "--amend", "-m", "Use gfx1151 in lib\n\nWhy: lib says 1.\nUpstream: none\nDrop when: never")
    assert main(["save", "mini", *common]) == 0
    saved = patches / "mini" / "0002-Use-gfx1151-in-lib.patch"
    text = saved.read_text()
    assert "+x = 1151" in text and not text.startswith("From ")
    assert header_fields(header_of(saved.name, text)) == {"Why": "lib says 1.", "Upstream": "none", "Drop when": "never"}
    assert main(["save", "mini", *common]) == 0
    assert "nothing written" in capsys.readouterr().out

    # The saved patch set reproduces the workspace from a fresh checkout.
    fresh = tmp_path / "fresh"
    assert main(["checkout", "mini", "--pins-file", str(pins), "--patches-dir", str(patches), "--dest", str(fresh)]) == 0
    assert (fresh / "lib.py").read_text() == "x = 1151\n"


def test_checkout_refuses_non_empty_dest(tmp_path: Path, capsys) -> None:
    _, pins, patches = fixture(tmp_path)
    (tmp_path / "work" / "x").mkdir(parents=True)
    args = ["checkout", "mini", "--pins-file", str(pins), "--patches-dir", str(patches), "--dest", str(tmp_path / "work")]
    assert main(args) == 1
    assert "already exists" in capsys.readouterr().err


def test_a_directory_no_patch_set_reads_is_refused(tmp_path: Path, capsys) -> None:
    # The pin's name is not the patch set's directory (mini-vllm, tests/mini/patches/vllm): never
    # an empty checkout, never a save where no build reads it.
    _, pins, patches = fixture(tmp_path, with_build=False)
    work = tmp_path / "work"
    assert main(["checkout", "mini", "--pins-file", str(pins), "--patches-dir", str(patches), "--dest", str(work)]) == 1
    err = capsys.readouterr().err
    assert f"{patches / 'mini'} is not a patch set's directory (no BUILD file with a patch_set there)" in err
    assert "./pants patch-workspace <target>" in err and not work.exists()


def test_a_patch_that_does_not_apply_stops_the_checkout_with_the_builds_message(tmp_path: Path, capsys) -> None:
    # 0002 was made against the pinned setup.py, not on top of 0001: the message says so, as a
    # build's would, and the workspace keeps the pinned tree with 0001 to redo 0002 on.
    _, pins, patches = fixture(tmp_path)
    against_pinned = ARCHS_PATCH.replace("'gfx1151'", "'gfx1100'")
    (patches / "mini" / "0002-other.patch").write_text(HEADER + against_pinned)
    work = tmp_path / "work"
    assert main(["checkout", "mini", "--pins-file", str(pins), "--patches-dir", str(patches), "--dest", str(work)]) == 1
    err = capsys.readouterr().err
    first, second = str(patches / "mini" / "0001-archs.patch"), str(patches / "mini" / "0002-other.patch")
    assert f"{second}: the hunk at setup.py line 1 does not match setup.py as {first} leaves it" in err, err
    assert f"but it does match the pinned file: it was made without {first}, which the build applies before it" in err
    assert f"holds the pinned tree and the 1 patch(es) before {second} as commits" in err
    assert git(work, "rev-list", "--count", "rocm-pants/pinned..HEAD") == "1" and not git(work, "status", "--porcelain")


def test_the_fix_a_failed_patch_prints_works_while_its_workspace_is_there(tmp_path: Path, capsys) -> None:
    # The build's message says: check the target out in a workspace. A workspace of it whose
    # commits are all saved (here: the one a failed checkout left) is made again; one with a
    # commit not saved is refused, naming it, and left as it is.
    _, pins, patches = fixture(tmp_path)
    (patches / "mini" / "0002-other.patch").write_text(HEADER + ARCHS_PATCH.replace("'gfx1151'", "'gfx1100'"))
    work = tmp_path / "work"
    args = ["checkout", "mini", "--pins-file", str(pins), "--patches-dir", str(patches), "--dest", str(work)]
    assert main(args) == 1
    first = capsys.readouterr()
    assert main(args) == 1
    again = capsys.readouterr()
    assert again.out.startswith(f"{work}: every commit of it was saved as a patch file; checking it out afresh\n")
    assert again.err == first.err and "already exists" not in again.err

    (patches / "mini" / "0002-other.patch").unlink()
    assert main(args) == 0
    (work / "lib.py").write_text("x = 1151\n")
    git(work, "commit", "-qam", "Use gfx1151 in lib")
    (work / "setup.py").write_text("changed\n")
    assert main(args) == 1
    assert capsys.readouterr().err == (
        f"patch-workspace: {work} already exists (a workspace of pin:mini) and holds work not saved: 1 commit(s) after "
        "rocm-pants/saved, changes not committed; save its new commits with `pants run rules:patch-workspace -- save "
        f"mini`, or remove it (`rm -rf {work}`) for a fresh checkout of pin:mini\n"
    )
    assert git(work, "log", "-1", "--format=%s") == "Use gfx1151 in lib"
    git(work, "checkout", "-q", "--", "setup.py")
    git(work, "stash", "list")  # no stash yet
    (work / "lib.py").write_text("x = 2\n")
    git(work, "stash", "-q")
    git(work, "tag", "-f", "rocm-pants/saved")
    assert main(args) == 1
    assert "holds work not saved: the ref refs/stash;" in capsys.readouterr().err


# Odd and hostile input (issue 65). Each test makes its input, asserts the exact message, that
# the workspace's commits and the saved set agree (a fresh checkout of the set has the
# workspace's tree), and that nothing else changed.

WHY = "\n\nWhy: w.\nUpstream: none\nDrop when: d."


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
    """Checkout, `edit(work)` then commit, save; returns (work, the saved file, a fresh checkout)."""
    upstream = init_repo(tmp_path / "up")
    for name, data in upstream_files.items():
        (upstream / name).write_bytes(data)
    git(upstream, "add", "-A")
    git(upstream, "commit", "-qm", "pinned")
    sha = git(upstream, "rev-parse", "HEAD")
    pins = tmp_path / "pins.toml"
    pins.write_text(f'[mini]\nurl = "file://{upstream}"\ntrack = "main"\ncommit = "{sha}"\n')
    patches = tmp_path / "patches"
    (patches / "mini").mkdir(parents=True)
    (patches / "mini" / "BUILD").write_text('patch_set(name="gfx1151")\n')
    work, fresh = tmp_path / "work", tmp_path / "fresh"
    common = ["--pins-file", str(pins), "--patches-dir", str(patches)]
    assert main(["checkout", "mini", *common, "--dest", str(work)]) == 0
    edit(work)
    git(work, "add", "-A")
    git(work, "commit", "-qm", f"Edit{WHY}")
    assert main(["save", "mini", *common, "--dest", str(work)]) == 0
    [saved] = sorted((patches / "mini").glob("*.patch"))
    assert main(["checkout", "mini", *common, "--dest", str(fresh)]) == 0
    return work, saved, fresh


def test_a_crlf_files_diff_keeps_its_carriage_returns(tmp_path: Path) -> None:
    def edit(work: Path) -> None:
        (work / "win.txt").write_bytes(b"one\r\nTWO\r\n")

    work, saved, fresh = roundtrip(tmp_path, {"win.txt": b"one\r\ntwo\r\n"}, edit)
    assert b"-two\r\n+TWO\r\n" in saved.read_bytes()
    assert (fresh / "win.txt").read_bytes() == b"one\r\nTWO\r\n"
    assert tree_of(fresh) == tree_of(work)  # the saved set is what was committed


def test_a_latin1_files_commit_is_saved(tmp_path: Path) -> None:
    def edit(work: Path) -> None:
        (work / "latin1.txt").write_bytes(b"caf\xe9 au lait\n")

    work, saved, fresh = roundtrip(tmp_path, {"latin1.txt": b"caf\xe9\n"}, edit)
    assert b"-caf\xe9\n+caf\xe9 au lait\n" in saved.read_bytes()
    assert (fresh / "latin1.txt").read_bytes() == b"caf\xe9 au lait\n"
    assert tree_of(fresh) == tree_of(work)


def saved_workspace(tmp_path: Path, capsys) -> tuple:
    """A workspace with one commit saved (0002); returns (work, patches dir, the save's argv)."""
    _, pins, patches = fixture(tmp_path)
    work = tmp_path / "work"
    common = ["--pins-file", str(pins), "--patches-dir", str(patches), "--dest", str(work)]
    assert main(["checkout", "mini", *common]) == 0
    (work / "lib.py").write_text("x = 1151\n")
    git(work, "commit", "-qam", f"Use gfx1151 in lib{WHY}")
    assert main(["save", "mini", *common]) == 0
    capsys.readouterr()
    return work, patches, ["save", "mini", *common]


def test_a_commit_made_while_the_save_runs_is_not_marked_saved(tmp_path: Path, capsys, monkeypatch) -> None:
    work, patches, save = saved_workspace(tmp_path, capsys)
    (work / "lib.py").write_text("x = 2\n")
    git(work, "commit", "-qam", f"Second{WHY}")
    read = git(work, "rev-parse", "HEAD")
    checked = workspace_repo.check_saved_set

    def commit_meanwhile(*args, **kwargs):  # the user commits after the save read HEAD
        (work / "lib.py").write_text("x = 3\n")
        git(work, "commit", "-qam", f"Third{WHY}")
        return checked(*args, **kwargs)

    monkeypatch.setattr(workspace_repo, "check_saved_set", commit_meanwhile)
    assert main(save) == 0
    monkeypatch.undo()
    assert git(work, "rev-parse", "rocm-pants/saved") == read != git(work, "rev-parse", "HEAD")
    assert capsys.readouterr().out == f"wrote {patches / 'mini' / '0003-Second.patch'}\n"
    # The next save writes the commit made meanwhile.
    assert main(save) == 0
    assert capsys.readouterr().out == f"wrote {patches / 'mini' / '0004-Third.patch'}\n"
    assert b"+x = 3\n" in (patches / "mini" / "0004-Third.patch").read_bytes()


def test_a_rewritten_saved_history_is_refused_saying_how_to_redo_it(tmp_path: Path, capsys) -> None:
    work, patches, save = saved_workspace(tmp_path, capsys)
    saved = git(work, "rev-parse", "rocm-pants/saved")
    git(work, "commit", "-q", "--amend", "-m", f"Use gfx1151 in lib, reworded{WHY}")
    before = files_under(patches)
    assert main(save) == 1
    assert capsys.readouterr().err == (
        f"patch-workspace: {work}: rocm-pants/saved ({saved[:12]}) is not an ancestor of HEAD: commits already saved as "
        "patch files were rewritten (a rebase or an amend), and saving them again would write them twice. Nothing was "
        "written. To change a saved patch, go back to the saved history (`git branch rewritten` keeps your rewrite, "
        "then `git reset --hard rocm-pants/saved`) and make the change as a new commit on top, or edit the patch file "
        f"itself and make the workspace again (remove {work})\n"
    )
    assert files_under(patches) == before and git(work, "rev-parse", "rocm-pants/saved") == saved


def test_a_deleted_saved_tag_gets_our_message(tmp_path: Path, capsys) -> None:
    work, patches, save = saved_workspace(tmp_path, capsys)
    git(work, "tag", "-d", "rocm-pants/saved")
    before = files_under(patches)
    assert main(save) == 1
    assert capsys.readouterr().err == (
        f"patch-workspace: {work} has no tag rocm-pants/saved (where the last checkout or save ended), so which commits "
        "are new is not known; nothing was written. Tag the last commit already saved as a patch file (`git tag "
        "rocm-pants/saved <commit>`; `git log --oneline rocm-pants/pinned..` lists them), then save again\n"
    )
    assert files_under(patches) == before


def test_a_set_that_no_longer_gives_the_committed_tree_is_not_saved(tmp_path: Path, capsys) -> None:
    # The set's 0001 changed since the checkout (pulled from main): the commits on top of the old
    # one, saved, would not give a build what the user committed.
    work, patches, save = saved_workspace(tmp_path, capsys)
    first = patches / "mini" / "0001-archs.patch"
    first.write_text(first.read_text().replace("'gfx1151']", "'gfx1100']"))
    (work / "lib.py").write_text("x = 2\n")
    git(work, "commit", "-qam", f"Second{WHY}")
    before = files_under(patches)
    assert main(save) == 1
    assert capsys.readouterr().err == (
        "patch-workspace: nothing was written: the patch set with the new patches applied to the pinned tree, as a "
        f"build applies it, is not the tree of {git(work, 'rev-parse', 'HEAD')[:12]} (HEAD): setup.py differ. A build "
        "applies the set's patches in file-name order, each set in the order of the target's `patches`: order the "
        "commits so (`git rebase -i rocm-pants/saved`), then save again\n"
    )
    assert files_under(patches) == before


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
def test_save_refuses_what_every_build_refuses(tmp_path: Path, capsys, make, said) -> None:
    work, patches, save = saved_workspace(tmp_path, capsys)
    make(work)
    git(work, "add", "-A")
    git(work, "commit", "-qm", f"Odd{WHY}")
    head = git(work, "rev-parse", "HEAD")
    before = files_under(patches)
    assert main(save) == 1
    assert capsys.readouterr().err == (
        f"patch-workspace: nothing was written: commit {head[:12]} ('Odd') {said}. Fix them in {work} (`git commit "
        "--amend` for the last commit, `git rebase -i rocm-pants/saved` for an earlier one), then save again\n"
    )
    assert files_under(patches) == before


HOOK = "#!/bin/sh\necho \"$0 $*\" >> {marker}\n"


def test_the_callers_git_does_not_reach_ours(tmp_path: Path, capsys, monkeypatch) -> None:
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
    _, pins, patches = fixture(tmp_path)  # the fixtures' own git, before the environment is set
    before = files_under(outer)
    callers = {
        "GIT_DIR": str(outer / ".git"), "GIT_INDEX_FILE": str(outer / ".git" / "index"), "GIT_WORK_TREE": str(outer),
        "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.hooksPath", "GIT_CONFIG_VALUE_0": str(hooks),
        "GIT_CONFIG_PARAMETERS": f"'core.hooksPath'='{hooks}'",
    }  # fmt: skip
    work = tmp_path / "work"
    common = ["--pins-file", str(pins), "--patches-dir", str(patches), "--dest", str(work)]
    with monkeypatch.context() as env:
        for name, value in callers.items():
            env.setenv(name, value)
        assert main(["checkout", "mini", *common]) == 0, capsys.readouterr().err
    (work / "lib.py").write_text("x = 1151\n")
    git(work, "commit", "-qam", f"Use gfx1151 in lib{WHY}")  # the user's commit, with no hook of theirs
    # A hook in the workspace's own .git/hooks does not run either.
    (work / ".git" / "hooks" / "reference-transaction").write_text(HOOK.format(marker=marker))
    (work / ".git" / "hooks" / "reference-transaction").chmod(0o755)
    with monkeypatch.context() as env:
        for name, value in callers.items():
            env.setenv(name, value)
        assert main(["save", "mini", *common]) == 0, capsys.readouterr().err
    assert not marker.exists(), marker.read_text()
    assert files_under(outer) == before  # its config, index and refs as they were
    assert git(work, "rev-parse", "rocm-pants/saved") == git(work, "rev-parse", "HEAD")
    fresh = tmp_path / "fresh"
    assert main(["checkout", "mini", "--pins-file", str(pins), "--patches-dir", str(patches), "--dest", str(fresh)]) == 0
    assert tree_of(fresh) == tree_of(work)


def test_work_links_and_files_are_refused(tmp_path: Path, capsys, monkeypatch) -> None:
    _, pins, patches = fixture(tmp_path)
    repo, elsewhere = tmp_path / "repo", tmp_path / "elsewhere"
    repo.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(repo)
    common = ["--pins-file", str(pins), "--patches-dir", str(patches)]
    (repo / "work").symlink_to(elsewhere)
    assert main(["checkout", "mini", *common]) == 1
    assert capsys.readouterr().err == (
        f"patch-workspace: work is a symbolic link (to {elsewhere}); the patch workspace is made only inside the "
        "repository, so it does not follow one: remove the link (`rm work`), then run it again\n"
    )
    (repo / "work").unlink()
    (repo / "work").mkdir()
    (repo / "work" / "mini").symlink_to(tmp_path / "gone")
    assert main(["save", "mini", *common]) == 1
    assert capsys.readouterr().err == (
        f"patch-workspace: work/mini is a symbolic link (to {tmp_path / 'gone'}); the patch workspace is made only "
        "inside the repository, so it does not follow one: remove the link (`rm work/mini`), then run it again\n"
    )
    (repo / "work" / "mini").unlink()
    (repo / "work" / "mini").write_text("notes\n")
    assert main(["checkout", "mini", *common]) == 1
    assert capsys.readouterr().err == (
        "patch-workspace: work/mini is a file, where the patch workspace's directory goes: move it away "
        "(`mv work/mini work/mini.old`), then run it again\n"
    )
    assert list(elsewhere.iterdir()) == [] and not (tmp_path / "gone").exists()
    assert (repo / "work" / "mini").read_text() == "notes\n"


def test_a_pin_name_that_is_not_one_path_part_is_refused(tmp_path: Path, capsys, monkeypatch) -> None:
    _, pins, patches = fixture(tmp_path)
    repo = tmp_path / "repo"
    repo.mkdir()
    monkeypatch.chdir(repo)
    assert main(["checkout", "../../x", "--pins-file", str(pins), "--patches-dir", str(patches)]) == 1
    assert capsys.readouterr().err == (
        "patch-workspace: the command line: '../../x' is not a pin name: letters, digits, `.`, `_` and `-`, starting "
        "with a letter or digit, at most 100 (it is a directory's name, work/<pin>/ and patches/<pin>/); rename the table\n"
    )
    assert list(repo.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["patches", "pins.toml", "repo", "up"]
