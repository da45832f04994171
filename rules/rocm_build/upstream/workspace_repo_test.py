"""upstream/workspace_repo.py with real git: the base from a fetched pack (submodules' files in
it), one commit per patch, and the commits after it saved as patch files."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rocm_build.sandbox_scripts import script_bytes
from rocm_build.testutil.git_fixtures import commit_files, git, init_repo
from rocm_build.upstream import workspace_repo
from rocm_build.upstream.workspace_repo import PatchToApply, WorkspaceError, commit_message

PYTHON = shutil.which("python3", path="/usr/bin:/bin") or "python3"  # the build's, with tomllib
HEADER = "Why: a\nUpstream: none\nDrop when: c"


def fetched_pack(tmp_path: Path, url: str, sha: str) -> Path:
    """The pack the build's fetch makes (scripts/source_pack.py), with submodules."""
    for name in ("source_pack.py", "git_urls.py", "mirrors.py"):
        (tmp_path / name).write_bytes(script_bytes(name))
    out = tmp_path / "fetch"
    out.mkdir()
    env = {"PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
    run = subprocess.run([sys.executable, str(tmp_path / "source_pack.py"), "fetch", url, sha, "1", "source"],
                         cwd=out, env=env, capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stderr
    return out / "source"


def workspace_from(pack: Path, dest: Path) -> str:
    """What the goal does with the pack: into .git/objects/pack/, then the base."""
    workspace_repo.init(dest, "third_party/top:src")
    for ext in ("pack", "idx"):
        shutil.copy(pack / f"objects.{ext}", dest / ".git/objects/pack" / f"{workspace_repo.PACK_NAME}.{ext}")
    repos = [tuple(reversed(line.split(" ", 1))) for line in (pack / "repos").read_text().splitlines()]
    return workspace_repo.base_from_pack(dest, repos, "top")


def test_the_base_holds_the_submodules_files_on_top_of_the_pinned_commit(tmp_path: Path) -> None:
    deep = init_repo(tmp_path / "deep")
    commit_files(deep, {"deep.c": "int deep;\n"})
    top = init_repo(tmp_path / "top")
    commit_files(top, {"setup.py": "print('top')\n"})
    git(top, "-c", "protocol.file.allow=always", "submodule", "add", "-q", f"file://{deep}", "vendor/deep")
    sha = commit_files(top, {}, "with deep")
    dest = tmp_path / "work"
    base = workspace_from(fetched_pack(tmp_path, f"file://{top}", sha), dest)

    # A commit on top of the pinned one whose tree has the submodule's files, as the build's tree.
    assert git(dest, "rev-parse", f"{base}^") == sha
    assert git(dest, "ls-tree", "-r", "--name-only", base).split() == [".gitmodules", "setup.py", "vendor/deep/deep.c"]
    assert (dest / "vendor/deep/deep.c").read_text() == "int deep;\n"
    assert git(dest, "rev-parse", workspace_repo.BASE_TAG) == base and git(dest, "status", "--porcelain") == ""
    assert workspace_repo.made_for(dest) == "third_party/top:src"

    # A patch into the submodule's files is one commit of the workspace, saved as a patch of the tree.
    patches = tmp_path / "patches"
    patches.mkdir()
    (patches / "0001-deep.patch").write_text(
        f"{HEADER}\n\n--- a/vendor/deep/deep.c\n+++ b/vendor/deep/deep.c\n@@ -1 +1 @@\n-int deep;\n+int deep = 1151;\n"
    )
    workspace_repo.commit_patches(dest, PYTHON, [PatchToApply(str(patches / "0001-deep.patch"), "patches/0001-deep.patch")], "")
    assert git(dest, "log", "-1", "--format=%B") == f"0001-deep.patch\n\n{HEADER}"
    (dest / "setup.py").write_text("print('gfx1151')\n")
    git(dest, "commit", "-qam", f"Say gfx1151\n\n{HEADER}")
    [(name, data)] = workspace_repo.new_patches(dest, workspace_repo.next_number(["0001-deep.patch", "BUILD"])).files
    assert name == "0002-Say-gfx1151.patch"
    text = data.decode()
    assert text.startswith(f"Say gfx1151\n\n{HEADER}\n\ndiff --git a/setup.py b/setup.py\n") and "+print('gfx1151')" in text


def test_commits_are_checked_before_anything_is_saved(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "work")
    commit_files(repo, {"a": "1\n"})
    git(repo, "tag", workspace_repo.SAVED_TAG)
    commit_files(repo, {"a": "2\n"}, f"Good\n\n{HEADER}")
    commit_files(repo, {"a": "3\n"}, "Why: x\nDrop when: y")
    commit_files(repo, {}, f"Empty\n\n{HEADER}")
    commit_files(repo, {"a": "4\n"}, f"Reads as a diff\n\n{HEADER}\n--- a/a\n+++ b/a")
    with pytest.raises(WorkspaceError) as e:
        workspace_repo.new_patches(repo, 1)
    said = str(e.value)
    assert said.startswith("nothing was written: commit ")
    assert "('Why: x') has no `Upstream:` in its message" in said
    assert "('Empty') changes nothing; drop it" in said
    assert "('Reads as a diff') has a line in its message that `git apply` would read as the start of a diff" in said
    assert "('Good')" not in said
    (repo / "a").write_text("5\n")
    with pytest.raises(WorkspaceError, match="has changes not committed"):
        workspace_repo.new_patches(repo, 1)


def test_names_and_messages() -> None:
    assert workspace_repo.slug("Use gfx1151 in lib (for Strix Halo)!") == "Use-gfx1151-in-lib-for-Strix-Halo"
    assert workspace_repo.slug("...") == "patch"
    assert workspace_repo.next_number(["0001-a.patch", "0009-b.edit.toml", "BUILD", "x-0100.patch"]) == 10
    edit = "# Why: a\n# Upstream: b\n# Drop when: c\n[[edit]]\n"
    assert commit_message("p/0001-x.edit.toml", edit) == "0001-x.edit.toml\n\nWhy: a\nUpstream: b\nDrop when: c"
    assert commit_message("p/0002-y.patch", f"Subject\n\n{HEADER}\n\n--- a/f\n+++ b/f\n") == f"Subject\n\n{HEADER}"
    assert commit_message("p/0003-z.patch", "--- a/f\n+++ b/f\n") == "0003-z.patch (no header)"


def test_no_number_past_9999() -> None:
    # `10000-x.patch` sorts before `9999-y.patch`: the build would apply it first.
    assert workspace_repo.next_number(["9998-a.patch"]) == 9999
    with pytest.raises(WorkspaceError) as e:
        workspace_repo.next_number(["0001-a.patch", "9999-b.patch", "BUILD"], "tests/mini/patches/vllm:gfx1151")
    assert str(e.value) == (
        "tests/mini/patches/vllm:gfx1151 has a file numbered 9999; a next one (10000-...) would sort before it (patches "
        "apply in file-name order). Renumber the set's files from 0001 (`git mv`), then save again"
    )


def test_two_new_commits_after_9998_are_refused_before_anything_is_made(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "work")
    commit_files(repo, {"a": "1\n"})
    git(repo, "tag", workspace_repo.SAVED_TAG)
    commit_files(repo, {"a": "2\n"}, f"One\n\n{HEADER}")
    commit_files(repo, {"a": "3\n"}, f"Two\n\n{HEADER}")
    with pytest.raises(WorkspaceError) as e:
        workspace_repo.new_patches(repo, 9999)
    assert str(e.value) == (
        "2 new commit(s) after patch number 9998 would pass 9999 and sort before the set's first files (patches apply "
        "in file-name order); renumber the set's files from 0001 (`git mv`), then save again"
    )


def test_a_crlf_or_bom_message_is_a_header_not_a_diff() -> None:
    # Found by tests/fuzz/fuzz_patch_headers.py's round trip: a message from an editor that
    # writes CRLF (or a BOM) was refused as holding "a line `git apply` would read as a diff".
    crlf = "Subject\r\n\r\nWhy: a\r\nUpstream: none\r\nDrop when: c\r\n"
    assert workspace_repo.commit_problem("0" * 40, "Subject", crlf) is None
    assert workspace_repo.commit_problem("0" * 40, "Subject", "\ufeff" + crlf) is None
    said = workspace_repo.commit_problem("0" * 40, "Subject", crlf + "--- a/f\r\n+++ b/f\r\n")
    assert said == (
        "commit 000000000000 ('Subject') has a line in its message that `git apply` would read as the start of a diff "
        "(`diff --git`, `--- ` then `+++ `, `Index: `); reword it"
    )
