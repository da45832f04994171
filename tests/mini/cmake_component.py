"""An upstream whose setup.py builds its C extension through CMake and ninja, as PyTorch's and
vLLM's do: CMake configures `build/cmake` once, ninja builds what is out of date there, and
setup.py copies the library into the wheel. A kept build directory (`keep_build_dir`) makes
the next build recompile only the changed units. Used by the kept-build-directory tests (a
miniature of a few units) and the bench (2,000 units, torch-sized).

The units are every `*.c` of the source directory (a CMake glob with CONFIGURE_DEPENDS, so
ninja sees units added, removed and renamed), its headers under `include/`.
"""

from __future__ import annotations

SETUP_PY = '''\
"""{name}: a C extension built by CMake + ninja under setup.py (fixture)."""
import os
import shutil
import subprocess
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SOURCE = "{source}"


class CMakeBuild(build_ext):
    # As vLLM's cmake_build_ext: configure once, then let ninja decide what is out of date.
    def build_extension(self, ext):
        build = os.path.abspath(os.path.join("build", "cmake"))
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        if not os.path.exists(os.path.join(build, "build.ninja")):
            # $CC may start with the compiler launcher; CMake takes it apart
            # ($CMAKE_C_COMPILER_LAUNCHER is in the environment).
            compiler = os.environ.get("CC", "cc").split()[-1]
            subprocess.run(["cmake", "-G", "Ninja", "-S", SOURCE, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                            f"-DCMAKE_C_COMPILER={{compiler}}", f"-DEXT_SUFFIX={{suffix}}"], check=True)
        subprocess.run(["cmake", "--build", build, "-j", os.environ.get("MAX_JOBS", "1")], check=True)
        out = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        shutil.copyfile(os.path.join(build, "_C" + suffix), out)


setup(
    name="{name}",
    version="{version}",
    packages=["{package}"],
    # {no_ext}: the same tree without compiling (the bench's source-stage probe).
    ext_modules=[] if os.environ.get("{no_ext}") else [Extension("{package}._C", sources=[])],
    cmdclass={{"build_ext": CMakeBuild}},
)
'''

CMAKE_LISTS = """\
cmake_minimum_required(VERSION 3.18)
project({name} C)
file(GLOB UNITS CONFIGURE_DEPENDS "${{CMAKE_SOURCE_DIR}}/*.c")
add_library(_C MODULE ${{UNITS}})
target_include_directories(_C PRIVATE "${{CMAKE_SOURCE_DIR}}/include")
set_target_properties(_C PROPERTIES PREFIX "" SUFFIX "${{EXT_SUFFIX}}")
"""


def setup_py(name: str, package: str, source: str, version: str = "1.0.0", no_ext: str = "NO_EXT") -> str:
    return SETUP_PY.format(name=name, package=package, source=source, version=version, no_ext=no_ext)


def cmake_lists(name: str) -> str:
    return CMAKE_LISTS.format(name=name.replace("-", "_"))
