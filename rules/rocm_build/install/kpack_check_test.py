"""kpack_check.py on facts scripts/elf_links.py (with kpack.py) reads from wheels in TheRock's
split layout: a host library clang-19 linked from two HIP translation units, split by the test
writer (tests/mini/kpack_writer.py) into a host-only library with a `.rocm_kpack_ref` marker and
two HIPK wrappers, and a device wheel whose `.kpack` archive holds the real gfx1151 code objects
clang-19 compiled from the same sources (gfx942 ones for the wrong-arch case)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Mapping, Sequence, Tuple

import pytest

from mini import kpack_writer
from rocm_build.install.kpack_check import KpackArchive, KpackRef, kpack_facts, kpack_problems
from rocm_build.testutil.wheel_facts import read_elf_links as read
from rocm_build.testutil.wheel_facts import wheel

HOST = "mini_blas-1.0-py3-none-linux_x86_64.whl"
DEVICE = "mini_blas_device_gfx1151-1.0-py3-none-linux_x86_64.whl"
LIBRARY = "_mini_blas/lib/libmini_blas.so"
KERNEL = "lib/libmini_blas.so"
ARCHIVE = "_mini_blas/.kpack/blas_lib_gfx1151.kpack"
OWNERS = {HOST: "tests/mini/therock:blas"}
UNITS = {
    "axpy": 'extern "C" __global__ void axpy(float *x, float a) { x[__builtin_amdgcn_workitem_id_x()] += a; }\n',
    "scale": 'extern "C" __global__ void scale(float *x, float a) { x[__builtin_amdgcn_workitem_id_x()] *= a; }\n',
}
SEARCH_PATH = "../.kpack/blas_lib_@GFXARCH@.kpack"
WRONG_ARCH = (
    f"{LIBRARY} in {HOST} (tests/mini/therock:blas) references kernel {KERNEL}#1 for gfx1151; the archive it looks in, "
    f"{ARCHIVE} in the device wheel {DEVICE}, files it under gfx1151, but its ELF header says gfx942: on a gfx1151 GPU "
    f"it fails with hipErrorInvalidImage. Rebuild the device wheel for gfx1151."
)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Tuple[bytes, Dict[str, Dict[str, bytes]]]:
    """The split library (a HIPK wrapper per translation unit) and each unit's code object per arch."""
    return kpack_writer.split_hip_library(
        tmp_path_factory.mktemp("hip"), "libmini_blas.so", UNITS, KERNEL, [SEARCH_PATH], ("gfx1151", "gfx942")
    )


def host_wheel(built, tmp: Path) -> Path:
    """TheRock's split host: the host-only library, and its device wheel named by its extra."""
    requires = ['mini-blas-device-gfx1151==1.0; extra == "device-gfx1151"']
    return wheel(tmp / HOST, {LIBRARY: built[0]}, requires)


def code(built, arches: Sequence[str] = ("gfx1151", "gfx1151")) -> Dict[str, Dict[str, bytes]]:
    """The archive's kernels as TheRock keys them (`<kernel_name>#<wrapper index>`), each unit's
    code object compiled for `arches[i]` and filed under gfx1151."""
    return {key: {"gfx1151": by_arch[arch]} for (key, by_arch), arch in zip(built[1].items(), arches)}


def problems(tmp: Path, wheels: Sequence[Path], gpu_targets: Sequence[str] = ("gfx1151",)):
    refs, archives, devices = [], [], {}
    for path in wheels:
        found = read(path, tmp)
        assert found["unreadable"] == {}
        wheel_refs, wheel_archives = kpack_facts(path.name, found)
        refs += wheel_refs
        archives += wheel_archives
        devices[path.name] = found["device_requires"]
    return kpack_problems(refs, archives, gpu_targets, devices, OWNERS)


def device_wheel(tmp: Path, kernels: Mapping[str, Mapping[str, bytes]], compression: str = "none") -> Path:
    data = kpack_writer.archive(kernels, ["gfx1151"], "blas_lib", compression)
    return wheel(tmp / DEVICE, {ARCHIVE: data}, ["mini-blas==1.0"])


def test_the_split_set_reads_as_therock_writes_it(built, tmp_path) -> None:
    host = read(host_wheel(built, tmp_path), tmp_path)
    assert host["kpack_refs"] == {
        LIBRARY: {"kernel_name": KERNEL, "search_paths": ["../.kpack/blas_lib_@GFXARCH@.kpack"], "indexes": [0, 1]}
    }
    assert host["device_requires"] == {"gfx1151": ["mini-blas-device-gfx1151"]}
    assert LIBRARY in host["elves"]  # still a host library of the closure
    device = read(device_wheel(tmp_path, code(built)), tmp_path)
    assert device["kpacks"] == {
        ARCHIVE: {
            "arches": ["gfx1151"], "compression": "none", "unreadable": {},
            "kernels": {f"{KERNEL}#0": {"gfx1151": "gfx1151"}, f"{KERNEL}#1": {"gfx1151": "gfx1151"}},
        }
    }  # fmt: skip


def test_a_good_split_set_is_accepted(built, tmp_path) -> None:
    assert problems(tmp_path, [host_wheel(built, tmp_path), device_wheel(tmp_path, code(built))]) == []


def test_a_zstd_per_kernel_archive_is_read(built, tmp_path) -> None:
    device = device_wheel(tmp_path, code(built), "zstd-per-kernel")
    assert read(device, tmp_path)["kpacks"][ARCHIVE]["compression"] == "zstd-per-kernel"
    assert problems(tmp_path, [host_wheel(built, tmp_path), device]) == []
    wrong = device_wheel(tmp_path, code(built, ("gfx1151", "gfx942")), "zstd-per-kernel")
    assert problems(tmp_path, [host_wheel(built, tmp_path), wrong]) == [WRONG_ARCH]


def test_the_device_wheel_missing(built, tmp_path) -> None:
    assert problems(tmp_path, [host_wheel(built, tmp_path)]) == [
        f"{LIBRARY} in {HOST} (tests/mini/therock:blas) references kernel {KERNEL}#0, {KERNEL}#1 for gfx1151; it looks "
        f"in {ARCHIVE}, which no wheel of the set installs: the device wheel mini-blas-device-gfx1151 should carry it: "
        f"add it to the chain (a device pin of mini-blas for gfx1151). On a gfx1151 GPU it fails with "
        f"hipErrorInvalidImage."
    ]


def test_a_target_no_device_wheel_is_named_for(built, tmp_path) -> None:
    wheels = [host_wheel(built, tmp_path), device_wheel(tmp_path, code(built))]
    assert problems(tmp_path, wheels, ("gfx1151", "gfx1100")) == [
        f"{LIBRARY} in {HOST} (tests/mini/therock:blas) references kernel {KERNEL}#0, {KERNEL}#1 for gfx1100; it looks "
        f"in _mini_blas/.kpack/blas_lib_gfx1100.kpack, which no wheel of the set installs: {HOST} names no device "
        f"wheel for gfx1100 (no `device-gfx1100` extra): use a build of mini-blas whose device wheels cover gfx1100. "
        f"On a gfx1100 GPU it fails with hipErrorInvalidImage."
    ]


def test_a_kernel_missing_from_the_archive(built, tmp_path) -> None:
    kernels = code(built)
    del kernels[f"{KERNEL}#1"]
    assert problems(tmp_path, [host_wheel(built, tmp_path), device_wheel(tmp_path, kernels)]) == [
        f"{LIBRARY} in {HOST} (tests/mini/therock:blas) references kernel {KERNEL}#1 for gfx1151, which the archive "
        f"it looks in, {ARCHIVE} in the device wheel {DEVICE}, does not hold (it holds {KERNEL}#0 for gfx1151): on a "
        f"gfx1151 GPU the runtime fails with hipErrorInvalidImage (\"kernel not found in this archive\"). The host "
        f"library and the device wheel come from different splits: pin the device wheel of the host's own build."
    ]


def test_an_archive_indexed_off_by_one_from_the_wrappers(built, tmp_path) -> None:
    # ROCm/rocm-systems#6943: the archive keys its code objects #1, #2; the wrappers ask for #0, #1.
    shifted = {f"{KERNEL}#{i + 1}": by_arch for i, by_arch in enumerate(code(built).values())}
    assert problems(tmp_path, [host_wheel(built, tmp_path), device_wheel(tmp_path, shifted)]) == [
        f"{LIBRARY} in {HOST} (tests/mini/therock:blas) references kernel {KERNEL}#0 for gfx1151, which the archive "
        f"it looks in, {ARCHIVE} in the device wheel {DEVICE}, does not hold (it holds {KERNEL}#1, {KERNEL}#2: its "
        f"table of contents is indexed +1 from the wrappers' code object indexes, the shape of "
        f"ROCm/rocm-systems#6943): on a gfx1151 GPU the runtime fails with hipErrorInvalidImage (\"kernel not found "
        f"in this archive\"). The host library and the device wheel come from different splits: pin the device "
        f"wheel of the host's own build."
    ]


def test_a_code_object_for_the_wrong_arch(built, tmp_path) -> None:
    device = device_wheel(tmp_path, code(built, ("gfx1151", "gfx942")))
    assert problems(tmp_path, [host_wheel(built, tmp_path), device]) == [WRONG_ARCH]


def test_an_unreadable_archive_is_named(built, tmp_path) -> None:
    data = kpack_writer.archive(code(built), ["gfx1151"], "blas_lib")
    cut = wheel(tmp_path / DEVICE, {ARCHIVE: b"KPAK" + data[4:8] + (10**6).to_bytes(8, "little") + data[16:200]})
    assert problems(tmp_path, [host_wheel(built, tmp_path), cut])[0] == (
        f"{ARCHIVE} in {DEVICE} is not a readable .kpack archive: its table of contents offset 1000000 lies outside "
        f"the file (200 bytes)"
    )


@pytest.mark.parametrize("index", ["²", "9" * 5000, "-1", " 1"], ids=["superscript two", "5000 digits", "negative", "space"])
def test_an_archive_key_whose_index_is_no_number_is_listed_not_compared(index) -> None:
    # Keys come from someone else's archive: `#²` is a digit to str.isdigit() and not to int(),
    # and 5,000 digits pass Python's limit on int(); neither may end the check in a traceback.
    ref = KpackRef(HOST, LIBRARY, KERNEL, (SEARCH_PATH,), (0,))
    archive = KpackArchive(DEVICE, ARCHIVE, ("gfx1151",), {f"{KERNEL}#{index}": {"gfx1151": "gfx1151"}})
    shown = f"{KERNEL}#{index}"
    assert kpack_problems([ref], [archive], ["gfx1151"], {}, OWNERS) == [
        f"{LIBRARY} in {HOST} (tests/mini/therock:blas) references kernel {KERNEL}#0 for gfx1151, which the archive "
        f"it looks in, {ARCHIVE} in the device wheel {DEVICE}, does not hold (it holds {shown} for gfx1151): on a "
        f"gfx1151 GPU the runtime fails with hipErrorInvalidImage (\"kernel not found in this archive\"). The host "
        f"library and the device wheel come from different splits: pin the device wheel of the host's own build."
    ]
