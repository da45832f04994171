#!/usr/bin/env python3
"""Creates the miniature upstream repositories (aotriton, torch, flash-attention, vllm).

Each is a real git repository holding a tiny Python package with a C extension and a HIP
kernel that its setup.py compiles with the toolchain's clang for every gpu target into an
AMDGPU code object shipped in the wheel. Each downstream build imports its upstream's
installed wheel. Commits use a fixed author and date, so the same content gives the same
SHA on every machine and tests/mini/pins.toml can pin them.

Usage: make_upstreams.py [--dest DIR] [--write-pins PINS_TOML]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

DEFAULT_DEST = "/tmp/rocm-pants-mini"
PINS = Path(__file__).with_name("pins.toml")

# name -> (python package, upstream packages it imports while building)
COMPONENTS: Dict[str, List[str]] = {
    "aotriton": [],
    "torch": ["mini_aotriton"],
    "flash_attention": ["mini_torch"],
    "vllm": ["mini_torch", "mini_flash_attention"],
}

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
import os
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

UPSTREAMS = {upstreams!r}
# Every ROCm build here gets its targets from PYTORCH_ROCM_ARCH (seed 000).
ARCHS = [a for a in os.environ["PYTORCH_ROCM_ARCH"].split(";") if a]


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


setup(
    name="{package}",
    version="{version}",
    packages=["{package}"],
    ext_modules=[Extension("{package}._C", ["csrc/module.c"])],
    cmdclass={{"build_py": BuildWithKernels}},
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

static PyObject *answer(PyObject *self, PyObject *args) {{ return PyLong_FromLong({answer}); }}

static PyMethodDef methods[] = {{{{"answer", answer, METH_NOARGS, "fixture"}}, {{NULL, NULL, 0, NULL}}}};

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


# Build requirements kept in the upstream tree, as vLLM keeps requirements/build.txt: two
# small pure-Python wheels, unpinned here; the lock (3rdparty/build/py3.11/mini-vllm.lock) pins them.
# And cmake, as every real vLLM and PyTorch requirement file lists it: the lock leaves it out,
# and the build uses the system cmake.
BUILD_REQUIREMENTS = {"vllm": "six>=1.15\ntomli>=2\ncmake>=3.20\n"}


def component_files(name: str, version: str = "1.0.0") -> Dict[str, str]:
    package = f"mini_{name}"
    files = {
        "setup.py": SETUP_PY.format(package=package, upstreams=COMPONENTS[name], version=version),
        f"{package}/__init__.py": INIT_PY,
        "csrc/module.c": MODULE_C.format(answer=42),
        "kernels/scale.hip": KERNEL_HIP,
        "README.md": f"# {package}\n\nA miniature stand-in for {name}, for rocm-pants tests.\n",
    }
    if name in BUILD_REQUIREMENTS:
        files["requirements/build.txt"] = BUILD_REQUIREMENTS[name]
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
    return {name: make_repo(dest, name) for name in COMPONENTS}


def pins_text(dest: Path, commits: Dict[str, str]) -> str:
    lines = [
        "# Pins of the miniature chain. The repositories are made by tests/mini/make_upstreams.py",
        "# with fixed authors and dates, so these SHAs are the same on every machine.",
        "",
    ]
    for name, sha in commits.items():
        lines += [f"[mini-{name}]", f'url = "file://{dest}/{name}"', 'track = "main"', f'commit = "{sha}"', ""]
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", default=DEFAULT_DEST)
    parser.add_argument("--write-pins", metavar="PINS_TOML", help="write a pins file for them")
    args = parser.parse_args(argv)
    dest = Path(args.dest)
    commits = make_all(dest)
    for name, sha in commits.items():
        print(f"{dest / name}: {sha}")
    if args.write_pins:
        Path(args.write_pins).write_text(pins_text(dest, commits))
    elif args.dest == DEFAULT_DEST and PINS.exists():
        pinned = dict(re.findall(r'\[mini-(\w+)\][^\[]*?commit = "([0-9a-f]{40})"', PINS.read_text(), re.S))
        if pinned != commits:
            print(f"warning: {PINS} pins other commits; run with --write-pins {PINS}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
