from __future__ import annotations

from pathlib import Path

from rocm_build.testutil.git_fixtures import ARCHS_PATCH, ARCHS_SETUP, commit_files, git, init_repo
from rocm_build.programs.patch_workspace import main


def test_checkout_edit_save_roundtrip(tmp_path: Path, capsys) -> None:
    upstream = init_repo(tmp_path / "up")
    sha = commit_files(upstream, {"setup.py": ARCHS_SETUP, "lib.py": "x = 1\n"})
    pins = tmp_path / "pins.toml"
    pins.write_text(f'[mini]\nurl = "file://{upstream}"\ntrack = "main"\ncommit = "{sha}"\n')
    patches = tmp_path / "patches"
    (patches / "mini").mkdir(parents=True)
    (patches / "mini" / "0001-archs.patch").write_text(ARCHS_PATCH)
    work = tmp_path / "work"
    common = ["--pins-file", str(pins), "--patches-dir", str(patches), "--dest", str(work)]

    assert main(["checkout", "mini", *common]) == 0
    assert (work / "setup.py").read_text() == "ARCHS = ['gfx90a', 'gfx1151']\n"
    assert git(work, "log", "--format=%s", "-1") == "rocm-pants patch: 0001-archs.patch"
    assert git(work, "rev-parse", "rocm-pants/pinned") == sha

    (work / "lib.py").write_text("x = 1151\n")
    git(work, "commit", "-qam", "Use gfx1151 in lib")
    assert main(["save", "mini", *common]) == 0
    saved = patches / "mini" / "0002-Use-gfx1151-in-lib.patch"
    assert saved.exists() and "+x = 1151" in saved.read_text()
    assert main(["save", "mini", *common]) == 0
    assert "nothing written" in capsys.readouterr().out

    # The saved patch set reproduces the workspace from a fresh checkout.
    fresh = tmp_path / "fresh"
    assert main(["checkout", "mini", "--pins-file", str(pins), "--patches-dir", str(patches), "--dest", str(fresh)]) == 0
    assert (fresh / "lib.py").read_text() == "x = 1151\n"


def test_checkout_refuses_non_empty_dest(tmp_path: Path, capsys) -> None:
    upstream = init_repo(tmp_path / "up")
    sha = commit_files(upstream, {"a": "1"})
    pins = tmp_path / "pins.toml"
    pins.write_text(f'[mini]\nurl = "file://{upstream}"\ntrack = "main"\ncommit = "{sha}"\n')
    (tmp_path / "work" / "x").mkdir(parents=True)
    assert main(["checkout", "mini", "--pins-file", str(pins), "--dest", str(tmp_path / "work")]) == 1
    assert "is not empty; remove it or pass --dest" in capsys.readouterr().err
