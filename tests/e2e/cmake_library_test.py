"""A CMake library as a wheel, step by step as docs/layout.md ("A CMake library as a wheel")
says, for a miniature one: an upstream with a CMakeLists.txt and no Python packaging, a patch
that adds the packaging of its install prefix (made in a patch workspace), a rocm_wheel whose
build_command configures and installs into that prefix. No plugin file changes. The generator
is the host's ninja (as cmake is), so it has no build requirements and needs no build lock."""

from __future__ import annotations

import zipfile
from pathlib import Path

from e2e.workspace import Workspace, borrowed, require_success, user_git as git
from mini import make_upstreams

NAME, PIN, PACKAGE = "foolib", "mini-foolib", "foo_rocm"
UPSTREAM = {
    "CMakeLists.txt": (
        "cmake_minimum_required(VERSION 3.16)\n"
        "project(foolib C)\n"
        "add_library(foo SHARED foo.c)\n"
        "install(TARGETS foo LIBRARY DESTINATION lib)\n"
        "install(FILES foo.h DESTINATION include)\n"
    ),
    "foo.c": '#include "foo.h"\nint foo_answer(void) { return 42; }\n',
    "foo.h": "int foo_answer(void);\n",
}
# Step 2's patch adds it (as patches/aotriton/0001-package-install-as-wheel.patch) and the
# package's __init__.py.
SETUP_PY = f"""\
import os

from setuptools import setup

prefix_files = []
for root, _, files in os.walk("{PACKAGE}/prefix"):
    prefix_files += [os.path.relpath(os.path.join(root, f), "{PACKAGE}") for f in files]

setup(
    name="{PACKAGE}",
    version=os.environ.get("FOO_VERSION", "0.0"),
    packages=["{PACKAGE}"],
    package_data={{"{PACKAGE}": prefix_files}},
)
"""
BUILD = f"""\
upstream_repo(name="src", pin="{PIN}", pins_file="tests/mini/pins", patches=["tests/mini/patches/{NAME}:gfx1151"])

rocm_wheel(
    name="wheel",
    source=":src",
    toolchain="tests/mini:llvm",
    gpu_targets=["gfx1151"],
    version_env=["FOO_VERSION"],
    build_command=[
        "cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release"
        " -DCMAKE_INSTALL_PREFIX=$PWD/rocm_pants_wheel/{PACKAGE}/prefix -DGPU_TARGETS=$AMDGPU_TARGETS",
        "cmake --build build --parallel $MAX_JOBS --target install",
        "cd rocm_pants_wheel",
    ],
)
"""


def test_a_cmake_library_becomes_a_wheel_as_the_docs_say(tmp_path: Path, batch_copy: Workspace) -> None:
    with borrowed(batch_copy, tmp_path / "upstreams") as ws:
        repo = tmp_path / "upstreams" / NAME
        repo.mkdir()
        make_upstreams.git(repo, "init", "-q", "-b", "main")
        sha = make_upstreams.commit(repo, UPSTREAM, "mini foolib")
        # 1. The pin (its commit as update-pins writes it: new_component_test runs update-pins).
        ws.write(f"tests/mini/pins/{PIN}.toml", f'[{PIN}]\nurl = "file://{repo}"\ntrack = "main"\ncommit = "{sha}"\nversion = "1.2.0"\n')
        # 3. Its BUILD file; 2. the patch set, its patch made in a patch workspace.
        ws.path(f"tests/mini/{NAME}").mkdir()
        ws.write(f"tests/mini/{NAME}/BUILD", BUILD)
        ws.path(f"tests/mini/patches/{NAME}").mkdir()
        ws.write(f"tests/mini/patches/{NAME}/BUILD", 'patch_set(name="gfx1151")\n')
        require_success(ws.pants("patch-workspace", f"tests/mini/{NAME}:src"), "the checkout")
        work = ws.path(f"work/{PIN}")
        # The package is there before the build: the preflight runs setup.py's metadata hook first.
        (work / f"rocm_pants_wheel/{PACKAGE}").mkdir(parents=True)
        (work / "rocm_pants_wheel/setup.py").write_text(SETUP_PY)
        (work / f"rocm_pants_wheel/{PACKAGE}/__init__.py").write_text("# The install prefix beside it is the package's data.\n")
        git(work, "add", "rocm_pants_wheel")
        git(work, "commit", "-qm", "Package the install as a wheel\n\nWhy: no Python packaging.\nUpstream: none.\nDrop when: never.")
        saved = require_success(ws.pants("patch-workspace", "--save", f"tests/mini/{NAME}:src"), "the save")
        assert f"wrote tests/mini/patches/{NAME}/0001-Package-the-install-as-a-wheel.patch" in saved.stdout, saved.stdout

        require_success(ws.package(f"tests/mini/{NAME}:wheel"), "the CMake library's wheel")
        (wheel,) = ws.path(f"dist/tests.mini.{NAME}").glob(f"{PACKAGE}-1.2.0*.whl")
        with zipfile.ZipFile(wheel) as z:
            names = z.namelist()
        assert f"{PACKAGE}/prefix/lib/libfoo.so" in names and f"{PACKAGE}/prefix/include/foo.h" in names, names
