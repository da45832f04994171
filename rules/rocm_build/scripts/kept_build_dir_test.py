"""scripts/kept_build_dir.py on real trees, git packs, CMake and ninja: the times it sets make
ninja recompile exactly the changed units, and only a finished build's directory is reused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rocm_build.script_modules import script_bytes
from rocm_build.testutil.git_fixtures import commit_files, init_repo

UNCHANGED_NS = 946684800 * 10**9
ENV = {"PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}


@pytest.fixture
def scripts(tmp_path: Path) -> Path:
    where = tmp_path / "__rocm_build"
    where.mkdir()
    for name in ("kept_build_dir.py", "source_pack.py", "git_urls.py", "mirrors.py"):
        (where / name).write_bytes(script_bytes(name))
    return where


def run(scripts: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(scripts / "kept_build_dir.py"), *map(str, args)], cwd=scripts.parent,
                          env=ENV, capture_output=True, text=True)  # fmt: skip


def take(scripts: Path, *args) -> str:
    done = run(scripts, "take", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def keep(scripts: Path, entry: Path) -> None:
    assert run(scripts, "keep", entry).returncode == 0


def write_tree(tree: Path, files: dict) -> None:
    for path, text in files.items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(text)


def mtime(path: Path) -> int:
    return os.lstat(path).st_mtime_ns


def test_times_follow_content_against_the_tree_the_entry_was_built_from(scripts: Path, tmp_path: Path) -> None:
    entry, tree = tmp_path / "entry", tmp_path / "tree"
    files = {"a.c": "int a;\n", "b.c": "int b;\n", "inc/h.h": "#define H 1\n"}
    write_tree(tree, files)
    assert take(scripts, entry, tree, "build") == "new: empty"
    assert {mtime(tree / p) for p in files} == {UNCHANGED_NS}
    keep(scripts, entry)
    # The next build's tree is written anew (as Pants writes patched files): every time is now.
    shutil.rmtree(tree)
    write_tree(tree, {**files, "b.c": "int b = 2;\n", "c.c": "int c;\n"})
    assert take(scripts, entry, tree, "build") == "reused: 2 of 4 file(s) changed since it was last built"
    assert mtime(tree / "a.c") == mtime(tree / "inc/h.h") == UNCHANGED_NS
    assert mtime(tree / "b.c") > UNCHANGED_NS and mtime(tree / "c.c") > UNCHANGED_NS
    keep(scripts, entry)
    # The same tree again: nothing changed since the last build, every time is the old one.
    assert take(scripts, entry, tree, "build") == "reused: 0 of 4 file(s) changed since it was last built"
    assert {mtime(tree / p) for p in ("a.c", "b.c", "c.c", "inc/h.h")} == {UNCHANGED_NS}


def test_an_entry_whose_build_did_not_finish_is_emptied(scripts: Path, tmp_path: Path) -> None:
    entry, tree = tmp_path / "entry", tmp_path / "tree"
    write_tree(tree, {"a.c": "int a;\n"})
    take(scripts, entry, tree, "build")
    (entry / "dir/half.o").write_text("half")  # the build was killed here: no `keep`
    assert take(scripts, entry, tree, "build") == "the last build in it did not finish: emptied"
    assert list((entry / "dir").iterdir()) == []
    assert json.loads((entry / "state.json").read_text()) == {"complete": False, "reused": False}
    keep(scripts, entry)
    assert json.loads((entry / "state.json").read_text()) == {"complete": True}


def test_a_build_stopped_before_its_first_write_leaves_the_entry_reusable(scripts: Path, tmp_path: Path) -> None:
    # With pantsd, a moved input re-runs a build beside the checks that gate it and Pants kills
    # it when they finish: it took the entry and wrote nothing.
    entry, tree = tmp_path / "entry", tmp_path / "tree"
    write_tree(tree, {"a.c": "int a;\n", "b.c": "int b;\n"})
    take(scripts, entry, tree, "build")
    (entry / "dir/a.o").write_text("a")
    keep(scripts, entry)
    write_tree(tree, {"b.c": "int b = 2;\n"})
    assert take(scripts, entry, tree, "build") == "reused: 1 of 2 file(s) changed since it was last built"
    # Killed here, before any write: the next build reuses what the last complete one left.
    assert take(scripts, entry, tree, "build") == "reused: 1 of 2 file(s) changed since it was last built"
    assert (entry / "dir/a.o").read_text() == "a"
    # A new entry taken by a build stopped the same way is still a new, empty one.
    other = tmp_path / "other"
    assert take(scripts, other, tree, "build") == "new: empty"
    assert take(scripts, other, tree, "build") == "new: empty"
    # One that wrote and was killed leaves it to be emptied, as before.
    time.sleep(0.01)
    (entry / "dir/b.o").write_text("half")
    assert take(scripts, entry, tree, "build") == "the last build in it did not finish: emptied"
    assert list((entry / "dir").iterdir()) == []


def test_setuptools_staging_is_emptied_and_the_rest_kept(scripts: Path, tmp_path: Path) -> None:
    entry, tree = tmp_path / "entry", tmp_path / "tree"
    write_tree(tree, {"setup.py": "\n"})
    take(scripts, entry, tree, "build")
    for d in ("lib.linux-x86_64-cpython-311/pkg", "bdist.linux-x86_64", "temp.linux-x86_64-cpython-311", "cmake", "lib"):
        (entry / "dir" / d).mkdir(parents=True)
        (entry / "dir" / d / "f").write_text("x")
    keep(scripts, entry)
    take(scripts, entry, tree, "build")
    # `lib` holds no Python: a CMake library directory (PyTorch's), kept.
    assert sorted(p.name for p in (entry / "dir").iterdir()) == ["cmake", "lib", "temp.linux-x86_64-cpython-311"]
    (entry / "dir/lib/pkg").mkdir()
    (entry / "dir/lib/pkg/__init__.py").write_text("")  # setuptools' staging of a pure package
    keep(scripts, entry)
    take(scripts, entry, tree, "build")
    assert sorted(p.name for p in (entry / "dir").iterdir()) == ["cmake", "temp.linux-x86_64-cpython-311"]


def test_a_tree_with_files_in_the_build_directory_is_refused(scripts: Path, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    write_tree(tree, {"build/make.sh": "true\n", "setup.py": "\n"})
    done = run(scripts, "take", tmp_path / "entry", tree, "build")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "the tree has 1 file(s) of its own under build/ (e.g. build/make.sh), which the kept build directory would "
        "hide: set the target's `build_dir` to the directory its build writes, or `keep_build_dir=False`"
    )


def pack_of(scripts: Path, repo: Path, sha: str, out: Path) -> Path:
    fetched = subprocess.run([sys.executable, str(scripts / "source_pack.py"), "fetch", f"file://{repo}", sha, "0", str(out)],
                             cwd=out.parent, env={**ENV, "GIT_ALLOW_PROTOCOL": "file"}, capture_output=True, text=True)  # fmt: skip
    assert fetched.returncode == 0, fetched.stderr
    return out


def checkout(scripts: Path, pack: Path, dest: Path) -> None:
    done = subprocess.run([sys.executable, str(scripts / "source_pack.py"), "checkout", str(pack), str(dest)], env=ENV,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr


CMAKE = """cmake_minimum_required(VERSION 3.18)
project(fixture C)
add_library(fixture SHARED a.c b.c c.c)
target_include_directories(fixture PRIVATE inc)
"""


def ninja(build: Path, *args: str) -> str:
    return subprocess.run(["ninja", "-C", str(build), *args], check=True, capture_output=True, text=True).stdout


def test_ninja_rebuilds_only_what_changed_between_two_pinned_commits(scripts: Path, tmp_path: Path) -> None:
    """A pin moves: the new commit's tree is checked out anew (every file written again), one
    source differs, and a patched header is the same as before; ninja recompiles one unit. Then
    the same commit with the patch changed: the unit that includes the header, and the commit's
    ids are the ones recorded (not listed from the pack again)."""
    repo = init_repo(tmp_path / "up")
    base = {"CMakeLists.txt": CMAKE, "a.c": '#include "h.h"\nint a(void) { return H; }\n', "b.c": "int b(void) { return 2; }\n",
            "c.c": "int c(void) { return 3; }\n", "inc/h.h": "#define H 1\n"}  # fmt: skip
    first = commit_files(repo, base)
    second = commit_files(repo, {"c.c": "int c(void) { return 4; }\n"})
    entry = tmp_path / "entry"
    for n, (sha, header) in enumerate(((first, 7), (second, 7), (second, 8))):
        pack = pack_of(scripts, repo, sha, tmp_path / f"pack{n}")
        tree, changes = tmp_path / "tree", tmp_path / f"changes{n}"  # one path, as the build's fixed one
        shutil.rmtree(tree, ignore_errors=True)
        checkout(scripts, pack, tree)
        assert mtime(tree / "a.c") == UNCHANGED_NS  # as the checkout wrote it
        write_tree(changes, {"inc/h.h": f"#define H {header}\n"})  # our patch, written anew by each build
        shutil.copy(changes / "inc/h.h", tree / "inc/h.h")  # the stacked tree: changes over the checkout
        note = take(scripts, entry, tree, "build", pack, changes)
        build = tree / "build"
        build.symlink_to(entry / "dir")  # build_wheel.sh bind-mounts it
        if n == 0:
            assert note == "new: empty"
            subprocess.run(["cmake", "-G", "Ninja", "-S", str(tree), "-B", str(build)], check=True, capture_output=True)
            ninja(build)
        else:
            assert note == "reused: 1 of 5 file(s) changed since it was last built"
            # What ninja would run: the changed unit and the link, nothing else.
            assert ninja(build, "-n", "-d", "explain").count("Building C object") == 1
            assert ("a.c.o" if n == 2 else "c.c.o") in ninja(build, "-n")
            assert (entry / "lower.next.json").exists() == (n == 1)  # the same commit: its recorded ids
            ninja(build)
        keep(scripts, entry)
    assert "no work to do" in ninja(tmp_path / "tree/build")
