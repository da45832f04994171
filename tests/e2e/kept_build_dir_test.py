"""The kept build directory (issue 44) on a miniature that builds as PyTorch does: setup.py runs
CMake and ninja in `build/` (mini/cmake_component.py). Each change of the tree recompiles only
the units it touches, and the wheel is the same bytes as a clean build's of the same inputs
(Pants' cache off, the kept directories removed, in another copy): after a unit's edit, after units are added,
removed and renamed (a pin move), after a header of ours changes (a patch); a changed compiler
flag starts a new directory; a build that failed leaves nothing that is reused."""

from __future__ import annotations

import io
import json
import re
import shutil
import signal
import subprocess
import time
import zipfile
from pathlib import Path

import pytest

from e2e.workspace import PINS_DIR, Workspace, make_fixture_upstreams, require_success
from mini import cmake_component, make_upstreams

TARGET = "tests/mini/cmake:wheel"
RECIPE = """\
patch_set(name="p", sources=["*.edit.toml"])
upstream_repo(name="src", pin="mini-cmake", pins_file="tests/mini/pins", patches=[":p"])
rocm_wheel(name="wheel", source=":src", toolchain="tests/mini:llvm", gpu_targets=["gfx1151"]{extra})
"""
ARCH_EDIT = '[[edit]]\npath = "mini_cmake/__init__.py"\npattern = "gfx90a\'"\nreplace = "gfx90a\', \'gfx1151\'"\n'
HEADER_EDIT = '[[edit]]\npath = "csrc/include/mini.h"\npattern = "SCALE 3"\nreplace = "SCALE 5"\n'
SLOW_EDIT = '[[edit]]\npath = "csrc/include/mini.h"\npattern = "SCALE 5"\nreplace = "SCALE 5 // SLOW"\n'
BROKEN_EDIT = '[[edit]]\npath = "csrc/u1.c"\npattern = "return"\nreplace = "return return"\n'


def unit(i: int, body: str = "") -> str:
    # u0 and u1 use the header; the others do not.
    if i < 2:
        return f'#include "mini.h"\nint u{i}(void) {{ return {i} * SCALE{body}; }}\n'
    return f"int u{i}(void) {{ return {i}{body}; }}\n"


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    # One workspace for the host and the container case: its second Pants, bootstrap and
    # first builds would cost CI minutes and prove nothing more.
    tmp_path = tmp_path_factory.mktemp("kept")
    repo = tmp_path / "mini-cmake"
    repo.mkdir()
    make_upstreams.git(repo, "init", "-q", "-b", "main")
    files = {
        "setup.py": cmake_component.setup_py("mini-cmake", "mini_cmake", "csrc"),
        "csrc/CMakeLists.txt": cmake_component.cmake_lists("mini-cmake"),
        "csrc/include/mini.h": "#define SCALE 3\n",
        "mini_cmake/__init__.py": "ARCHS = ['gfx90a']\n",
        **{f"csrc/u{i}.c": unit(i) for i in range(5)},
    }
    workspace = Workspace(tmp_path / "checkout", make_fixture_upstreams(tmp_path / "upstreams"), tmp_path / "store", tmp_path / "named")
    workspace.repo = repo
    workspace.pin_extra("mini-cmake", repo, make_upstreams.commit(repo, files, "mini-cmake 1.0.0"))
    workspace.path("tests/mini/cmake").mkdir()
    workspace.write("tests/mini/cmake/arch.edit.toml", ARCH_EDIT)
    workspace.write("tests/mini/cmake/BUILD", RECIPE.format(extra=""))
    yield workspace
    workspace.stop()


@pytest.fixture(scope="module")
def clean(ws, tmp_path_factory):
    """Another copy for the clean builds, always with Pants' cache off: its own store, the same
    named caches (the kept directories at the same paths, as `ws`'s clean builds had them). In
    `ws`, `--no-local-cache` restarts Pants' scheduler there and back (a bootstrap option) and
    reruns every process of the chain, each time; this copy's pantsd keeps its options, so each
    clean build reruns what its inputs changed, and never from a cache."""
    tmp_path = tmp_path_factory.mktemp("kept-clean")
    workspace = Workspace(tmp_path / "checkout", ws.upstreams, tmp_path / "store", ws.named_caches)
    yield workspace
    workspace.stop()


def move_pin(ws: Workspace, files: dict, removed: tuple = ()) -> None:
    for path in removed:
        make_upstreams.git(ws.repo, "rm", "-q", path)
    ws.pin_extra("mini-cmake", ws.repo, make_upstreams.commit(ws.repo, files, "next"))


def build(ws: Workspace, *options: str) -> tuple:
    """(the wheel's bytes, what the kept directory said, objects this build wrote)."""
    require_success(ws.package(TARGET, extra_options=options), f"package {TARGET} {' '.join(options)}")
    (wheel,) = ws.path("dist/tests.mini.cmake").glob("*.whl")
    (log,) = ws.path("dist/tests.mini.cmake").glob("*.build.log")
    text = log.read_text()
    said = re.search(r"^== kept build directory build/: (.*)$", text, re.M).group(1)
    written = re.search(r"^== kept build directory build/: (\d+) object\(s\) written by this build", text, re.M)
    return wheel.read_bytes(), said, int(written.group(1))


def exported(wheel: bytes, tmp_path: Path) -> list:
    """The functions the wheel's extension defines, as llvm-nm reads them."""
    with zipfile.ZipFile(io.BytesIO(wheel)) as archive:
        (name,) = [n for n in archive.namelist() if n.startswith("mini_cmake/_C.") and n.endswith(".so")]
        (tmp_path / "ext.so").write_bytes(archive.read(name))
    nm = subprocess.run(["/usr/lib/llvm-19/bin/llvm-nm", "-D", "--defined-only", "--format=just-symbols", str(tmp_path / "ext.so")],
                        check=True, capture_output=True, text=True).stdout.split()  # fmt: skip
    return sorted(s for s in nm if re.fullmatch(r"u\d+", s))


def same_inputs(ws: Workspace, clean: Workspace) -> Workspace:
    """`clean` with `ws`'s recipe, patches and pin: the same build key, the same kept directory."""
    recipe, pin = "tests/mini/cmake", f"{PINS_DIR}/mini-cmake.toml"
    shutil.rmtree(clean.path(recipe), ignore_errors=True)
    shutil.copytree(ws.path(recipe), clean.path(recipe))
    shutil.copy2(ws.path(pin), clean.path(pin))
    return clean


def clean_build(ws: Workspace, clean: Workspace) -> bytes:
    """The same inputs from nothing, in `clean`: no kept directory, Pants' cache off."""
    same_inputs(ws, clean)
    # Emptied, not removed: a running pantsd makes a named cache's directory once, at its first use.
    shutil.rmtree(ws.named_caches / "rocm_build_dirs")
    (ws.named_caches / "rocm_build_dirs").mkdir()
    wheel, said, written = build(clean, "--no-local-cache")
    assert said == "new: empty" and written > 0
    return wheel


def unfinished(ws: Workspace) -> list:
    """Entries a build has taken and not yet kept."""
    states = (ws.named_caches / "rocm_build_dirs").glob("*/state.json")
    return [p.parent.name for p in states if json.loads(p.read_text() or "{}").get("complete") is False]


def entries(ws: Workspace) -> list:
    return sorted(p.name for p in (ws.named_caches / "rocm_build_dirs").iterdir() if p.is_dir())


def test_a_kept_build_directory_recompiles_what_changed_and_gives_the_clean_wheel(ws: Workspace, clean: Workspace, tmp_path: Path) -> None:
    wheel, said, written = build(ws)
    assert (said, written) == ("new: empty", 5)
    assert exported(wheel, tmp_path) == ["u0", "u1", "u2", "u3", "u4"]

    # A unit's edit upstream (the pin moves): that unit only.
    move_pin(ws, {"csrc/u3.c": unit(3, " + 1")})
    wheel, said, written = build(ws)
    assert (said, written) == ("reused: 1 of 9 file(s) changed since it was last built", 1)
    assert wheel == clean_build(ws, clean)

    # Units added, removed and renamed: the new names only, and the removed ones are not linked.
    move_pin(ws, {"csrc/u5.c": unit(5), "csrc/u6.c": unit(2).replace("u2", "u6")}, removed=("csrc/u4.c", "csrc/u2.c"))
    wheel, said, written = build(ws)
    assert (said, written) == ("reused: 2 of 9 file(s) changed since it was last built", 2)
    assert wheel == clean_build(ws, clean)
    assert exported(wheel, tmp_path) == ["u0", "u1", "u3", "u5", "u6"]

    # A header our patch changes: the units that include it.
    ws.write("tests/mini/cmake/header.edit.toml", HEADER_EDIT)
    wheel, said, written = build(ws)
    assert (said, written) == ("reused: 1 of 9 file(s) changed since it was last built", 2)
    assert wheel == clean_build(ws, clean)
    first = entries(ws)

    # Another compiler flag: another directory, every unit.
    ws.write("tests/mini/cmake/BUILD", RECIPE.format(extra=', env={"CFLAGS": "-O1"}'))
    flagged, said, written = build(ws)
    assert (said, written) == ("new: empty", 5)
    assert len(entries(ws)) == 2 and first[0] in entries(ws)

    # A build that fails half-way leaves its directory to be emptied, not reused: by the next
    # build of that key on this machine, here `clean`'s (Pants' cache off there; in `ws` the
    # option would restart its pantsd there and back).
    ws.write("tests/mini/cmake/broken.edit.toml", BROKEN_EDIT)
    failed = ws.package(TARGET)
    assert failed.returncode != 0
    ws.path("tests/mini/cmake/broken.edit.toml").unlink()
    again, said, written = build(same_inputs(ws, clean), "--no-local-cache")
    assert (said, written) == ("the last build in it did not finish: emptied", 5)
    assert again == flagged

    # A build killed half-way (Ctrl-C while its steps run, the entry taken and written to): the
    # next build of that key empties the entry and compiles everything. (One killed before its
    # first write leaves the entry as it was: kept_build_dir_test.py.)
    slow = ', env={"CFLAGS": "-O1"}, build_command=["if grep -q SLOW csrc/include/mini.h; then touch build/half.o; sleep 300; fi"]'
    ws.write("tests/mini/cmake/BUILD", RECIPE.format(extra=slow))
    ws.write("tests/mini/cmake/slow.edit.toml", SLOW_EDIT)
    proc = ws.start("package", TARGET)
    deadline = time.time() + 300
    # Until the step has written into the entry: stopped before its first write, the entry
    # would be left as it was (a new one: "new: empty"), which a loaded machine made happen.
    while not any((ws.named_caches / "rocm_build_dirs" / e / "dir" / "half.o").exists() for e in unfinished(ws)):
        assert time.time() < deadline and proc.poll() is None, ws.partial_stderr(proc)[-3000:]
        time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=120)
    assert proc.returncode != 0
    ws.path("tests/mini/cmake/slow.edit.toml").unlink()
    wheel, said, written = build(ws)
    assert (said, written) == ("the last build in it did not finish: emptied", 5)
    assert exported(wheel, tmp_path) == ["u0", "u1", "u3", "u5", "u6"]


def test_a_container_build_keeps_its_build_directory_too(ws: Workspace, clean: Workspace) -> None:
    """In the `mini-box` image (in_container.sh takes the entry on this side and mounts only it).
    Another environment is another key: a new directory, whatever the test before left."""
    ws.write("tests/mini/cmake/BUILD", RECIPE.format(extra=', environment="mini-box"'))
    _, said, written = build(ws)
    assert (said, written) == ("new: empty", 5)
    ws.write("tests/mini/cmake/header.edit.toml", HEADER_EDIT.replace("SCALE 5", "SCALE 7"))
    wheel, said, written = build(ws)
    assert (said, written) == ("reused: 1 of 9 file(s) changed since it was last built", 2)
    assert wheel == clean_build(ws, clean)
