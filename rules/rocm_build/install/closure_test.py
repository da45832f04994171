"""closure.py on facts that scripts/elf_links.py reads from real binaries: a miniature SDK
library, a torch library that links it through RUNPATH, and an extension that links that,
compiled here by Debian's clang-19 and lld-19 and packed into wheels."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Dict, List, Sequence

import pytest

from rocm_build.install.closure import Closure, check_closure, elves_of, glibc_names, system_libraries
from rocm_build.testutil.wheel_facts import read_elf_links as read
from rocm_build.testutil.wheel_facts import wheel

CLANG = "/usr/bin/clang-19"
POLICY = ("libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1")
SDK = "mini_sdk-1.0-py3-none-linux_x86_64.whl"
TORCH = "mini_torch-1.0-cp311-cp311-linux_x86_64.whl"
VLLM = "mini_vllm-1.0-cp311-cp311-linux_x86_64.whl"


def compile_so(out: Path, source: str, *flags: str) -> Path:
    c = out.with_suffix(".c")
    c.write_text(source)
    subprocess.run([CLANG, "-shared", "-fPIC", "-fuse-ld=lld", "-o", str(out), str(c), *flags], check=True)
    return out


def version_script(tmp: Path, version: str, symbols: Sequence[str]) -> str:
    script = tmp / f"{version}.map"
    script.write_text(f"{version} {{ global: {'; '.join(symbols)}; local: *; }};\n")
    return f"-Wl,--version-script={script}"


@pytest.fixture(scope="module")
def libs(tmp_path_factory) -> Dict[str, Path]:
    """The binaries: SDK v1 (and v2, without v1's symbol), torch on SDK v1, extensions on torch."""
    tmp = tmp_path_factory.mktemp("elves")
    (tmp / "v1").mkdir()
    (tmp / "v2").mkdir()
    sdk = "int sdk_add(int a, int b) { return a + b; }\n"
    built = {
        "sdk": compile_so(tmp / "v1/libmini_sdk.so", sdk, "-Wl,-soname,libmini_sdk.so", version_script(tmp, "MINI_SDK_1.0", ["sdk_add"])),
        "sdk2": compile_so(tmp / "v2/libmini_sdk.so", "int sdk_mul(int a, int b) { return a * b; }\n",
                           "-Wl,-soname,libmini_sdk.so", version_script(tmp, "MINI_SDK_2.0", ["sdk_mul"])),
    }  # fmt: skip
    built["torch"] = compile_so(
        tmp / "libmini_torch.so", "int sdk_add(int, int);\nint torch_answer(void) { return sdk_add(40, 2); }\n",
        "-Wl,-soname,libmini_torch.so", f"-L{tmp / 'v1'}", "-lmini_sdk",
        "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../../_mini_sdk/lib",
    )  # fmt: skip
    extension = "int torch_answer(void);\nlong PyLong_FromLong(long);\nlong %s(void) { return PyLong_FromLong(torch_answer()%s); }\n"
    link_torch = (f"-L{tmp}", "-lmini_torch", "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../mini_torch/lib")
    built["ext"] = compile_so(tmp / "ext.so", extension % ("ext_ok", ""), *link_torch)
    built["ext_missing"] = compile_so(
        tmp / "ext_missing.so", "long vllm_missing(void);\n" + extension % ("ext_bad", " + vllm_missing()"), *link_torch
    )
    built["ext_no_runpath"] = compile_so(tmp / "ext_no_runpath.so", extension % ("ext_nr", ""), f"-L{tmp}", "-lmini_torch")
    built["ext_drm"] = compile_so(
        tmp / "ext_drm.so", "int drm_open(void);\nint ext_drm(void) { return drm_open(); }\n",
        "-Wl,--no-as-needed,--allow-shlib-undefined", "-Wl,-soname,ext_drm.so", f"-Wl,{tmp / 'v1/libmini_sdk.so'}",
    )  # fmt: skip
    return built


def check(tmp: Path, wheels: Dict[str, Dict[str, Path]], declared=(), requires: Dict[str, Sequence[str]] = {}) -> Closure:
    elves, required = [], {}
    for name, members in wheels.items():
        found = read(wheel(tmp / name, members, requires.get(name, ())), tmp)
        assert found["unreadable"] == {}
        elves += elves_of(name, found["elves"])
        required[name] = found["requires"]
    owners = {SDK: "tests/mini:sdk", TORCH: "tests/mini/torch:wheel", VLLM: "tests/mini/vllm:wheel"}
    return check_closure(elves, system_libraries(POLICY, declared), owners, required, glibc_names())


def chain(libs: Dict[str, Path], extension: str = "ext", sdk: str = "sdk", torch_dir: str = "mini_torch/lib") -> Dict[str, Dict[str, Path]]:
    return {
        SDK: {"_mini_sdk/lib/libmini_sdk.so": libs[sdk]},
        TORCH: {f"{torch_dir}/libmini_torch.so": libs["torch"]},
        VLLM: {f"mini_vllm/_C.cpython-311-x86_64-linux-gnu.so": libs[extension]},
    }


def test_a_chain_linked_through_runpath_loads(libs, tmp_path) -> None:
    closure = check(tmp_path, chain(libs))
    assert closure.problems == ()
    assert closure.elves == 3
    # The SDK needs libc; torch libmini_sdk.so and libc; the extension libmini_torch.so and libc.
    assert closure.links == 5
    # sdk_add@MINI_SDK_1.0 in torch; torch_answer and PyLong_FromLong in the extension.
    assert closure.symbols == 3


def test_the_sdk_wheel_missing_from_the_set(libs, tmp_path) -> None:
    wheels = chain(libs)
    del wheels[SDK]
    (problem,) = check(tmp_path, wheels).problems
    assert problem == (
        f"mini_torch/lib/libmini_torch.so in {TORCH} needs libmini_sdk.so: no wheel of the set ships it. `import` "
        f"would fail with \"libmini_sdk.so: cannot open shared object file\". Add the wheel that ships it to the "
        f"chain, or, if every target machine has it, declare it with why in `system_libraries` of tests/mini/torch:wheel."
    )


def test_an_sdk_installed_from_its_index_is_left_what_nothing_else_ships(libs, tmp_path) -> None:
    # TheRock's toolchain: the set says to install rocm[libraries]==X from its index; until its
    # wheels are pins, what only the SDK would ship is listed, not refused.
    wheels = chain(libs)
    del wheels[SDK]
    elves = []
    for name, members in wheels.items():
        elves += elves_of(name, read(wheel(tmp_path / name, members), tmp_path)["elves"])
    closure = check_closure(elves, system_libraries(POLICY, ()), {}, {}, glibc_names(), unread_sdk=True)
    assert closure.problems == ()
    assert closure.left_to_sdk == (("libmini_sdk.so", f"mini_torch/lib/libmini_torch.so in {TORCH}"),)


def test_a_library_outside_the_runpath(libs, tmp_path) -> None:
    (problem,) = check(tmp_path, chain(libs, torch_dir="mini_torch/libs")).problems
    assert problem.startswith(
        f"mini_vllm/_C.cpython-311-x86_64-linux-gnu.so in {VLLM} needs libmini_torch.so: {TORCH} ships it as "
        f"mini_torch/libs/libmini_torch.so, which its RUNPATH (mini_torch/lib) does not reach, nor does its wheel "
        f"require mini-torch."
    )


def test_a_symbol_nothing_defines(libs, tmp_path) -> None:
    (problem,) = check(tmp_path, chain(libs, extension="ext_missing")).problems
    assert problem == (
        f"mini_vllm/_C.cpython-311-x86_64-linux-gnu.so in {VLLM} needs vllm_missing, undefined in what it loads "
        f"(libmini_torch.so ({TORCH}), libmini_sdk.so ({SDK})): expected from libmini_torch.so ({TORCH}), the set's "
        f"first library it loads; no wheel of the set defines it: {VLLM} was built against another version of it, "
        f"or against a library the set does not carry. `import` would fail with \"undefined symbol: vllm_missing\"."
    )


def test_a_symbol_version_the_sdk_in_the_set_lacks(libs, tmp_path) -> None:
    (problem,) = check(tmp_path, chain(libs, sdk="sdk2")).problems
    assert problem == (
        f"mini_torch/lib/libmini_torch.so in {TORCH} needs sdk_add@MINI_SDK_1.0, undefined in what it loads "
        f"(libmini_sdk.so ({SDK})): it was linked against libmini_sdk.so, which {SDK} ships without "
        f"sdk_add@MINI_SDK_1.0: the two were built from different sources; rebuild {TORCH} against the {SDK} of "
        f"this set. `import` would fail with \"undefined symbol: sdk_add\"."
    )


def test_loaded_by_soname_once_a_required_wheel_is_imported(libs, tmp_path) -> None:
    # No RUNPATH (torch's own cpp extensions): libmini_torch.so is found loaded, by its SONAME,
    # when the extension's wheel requires mini torch (imported first); not otherwise.
    wheels = chain(libs, extension="ext_no_runpath")
    assert check(tmp_path, wheels, requires={VLLM: ["mini-torch==1.0; python_version >= '3'", "einops"]}).problems == ()
    (problem,) = check(tmp_path, wheels, requires={VLLM: ['mini-torch; extra == "cuda"']}).problems
    assert problem.startswith(
        f"mini_vllm/_C.cpython-311-x86_64-linux-gnu.so in {VLLM} needs libmini_torch.so: {TORCH} ships it as "
        f"mini_torch/lib/libmini_torch.so, and it has no RUNPATH, nor does its wheel require mini-torch."
    )


def test_a_declared_system_library(libs, tmp_path) -> None:
    # ext_drm needs libmini_sdk.so by its SONAME, and a symbol the set does not define: with
    # the library declared as the machine's, both are the machine's to provide.
    wheels = {VLLM: {"mini_vllm/ext_drm.so": libs["ext_drm"]}}
    problems = check(tmp_path, wheels).problems
    assert [p.split(":")[0] for p in problems] == [f"mini_vllm/ext_drm.so in {VLLM} needs libmini_sdk.so"]
    declared = [("tests/mini/vllm:wheel", {"libmini_sdk.so": "the box's SDK, from its ROCm install"})]
    assert check(tmp_path, wheels, declared).problems == ()


# Real ELFs not written here: the CPU torch 2.13.0 and PyPI's torchvision 0.28.0 that ./setup
# mirrors (components/kernels/pins.toml), read as package reads an install set.
MIRROR = Path(os.environ.get("ROCM_PANTS_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rocm-pants") / "kernel-mirror/files"
REAL_TORCH = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
REAL_VISION = "torchvision-0.28.0-cp311-cp311-manylinux_2_28_x86_64.whl"
# The manylinux policy's libraries (auditwheel's own list is read in package; these are its glibc ones).
GLIBC = POLICY + ("libdl.so.2", "libpthread.so.0", "librt.so.1", "libz.so.1")


def test_pypi_torchvision_beside_the_cpu_torch_cannot_load_its_cuda_ops(tmp_path) -> None:
    found = {name: read(MIRROR / name, tmp_path) for name in (REAL_TORCH, REAL_VISION)}
    # torch's 124 test programs and tools (torch/bin, torch/test) are not loaded by import.
    assert (len(found[REAL_TORCH]["elves"]), len(found[REAL_TORCH]["executables"])) == (12, 124)
    assert found[REAL_VISION]["requires"] == ["numpy", "pillow", "torch"]
    elves = [e for name, f in found.items() for e in elves_of(name, f["elves"])]
    requires = {name: f["requires"] for name, f in found.items()}
    system = system_libraries(GLIBC, ())
    closure = check_closure(elves, system, {}, requires, glibc_names())
    # torch alone is whole; image.so finds torch's libc10.so by SONAME (torchvision requires
    # torch), _C.so its own grafted libcudart by SONAME; what is left is torchvision being a CUDA
    # build: torch's CUDA libraries, which its RPATH looks for on the machine that built it.
    assert [p.split(": ")[0] for p in closure.problems] == [
        f"torchvision/_C.so in {REAL_VISION} needs libc10_cuda.so",
        f"torchvision/_C.so in {REAL_VISION} needs libtorch_cuda.so",
        f"torchvision/image.so in {REAL_VISION} needs libc10_cuda.so",
        f"torchvision/image.so in {REAL_VISION} needs libtorch_cuda.so",
    ]
    assert closure.problems[0].startswith(
        f"torchvision/_C.so in {REAL_VISION} needs libc10_cuda.so: no wheel of the set ships it (its RPATH points outside "
        f"the install set: /__w/_temp/conda_environment_"
    )
    torch_only = check_closure([e for e in elves if e.wheel == REAL_TORCH], system, {}, requires, glibc_names())
    assert torch_only.problems == () and torch_only.symbols > 5000


def test_an_unversioned_reference_binds_to_glibc_in_the_interpreters_scope(tmp_path) -> None:
    # Linked without libdl (glibc < 2.34 kept dlopen there), as triton's libproton.so is: its
    # dlopen reference has no version, and the interpreter's libc defines it.
    source = "void *dlopen(const char *, int);\nvoid *ext_dl(void) { return dlopen(0, 0); }\n"
    so = compile_so(tmp_path / "ext_dl.so", source, "-nostdlib", "-Wl,--allow-shlib-undefined")
    found = read(wheel(tmp_path / VLLM, {"mini_vllm/ext_dl.so": so}), tmp_path)
    assert found["elves"]["mini_vllm/ext_dl.so"]["undefined"] == [["dlopen", "", ""]]
    elves = elves_of(VLLM, found["elves"])
    assert check_closure(elves, system_libraries(POLICY, ()), {}, {}, glibc_names()).problems == ()
    assert "needs dlopen, undefined in what it loads" in check_closure(elves, system_libraries(POLICY, ()), {}, {}, frozenset()).problems[0]


def test_a_malformed_elf_is_reported_by_member_not_a_crash(libs, tmp_path) -> None:
    # A wheel is untrusted input: a cut library is named as unreadable, the rest still read.
    cut = tmp_path / "cut.so"
    cut.write_bytes(libs["torch"].read_bytes()[:3000])
    found = read(wheel(tmp_path / TORCH, {"mini_torch/lib/cut.so": cut, "mini_torch/lib/libmini_torch.so": libs["torch"]}), tmp_path)
    assert list(found["unreadable"]) == ["mini_torch/lib/cut.so"]
    assert list(found["elves"]) == ["mini_torch/lib/libmini_torch.so"]
