from __future__ import annotations

from pathlib import Path

from rocm_build.testutil.git_fixtures import ARCHS_PATCH, ARCHS_SETUP, commit_files, git, init_repo
from rocm_build.programs.patch_workspace import main
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
