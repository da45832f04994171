#!/usr/bin/env python3
"""Creates the miniature upstream repositories (aotriton, torch, flash-attention, vllm).

Which ones, and what each tree holds, is the table upstreams.toml beside this script: a new
table there is a new miniature upstream.

Each is a real git repository holding a tiny Python package with a C extension and a HIP
kernel that its setup.py compiles with the toolchain's clang for every gpu target into an
AMDGPU code object shipped in the wheel. Each downstream build imports its upstream's
installed wheel. Commits use a fixed author and date, so the same content gives the same
SHA on every machine and tests/mini/pins/ can pin them.

Usage: make_upstreams.py [--dest DIR] [--write-pins PINS_DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

if __package__:
    from mini import make_sdk
else:  # run as a script: its directory is on sys.path
    import make_sdk  # type: ignore[no-redef]  # pants: no-infer-dep

DEFAULT_DEST = "/tmp/rocm-pants-mini"
SDK_INDEX = "index"  # the mini SDK's package index, beside the repositories
PINS = Path(__file__).with_name("pins")

TABLE = Path(__file__).with_name("upstreams.toml")


@dataclass(frozen=True)
class Component:
    """A row of upstreams.toml: what one miniature upstream's tree holds."""

    imports: List[str]
    build_requirements: str = ""
    library: Optional[Tuple[str, str]] = None
    library_links: List[Tuple[str, str, str]] = field(default_factory=list)
    extension_links: List[Tuple[str, str, str]] = field(default_factory=list)
    requires: List[str] = field(default_factory=list)


def read_components(table: Path = TABLE) -> Dict[str, Component]:
    """The table's components, in its order; a key it does not know is refused, naming it."""
    components = {}
    for name, row in tomllib.loads(table.read_text()).items():
        unknown = set(row) - set(Component.__dataclass_fields__)
        if unknown:
            raise SystemExit(f"{table}: [{name}] has {', '.join(sorted(unknown))}, which is not one of {', '.join(Component.__dataclass_fields__)}")
        # Links as tuples: setup.py holds their repr, and the pinned SHAs hold setup.py.
        links = {k: [tuple(link) for link in row.get(k, [])] for k in ("library_links", "extension_links")}
        library = tuple(row["library"]) if "library" in row else None
        components[name] = Component(**{**row, **links, "library": library})
    return components


COMPONENTS = read_components()

GIT_ENV = {
    "GIT_AUTHOR_NAME": "rocm-pants fixture",
    "GIT_AUTHOR_EMAIL": "fixture@rocm-pants.invalid",
    "GIT_COMMITTER_NAME": "rocm-pants fixture",
    "GIT_COMMITTER_EMAIL": "fixture@rocm-pants.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
}

SETUP_PY = '''\
"""Build of {package}: a C extension plus a HIP kernel per gpu target (miniature fixture)."""
import importlib.util
import os
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

UPSTREAMS = {upstreams!r}
# Every ROCm build here gets its targets from PYTORCH_ROCM_ARCH (seed 000).
ARCHS = [a for a in os.environ["PYTORCH_ROCM_ARCH"].split(";") if a]
# A shared library this package ships for others to link, as torch ships libtorch: (file, source).
LIBRARY = {library!r}
# What the library and the extension link: (package, its library directory, library file),
# found where the wheels are installed in the build venv, and at run time through a RUNPATH
# relative to the linking ELF ($ORIGIN), as TheRock's torch finds the SDK's libraries.
LIBRARY_LINKS = {library_links!r}
EXTENSION_LINKS = {extension_links!r}


def link_args(links, at, build_lib):
    args = []
    for package, libdir, filename in links:
        # This package's own library is in the build tree; another's is installed.
        root = build_lib if package == "{package}" else os.path.dirname(os.path.dirname(importlib.util.find_spec(package).origin))
        args += ["-L" + os.path.join(root, package, libdir), "-l:" + filename,
                 "-Wl,--enable-new-dtags,-rpath,$ORIGIN/" + os.path.relpath(os.path.join(package, libdir), at)]
    return args


def upstream_versions():
    # A downstream build imports what it was built against, as the real ones do.
    found = {{}}
    for name in UPSTREAMS:
        module = __import__(name)
        found[name] = module.kernel_archs()
    return found


class BuildWithKernels(build_py):
    def run(self):
        super().run()
        clang = os.environ["ROCM_BUILD_CLANG"]
        out = os.path.join(self.build_lib, "{package}", "kernels")
        os.makedirs(out, exist_ok=True)
        for arch in ARCHS:
            subprocess.check_call([
                clang, "-x", "hip", "--offload-arch=" + arch, "--cuda-device-only",
                "--no-gpu-bundle-output", "-nogpulib", "-nogpuinc", "-O2",
                "kernels/scale.hip", "-o", os.path.join(out, "scale-" + arch + ".co"),
            ])
        with open(os.path.join(self.build_lib, "{package}", "_built_with.py"), "w") as f:
            f.write("UPSTREAMS = %r\\nARCHS = %r\\n" % (upstream_versions(), ARCHS))
        if LIBRARY:
            filename, source = LIBRARY
            os.makedirs(os.path.join(self.build_lib, "{package}", "lib"), exist_ok=True)
            subprocess.check_call([
                clang, "-shared", "-fPIC", "-O2", source, "-Wl,-soname," + filename,
                "-o", os.path.join(self.build_lib, "{package}", "lib", filename),
                *link_args(LIBRARY_LINKS, "{package}/lib", self.build_lib),
            ])


class BuildLinkedExt(build_ext):
    def build_extension(self, ext):
        ext.extra_link_args = link_args(EXTENSION_LINKS, "{package}", self.build_lib)
        super().build_extension(ext)


setup(
    name="{package}",
    version="{version}",
    packages=["{package}"],
    ext_modules=[Extension("{package}._C", ["csrc/module.c"])],
    install_requires={requires!r},
    cmdclass={{"build_py": BuildWithKernels, "build_ext": BuildLinkedExt}},
)
'''

INIT_PY = '''\
import os

from . import _C


def kernel_archs():
    here = os.path.join(os.path.dirname(__file__), "kernels")
    return sorted(n[len("scale-"):-len(".co")] for n in os.listdir(here))


def answer():
    return _C.answer()
'''

MODULE_C = '''\
#include <Python.h>
{linked}
static PyObject *answer(PyObject *self, PyObject *args) {{ return PyLong_FromLong({answer}); }}

static PyMethodDef methods[] = {{{{"answer", answer, METH_NOARGS, "fixture"}}, {linked_method}{{NULL, NULL, 0, NULL}}}};

static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, "_C", NULL, -1, methods}};

PyMODINIT_FUNC PyInit__C(void) {{ return PyModule_Create(&module); }}
'''

KERNEL_HIP = '''\
// Device code only: no ROCm headers or device libraries are needed to compile it.
#define __global__ __attribute__((global))

extern "C" __global__ void scale(float *x, float a) {
  int i = __builtin_amdgcn_workitem_id_x();
  x[i] *= a;
}
'''


# What links what, as in the real chain: mini torch ships libmini_torch.so, linked to the
# SDK's libmini_hip.so.1 (tests/mini/make_sdk.py), and requires the SDK's wheel; its extension
# and mini vllm's link libmini_torch.so (upstreams.toml). `linked()` of each extension calls
# through them.
TORCH_LIB_C = "long mini_hip_answer(void);\nlong mini_torch_answer(void) { return mini_hip_answer(); }\n"
LINKED_C = (
    "long mini_torch_answer(void);\n"
    "static PyObject *linked(PyObject *self, PyObject *args) { return PyLong_FromLong(mini_torch_answer()); }\n"
)
LINKED_METHOD = '{"linked", linked, METH_NOARGS, "fixture"}, '


def component_files(name: str, version: str = "1.0.0") -> Dict[str, str]:
    package = f"mini_{name}"
    component = COMPONENTS[name]
    links = {k: getattr(component, k) for k in ("library", "library_links", "extension_links", "requires")}
    linked = bool(links["extension_links"])
    files = {
        "setup.py": SETUP_PY.format(package=package, upstreams=component.imports, version=version, **links),
        f"{package}/__init__.py": INIT_PY,
        "csrc/module.c": MODULE_C.format(answer=42, linked=LINKED_C if linked else "", linked_method=LINKED_METHOD if linked else ""),
        "kernels/scale.hip": KERNEL_HIP,
        "README.md": f"# {package}\n\nA miniature stand-in for {name}, for rocm-pants tests.\n",
    }
    if component.build_requirements:
        files["requirements/build.txt"] = component.build_requirements
    if component.library:
        files[component.library[1]] = TORCH_LIB_C
    return files


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, env={**os.environ, **GIT_ENV},
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip


def commit(repo: Path, files: Dict[str, str], message: str) -> str:
    for rel, text in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def make_repo(dest: Path, name: str) -> str:
    repo = dest / name
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    return commit(repo, component_files(name), f"mini {name} 1.0.0")


def make_all(dest: Path) -> Dict[str, str]:
    make_sdk.make_index(dest / SDK_INDEX)
    return {name: make_repo(dest, name) for name in COMPONENTS}


HEADER = (
    "# A pin of the miniature chain. The repositories are made by tests/mini/make_upstreams.py\n"
    "# with fixed authors and dates, so these SHAs are the same on every machine.\n\n"
)


def pin_files(dest: Path, commits: Dict[str, str]) -> Dict[str, str]:
    """The miniature chain's pins directory (tests/mini/pins/): one file per pin, the SDK's
    host and device pins in one."""
    files = {
        f"mini-{name}.toml": HEADER + f'[mini-{name}]\nurl = "file://{dest}/{name}"\ntrack = "main"\ncommit = "{sha}"\n'
        for name, sha in commits.items()
    }
    files["mini-sdk.toml"] = HEADER + make_sdk.pins_text(dest / SDK_INDEX)
    return files


def write_pins(directory: Path, files: Dict[str, str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", default=DEFAULT_DEST)
    parser.add_argument("--write-pins", metavar="PINS_DIR", help="write the pins directory for them")
    args = parser.parse_args(argv)
    dest = Path(args.dest)
    commits = make_all(dest)
    for name, sha in commits.items():
        print(f"{dest / name}: {sha}")
    if args.write_pins:
        write_pins(Path(args.write_pins), pin_files(dest, commits))
    elif args.dest == DEFAULT_DEST and PINS.exists():
        # Only the pins of what it made: a pin of another upstream (a component added with its
        # own repository, docs: "Adding a component") is not its business.
        text = "".join(p.read_text() for p in sorted(PINS.glob("*.toml")))
        pinned = dict(re.findall(r'\[mini-([\w-]+)\][^\[]*?commit = "([0-9a-f]{40})"', text, re.S))
        stale = sorted(name for name, sha in commits.items() if pinned.get(name) != sha)
        if stale:
            print(f"error: {PINS} pins other commits of {', '.join(stale)} than these (or none): builds of them would "
                  f"fetch commits that are not there. Write the pins: {sys.argv[0]} --write-pins {PINS}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
