"""Adding a component, step by step as components/README.md ("Adding a component") says, for a
miniature one: a new upstream at a local git URL (a repository this test makes), pinned by url
and track with update-pins filling its commit, fetched, patched in a patch workspace, linted and
built into a wheel. It has no build requirements, so it needs no build lock."""

from __future__ import annotations

import zipfile
from pathlib import Path

from e2e.workspace import Workspace, borrowed, require_success, user_git as git
from mini import make_upstreams

NAME, PIN = "greet", "mini-greet"
UPSTREAM = {
    "setup.py": (
        "from setuptools import Extension, setup\n"
        "setup(name='mini_greet', version='1.0.0', packages=['mini_greet'],\n"
        "      ext_modules=[Extension('mini_greet._C', ['csrc/greet.c'])])\n"
    ),
    "csrc/greet.c": (
        "#include <Python.h>\n"
        'static PyObject *hello(PyObject *self, PyObject *args) { return PyUnicode_FromString("hello"); }\n'
        'static PyMethodDef methods[] = {{"hello", hello, METH_NOARGS, "hello"}, {NULL, NULL, 0, NULL}};\n'
        'static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", NULL, -1, methods};\n'
        "PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&module); }\n"
    ),
    "mini_greet/__init__.py": "from ._C import hello\n\nARCH = 'none'\n",
}
# docs step 2 and 4: the upstream_repo and the rocm_wheel, with the miniature chain's pins file
# and toolchain; step 3: the patch set's directory.
BUILD = f"""\
upstream_repo(name="src", pin="{PIN}", pins_file="tests/mini/pins", patches=["tests/mini/patches/{NAME}:gfx1151"])

rocm_wheel(
    name="wheel",
    source=":src",
    kind="generic",
    toolchain="tests/mini:llvm",
    gpu_targets=["gfx1151"],
)
"""


def test_a_new_miniature_component_as_the_docs_say(tmp_path: Path, batch_copy: Workspace) -> None:
    with borrowed(batch_copy, tmp_path / "upstreams") as ws:
        repo = tmp_path / "upstreams" / NAME
        repo.mkdir()
        make_upstreams.git(repo, "init", "-q", "-b", "main")
        sha = make_upstreams.commit(repo, UPSTREAM, "mini greet 1.0.0")

        # 1. Pin it: url and track; update-pins fills the commit.
        pin_file = f"tests/mini/pins/{PIN}.toml"
        ws.write(pin_file, f'[{PIN}]\nurl = "file://{repo}"\ntrack = "main"\n')
        filled = ws.pants("run", "rules:update-pins", "--", "--pins-file", "tests/mini/pins", "--only", PIN)
        require_success(filled, "update-pins of the new pin")
        assert f"{PIN}: (no commit yet) -> {sha[:12]} (new pin, main is there)" in filled.stdout, filled.stdout
        assert ws.read(pin_file) == f'[{PIN}]\nurl = "file://{repo}"\ntrack = "main"\ncommit = "{sha}"\n'

        # 2.-4. Fetch it, its patch set, the wheel.
        ws.path(f"tests/mini/{NAME}").mkdir()
        ws.write(f"tests/mini/{NAME}/BUILD", BUILD)
        ws.path(f"tests/mini/patches/{NAME}").mkdir()
        ws.write(f"tests/mini/patches/{NAME}/BUILD", 'patch_set(name="gfx1151")\n')

        # 3. Its first patch, made in a patch workspace and saved with its header.
        require_success(ws.pants("patch-workspace", f"tests/mini/{NAME}:src"), "the checkout")
        work = ws.path(f"work/{PIN}")
        init = work / "mini_greet/__init__.py"
        init.write_text(init.read_text().replace("ARCH = 'none'", "ARCH = 'gfx1151'"))
        git(work, "commit", "-qam", "Say gfx1151\n\nWhy: a stand-in.\nUpstream: none; a fixture.\nDrop when: never.")
        saved = require_success(ws.pants("patch-workspace", "--save", f"tests/mini/{NAME}:src"), "the save")
        assert f"wrote tests/mini/patches/{NAME}/0001-Say-gfx1151.patch" in saved.stdout, saved.stdout

        # 5. No build_requirements: no lock. 6. Lint and build it.
        assert "✓ patch-headers succeeded." in require_success(ws.pants("lint", f"tests/mini/patches/{NAME}:"), "lint").stderr
        require_success(ws.package(f"tests/mini/{NAME}:wheel"), "the new component's wheel")
        (wheel,) = ws.path(f"dist/tests.mini.{NAME}").glob("mini_greet-1.0.0+*.whl")
        with zipfile.ZipFile(wheel) as z:
            assert "ARCH = 'gfx1151'" in z.read("mini_greet/__init__.py").decode()
            assert any(n.startswith("mini_greet/_C") and n.endswith(".so") for n in z.namelist())
