"""Torch-sized fixtures for the benchmarks, generated at run time (never committed).

- `big_tree`: an upstream shaped like PyTorch's checkout: ~100k files (third-party sources,
  headers, docs, tests) with, among them, a C component of ~2,000 translation units that its
  setup.py compiles (MAX_JOBS at a time, through $CC, so ccache applies; or through CMake +
  ninja in a build directory a kept one can stand for, as PyTorch's) and links into one
  shared library.
  With `library_bytes`, each unit also carries its share of that many bytes of "device code"
  (as a HIP unit's object carries its offload bundle), so the shared library is torch-sized.
- `big_tree_tiny_wheel`: 20,000-odd source-like files and a one-module wheel: what a second
  machine pulls when every wheel is a cache hit.
- `big_wheel`: a small upstream whose wheel is mostly data, at least 1 GiB of it, generated
  while building from a fixed seed (so the same source gives the same bytes) and
  incompressible, as compiled GPU code is.

Commits are written with `git fast-import`: 100k files take seconds, not minutes.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path
from typing import Iterator, Tuple

from mini import cmake_component
from mini.make_upstreams import GIT_ENV, git

# One translation unit: a few functions with loops, ~0.05 s at -O2 with clang-19.
TU = """\
#include "big.h"
static double step_{i}(double x, int k) {{ return x * {i}.5 / (k + 1.0) + k; }}
{helpers}
double big_entry_{i}(double x) {{
  double acc = 0;
  for (int k = 0; k < {n}; k++) acc += step_{i}(x, k);
  return acc{calls};
}}
"""

BIG_SETUP = """\
import os
from concurrent.futures import ThreadPoolExecutor
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

N = {n}

class ParallelBuildExt(build_ext):
    # As PyTorch does (ninja): MAX_JOBS compiles at once (the build sets it from cores and
    # memory). setuptools' own `parallel` only builds several extensions at once.
    def build_extension(self, ext):
        one = self.compiler.compile
        jobs = int(os.environ.get("MAX_JOBS", "1"))

        def compile(sources, *args, **kwargs):
            with ThreadPoolExecutor(jobs) as pool:
                return [obj for objs in pool.map(lambda s: one([s], *args, **kwargs), sources) for obj in objs]

        self.compiler.compile = compile
        super().build_extension(ext)

setup(
    name="big-torch",
    version="{version}",
    packages=["big_torch"],
    # BIG_TORCH_NO_EXT: the same tree without compiling (the bench's source-stage probe).
    ext_modules=[] if os.environ.get("BIG_TORCH_NO_EXT") else [Extension("big_torch._C", sources=[f"csrc/tu{{i}}.c" for i in range(N)], include_dirs=["csrc"],
                           extra_compile_args=["-O2"])],
    cmdclass={{"build_ext": ParallelBuildExt}},
)
"""

WHEEL_SETUP = """\
import os
import random
from setuptools import setup
from setuptools.command.build_py import build_py

class WithData(build_py):
    # The payload stands in for compiled GPU code: incompressible, generated from a seed.
    def run(self):
        super().run()
        out = os.path.join(self.build_lib, "big_wheel", "kernels")
        os.makedirs(out, exist_ok=True)
        rng = random.Random({seed})
        for part in range({parts}):
            with open(os.path.join(out, f"part{{part:03d}}.bin"), "wb") as f:
                for _ in range(64):
                    f.write(rng.randbytes(1 << 20))

setup(name="big-wheel", version="1.0.0", packages=["big_wheel"], cmdclass={{"build_py": WithData}})
"""


# A unit's device code: incompressible bytes the assembler generates from the unit's seed (a
# 64-bit LCG, times 64 odd constants a line: ~0.07 s of CPU for 0.5 MiB), in a section of
# its own that the link keeps (an exported symbol), as an offload bundle is.
DEVICE_CODE = """\
__asm__(".section .rodata.kernels_{i},\\"a\\"\\n.p2align 4\\n.globl big_kernels_{i}\\nbig_kernels_{i}:\\n"
        ".set x, {seed}\\n.rept {lines}\\n.set x, (x * 6364136223846793005 + 1442695040888963407)\\n"
        ".quad {values}\\n.endr\\n.text\\n");
"""
_MULTIPLIERS = [(0x9E3779B97F4A7C15 * (2 * k + 1)) % (1 << 64) | 1 for k in range(64)]
LINE_BYTES = 8 * len(_MULTIPLIERS)


def device_code(i: int, lines: int) -> str:
    values = ", ".join(f"x * {m}" for m in _MULTIPLIERS)
    return DEVICE_CODE.format(i=i, seed=i + 1, lines=lines, values=values)


def _filler(i: int) -> bytes:
    # Distinct contents (git would store identical files once), ~1 KB: text, as sources are.
    line = hashlib.sha256(str(i).encode()).hexdigest()
    return (f"// third-party file {i}\n" + (line + "\n") * 16).encode()


def source_like(i: int) -> bytes:
    # ~700 bytes (PyTorch's average file), lines that differ: git packs it to ~60 %.
    lines = (hashlib.sha256(f"{i}.{k}".encode()).hexdigest() for k in range(10))
    return (f"// third-party file {i}\n" + "".join(f"x = '{line}';\n" for line in lines)).encode()


def big_tree_files(n_files: int, n_tus: int, variant: str = "", library_bytes: int = 0, cmake: bool = False) -> Iterator[Tuple[str, bytes]]:
    """With `cmake`, setup.py builds the units through CMake + ninja (mini/cmake_component.py),
    as PyTorch does; without, through setuptools, MAX_JOBS at a time."""
    helpers = 12
    lines = -(-library_bytes // (n_tus * LINE_BYTES))  # per unit, rounded up
    for i in range(n_tus):
        body = "\n".join(
            f"static double h{j}_{i}(double x) {{ double s = 0; for (int k = 0; k < {j + 4}; k++) s += x / (k + {j}.5); return s; }}"
            for j in range(helpers)
        )
        calls = "".join(f" + h{j}_{i}(x)" for j in range(helpers))
        text = TU.format(i=i, n=i % 97 + 3, helpers=body, calls=calls)
        if lines:
            text += device_code(i, lines)
        if i == 0 and variant:
            text += f"/* {variant} */\n"
        yield f"csrc/tu{i}.c", text.encode()
    yield "csrc/big.h", "".join(f"double big_entry_{i}(double x);\n" for i in range(n_tus)).encode()
    if cmake:
        yield "setup.py", cmake_component.setup_py("big-torch", "big_torch", "csrc", no_ext="BIG_TORCH_NO_EXT").encode()
        yield "csrc/CMakeLists.txt", cmake_component.cmake_lists("big-torch").encode()
    else:
        yield "setup.py", BIG_SETUP.format(n=n_tus, version="1.0.0").encode()
    yield "big_torch/__init__.py", b"ARCHS = ['gfx90a']\n"
    fill = n_files - n_tus - (4 if cmake else 3)
    for i in range(fill):
        yield f"third_party/lib{i % 40}/src/d{i // 2000}/f{i}.cpp", _filler(i)


TINY_SETUP = """\
from setuptools import setup

setup(name="tiny-wheel", version="1.0.0", packages=["tiny_wheel"])
"""


def big_tree_tiny_wheel_files(n_files: int) -> Iterator[Tuple[str, bytes]]:
    """A big tree (~700 bytes a file, as PyTorch's average) whose wheel is one small module:
    what a second machine pulls is then the tree's cost, not the wheel's."""
    yield "setup.py", TINY_SETUP.encode()
    yield "tiny_wheel/__init__.py", b"ARCHS = ['gfx90a', 'gfx1151']\n"
    for i in range(n_files - 2):
        yield f"third_party/lib{i % 40}/src/d{i // 2000}/f{i}.cpp", source_like(i)


def big_wheel_files(gib: float) -> Iterator[Tuple[str, bytes]]:
    parts = max(1, round(gib * 16))  # 64 MiB each
    yield "setup.py", WHEEL_SETUP.format(seed=1151, parts=parts).encode()
    yield "big_wheel/__init__.py", b"ARCHS = ['gfx90a']\n"


def fast_import(repo: Path, files: Iterator[Tuple[str, bytes]], message: str) -> str:
    """One root commit on `main` holding exactly `files`."""
    if not (repo / ".git").exists():
        repo.mkdir(parents=True, exist_ok=True)
        git(repo, "init", "-q", "-b", "main")
    proc = subprocess.Popen(["git", "fast-import", "--quiet"], cwd=repo, stdin=subprocess.PIPE, env={**os.environ, **GIT_ENV})
    assert proc.stdin is not None
    write = proc.stdin.write
    write(b"commit refs/heads/main\ncommitter fixture <fixture@rocm-pants.invalid> 1767225600 +0000\n")
    msg = message.encode()
    write(b"data %d\n%s\n" % (len(msg), msg))
    for path, content in files:
        write(b"M 100644 inline %s\ndata %d\n%s\n" % (path.encode(), len(content), content))
    proc.stdin.close()
    assert proc.wait() == 0, "git fast-import failed"
    return git(repo, "rev-parse", "refs/heads/main").strip()

