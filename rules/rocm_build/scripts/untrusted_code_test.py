"""The device-code readers on hostile wheels (issue 58): `.kpack` archives and offload sections
shaped as the attacks found were, built here in memory (tests/fuzz/hostile.py: a frame that
says gigabytes is kilobytes of RLE blocks), around a real gfx1151 code object clang-19
compiles. Each reader runs as the audit runs it, a process (gpu_code.py; elf_links.py for the
install set's load check), here under RLIMIT_AS of LIMIT bytes and a timeout: the finding is
asserted to the letter, the child's peak memory and its time against bounds that hold on a
loaded machine."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import zipfile
import zlib
from pathlib import Path
from typing import Dict, Iterable, Mapping, Tuple, Union

import pytest

from fuzz import hostile
from fuzz.hostile import mp_bin, mp_float, mp_int, mp_list, mp_map, mp_str
from rocm_build.install.load_check import ELF_LINKS
from rocm_build.sandbox_scripts import script_bytes
from rocm_build.audits.gpu_audit import GPU_CODE

LIMIT = 256 << 20  # the child's address space
PEAK = 160 << 20  # its resident peak: the interpreter and its modules take about 40 MiB
SECONDS = 60  # each of these reads takes under 2 s alone; the bound holds on a machine 30x slower
GIB = 1 << 30
ARCHIVE = "_mini_blas/.kpack/blas_lib_gfx1151.kpack"
KEY = "lib/libmini_blas.so#0"
CLANG = "/usr/bin/clang-19"
OBJCOPY = "/usr/bin/llvm-objcopy-19"
# The reader runs inside this, which caps its address space and reports its peak (ru_maxrss, KiB).
BOOT = """
import atexit, resource, runpy, sys
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
atexit.register(lambda: sys.stderr.write("\\npeak=%d\\n" % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
sys.path.insert(0, sys.argv[1])
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
Member = Union[bytes, Iterable[bytes]]


@pytest.fixture(scope="module")
def code(tmp_path_factory) -> bytes:
    """A gfx1151 code object clang-19 compiles."""
    work = tmp_path_factory.mktemp("co")
    (work / "k.hip").write_text('extern "C" __attribute__((global)) void k(float *x) { x[__builtin_amdgcn_workitem_id_x()] = 1; }\n')
    flags = ["-x", "hip", "-nogpulib", "-nogpuinc", "-O2", "--offload-arch=gfx1151", "--cuda-device-only", "--no-gpu-bundle-output"]
    subprocess.run([CLANG, *flags, "-c", "k.hip", "-o", "k.co"], cwd=work, check=True)
    return (work / "k.co").read_bytes()


@pytest.fixture(scope="module")
def host_library(tmp_path_factory) -> Path:
    """A host shared library of no GPU code, to give offload sections."""
    work = tmp_path_factory.mktemp("so")
    subprocess.run([CLANG, "-x", "c", "-fPIC", "-shared", "-", "-o", str(work / "libhost.so")], input=b"int answer(void) { return 42; }\n", check=True)
    return work / "libhost.so"


def with_fatbin(library: Path, tmp: Path, section: bytes) -> bytes:
    """`library` with `section` added as its `.hip_fatbin` (llvm-objcopy, as a linker leaves one)."""
    (tmp / "fatbin").write_bytes(section)
    out = tmp / "libk.so"
    subprocess.run([OBJCOPY, f"--add-section=.hip_fatbin={tmp / 'fatbin'}", str(library), str(out)], check=True)
    return out.read_bytes()


def write_wheel(path: Path, members: Mapping[str, Member]) -> Path:
    """A deflated wheel of these members, each bytes or pieces written as they come."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, member in members.items():
            with z.open(name, "w", force_zip64=True) as f:
                for piece in [member] if isinstance(member, bytes) else member:
                    f.write(piece)
        z.writestr(f"{path.name.split('-')[0]}-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: x\nVersion: 1.0\n")
    return path


def run_bounded(scripts, wheel: Path, tmp: Path) -> Tuple[dict, int, float]:
    """The script's JSON for the wheel, its peak resident bytes and its seconds, run under
    RLIMIT_AS of LIMIT; its exit must be 0 and its stderr empty but for the peak."""
    here = tmp / "scripts"
    here.mkdir(exist_ok=True)
    for name in scripts:
        (here / name).write_bytes(script_bytes(name))
    start = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-c", BOOT.format(limit=LIMIT), str(here), str(here / scripts[0]), str(wheel)],
        capture_output=True, text=True, timeout=SECONDS,
    )  # fmt: skip
    seconds = time.monotonic() - start
    rest, _, peak = run.stderr.rpartition("peak=")
    assert (run.returncode, rest.strip()) == (0, ""), run.stderr[-3000:]
    return json.loads(run.stdout), int(peak) * 1024, seconds


def gpu_code(tmp: Path, members: Mapping[str, Member]) -> dict:
    found, peak, seconds = run_bounded(GPU_CODE, write_wheel(tmp / "mini_blas-1.0-py3-none-linux_x86_64.whl", members), tmp)
    assert peak < PEAK and seconds < SECONDS, (peak, seconds)
    return found


def elf_links(tmp: Path, members: Mapping[str, Member]) -> dict:
    found, peak, seconds = run_bounded(ELF_LINKS, write_wheel(tmp / "mini_blas-1.0-py3-none-linux_x86_64.whl", members), tmp)
    assert peak < PEAK and seconds < SECONDS, (peak, seconds)
    return found


def zstd_archive(frames, entries: Dict[str, bytes]) -> bytes:
    """A zstd-per-kernel archive of these frames, `entries` {kernel key: packed entry} under gfx1151."""
    region = hostile.zstd_region(frames)
    kernels = mp_map([(mp_str(k), mp_map([(mp_str("gfx1151"), e)])) for k, e in entries.items()])
    return hostile.kpack(region, hostile.toc(kernels, "zstd-per-kernel", hostile.zstd_fields(region)))


def stored_archive(region: bytes, spans, kernels: bytes = b"") -> bytes:
    """A `none` archive of this region and blob table, KEY the code object of ordinal 0."""
    kernels = kernels or hostile.one_kernel(KEY, "gfx1151", hostile.entry(mp_int(0)))
    return hostile.kpack(region, hostile.toc(kernels, "none", [hostile.blobs(spans)]))


def unreadable(found: dict, why: str) -> str:
    return f"the code object of {KEY} @ gfx1151 cannot be read: {why}"


# -- zstd frames: only the first 64 bytes of a code object are inflated --------------------


def test_a_frame_of_a_gibibyte_is_read_for_its_header_alone(code, tmp_path) -> None:
    # A streamed frame (no size in its header) of the code object and 1 GiB of zeros, 32 KiB
    # of RLE blocks: its arch is in its first bytes, the rest never inflates.
    frame = hostile.zstd_frame(code[:256], GIB)
    found = gpu_code(tmp_path, {ARCHIVE: zstd_archive([frame], {KEY: hostile.entry(mp_int(0))})})
    assert found["kpacks"][ARCHIVE]["kernels"] == {KEY: {"gfx1151": "gfx1151"}}
    assert found["unreadable"] == {}


@pytest.mark.parametrize("size", [GIB, 16 * GIB], ids=["1 GiB", "16 GiB"])
def test_a_frame_that_declares_more_than_a_code_object_has_is_refused(code, tmp_path, size) -> None:
    frame = hostile.zstd_frame(code[:256], size - 256, declared=size)
    archive = zstd_archive([frame], {KEY: hostile.entry(mp_int(0), original_size=size)})
    found = gpu_code(tmp_path, {ARCHIVE: archive, "pkg/k.co": code})
    assert found["unreadable"] == {
        ARCHIVE: unreadable(found, f"its zstd frame declares {size} bytes, over the 268435456 a code object may have")
    }
    assert found["code_objects"] == {"pkg/k.co": ["gfx1151"]}  # the rest of the wheel's result is kept


def test_a_frame_whose_size_differs_from_its_entry_is_refused(code, tmp_path) -> None:
    frame = hostile.zstd_frame(code[:256], (64 << 20) - 256, declared=64 << 20)
    found = gpu_code(tmp_path, {ARCHIVE: zstd_archive([frame], {KEY: hostile.entry(mp_int(0), original_size=len(code))})})
    assert found["unreadable"][ARCHIVE] == unreadable(found, f"its zstd frame declares 67108864 bytes, its `original_size` {len(code)}")


def test_one_large_frame_named_by_many_entries_inflates_once(code, tmp_path) -> None:
    # One 200 MiB frame under 10,000 kernel keys: read once, 64 bytes of it.
    frame = hostile.zstd_frame(code[:256], (200 << 20) - 256, declared=200 << 20)
    entries = {f"lib/libmini_blas.so#{i}": hostile.entry(mp_int(0), original_size=200 << 20) for i in range(10_000)}
    found = gpu_code(tmp_path, {ARCHIVE: zstd_archive([frame], entries)})
    kernels = found["kpacks"][ARCHIVE]["kernels"]
    assert (len(kernels), set(a for k in kernels.values() for a in k.values()), found["unreadable"]) == (10_000, {"gfx1151"}, {})


# -- the table of contents: its size, its nesting, its types ------------------------------------


def test_a_table_of_a_million_entries_is_refused_at_its_header(tmp_path) -> None:
    # 1M kernels (24 MiB of msgpack, a small wheel): refused before an entry is read.
    region = hostile.zstd_region([hostile.zstd_frame(hostile.amdgpu_header(), 0)])
    fields = b"".join(k + v for k, v in [
        (mp_str("gfx_arches"), mp_list([mp_str("gfx1151")])), (mp_str("compression_scheme"), mp_str("zstd-per-kernel")),
        *hostile.zstd_fields(region),
    ])  # fmt: skip
    head = hostile.kpack(region, b"")  # the table of contents follows the region
    archive = [head, b"\xdf" + (5).to_bytes(4, "big") + fields + mp_str("toc"), *hostile.many_kernels(1_000_000)]
    size = sum(len(p) for p in archive)
    found = gpu_code(tmp_path, {ARCHIVE: archive})
    assert size > 20 << 20
    assert found["unreadable"] == {ARCHIVE: "its `toc` has 1000000 entries, more than the 131072 this reader takes"}
    found = elf_links(tmp_path, {ARCHIVE: archive})
    assert found["kpacks"] == {ARCHIVE: {"error": "its `toc` has 1000000 entries, more than the 131072 this reader takes"}}


def test_a_table_of_more_code_objects_than_the_bound_is_refused(tmp_path) -> None:
    # 600 kernels of 250 arches each: each map is small, the code objects are 150,000.
    arches = mp_map([(mp_str(f"gfx{i}"), hostile.entry(mp_int(0))) for i in range(250)])
    kernels = mp_map([(mp_str(f"k#{i}"), arches) for i in range(600)])
    archive = stored_archive(hostile.amdgpu_header(), [(mp_int(64), mp_int(64))], kernels)
    found = gpu_code(tmp_path, {ARCHIVE: archive})
    assert found["unreadable"] == {ARCHIVE: "its `toc` lists more than the 131072 code objects this reader takes"}


def test_a_table_nested_ten_thousand_deep_is_refused_naming_it(tmp_path) -> None:
    deep = [(mp_str("group_name"), hostile.mp_nested(10_000))]
    table = hostile.toc(hostile.one_kernel(KEY, "gfx1151", hostile.entry(mp_int(0))), "none", [hostile.blobs([(mp_int(64), mp_int(64))]), *deep])
    found = gpu_code(tmp_path, {ARCHIVE: hostile.kpack(hostile.amdgpu_header(), table)})
    assert found["unreadable"] == {ARCHIVE: "its table of contents nests deeper than msgpack reads (it needs 5 levels)"}


WRONG_TYPES = {
    "a blob that is an integer": (
        [(mp_str("blobs"), mp_list([mp_int(7)]))], "", "blob 0 of its `blobs` is an integer (7), not a map"),
    "blobs as a map": (
        [(mp_str("blobs"), mp_map([(mp_str("0"), mp_int(64))]))], "", "its `blobs` is a map, not a list"),
    "a float offset": (
        [hostile.blobs([(mp_float(64.0), mp_int(64))])], "",
        unreadable({}, "the `offset` of blob 0 is a float (64.0), not a non-negative integer")),
    "an arch table that is a list": (
        [hostile.blobs([(mp_int(64), mp_int(64))])], mp_map([(mp_str(KEY), mp_list([mp_str("gfx1151")]))]),
        f"the `toc` entry of '{KEY}' is a list, not a map"),
    "a key stored as bin": (
        [hostile.blobs([(mp_int(64), mp_int(64))])], mp_map([(mp_bin(KEY.encode()), mp_map([]))]),
        "a kernel key of its `toc` is bytes (msgpack bin), not a string"),
    "a key with a newline": (
        [hostile.blobs([(mp_int(64), mp_int(64))])], mp_map([(mp_str("a\nb"), mp_map([]))]),
        "a kernel key of its `toc` 'a\\nb' is empty or holds a control character"),
}  # fmt: skip


@pytest.mark.parametrize("extra, kernels, expected", WRONG_TYPES.values(), ids=WRONG_TYPES.keys())
def test_a_field_of_the_wrong_type_is_one_line_naming_it(code, tmp_path, extra, kernels, expected) -> None:
    kernels = kernels or hostile.one_kernel(KEY, "gfx1151", hostile.entry(mp_int(0)))
    archive = hostile.kpack(code[:64], hostile.toc(kernels, "none", extra))
    found = gpu_code(tmp_path, {ARCHIVE: archive, "pkg/k.co": code})
    assert found["unreadable"] == {ARCHIVE: expected}
    assert found["code_objects"] == {"pkg/k.co": ["gfx1151"]}
    linked = elf_links(tmp_path, {ARCHIVE: archive})
    if expected.startswith("the code object of"):  # one code object unreadable, the archive read
        assert linked["kpacks"][ARCHIVE]["unreadable"] == {f"{KEY} @ gfx1151": expected.split("cannot be read: ")[1]}
    else:
        assert linked["kpacks"] == {ARCHIVE: {"error": expected}}
    assert linked["unreadable"] == {}


# -- offsets and sizes, against the file ---------------------------------------------------


SPANS = {
    "offset 10^9": (mp_int(10**9), mp_int(64), "its blob (offset 1000000000, size 64) runs past the end of the file ({size} bytes)"),
    "a negative offset": (mp_int(-64), mp_int(64), "the `offset` of blob 0 is an integer (-64), not a non-negative integer"),
    "a negative size": (mp_int(64), mp_int(-1), "the `size` of blob 0 is an integer (-1), not a non-negative integer"),
    "a size of 2^40": (mp_int(64), mp_int(1 << 40), "its blob's `size` 1099511627776 is over the 268435456 bytes a code object may have"),
    "a size past the end": (mp_int(64), mp_int(4096), "its blob (offset 64, size 4096) runs past the end of the file ({size} bytes)"),
}  # fmt: skip


@pytest.mark.parametrize("offset, size, why", SPANS.values(), ids=SPANS.keys())
def test_an_offset_or_size_outside_the_file_is_refused(code, tmp_path, offset, size, why) -> None:
    archive = stored_archive(code[:64], [(offset, size)])
    found = gpu_code(tmp_path, {ARCHIVE: archive})
    assert found["unreadable"] == {ARCHIVE: unreadable(found, why.format(size=len(archive)))}
    assert found["kpacks"][ARCHIVE]["kernels"] == {KEY: {}}


def test_a_zstd_region_outside_the_file_is_refused(tmp_path) -> None:
    region = hostile.zstd_region([hostile.zstd_frame(hostile.amdgpu_header(), 0)])
    fields = [(mp_str("zstd_offset"), mp_int(64)), (mp_str("zstd_size"), mp_int(1 << 40))]
    archive = hostile.kpack(region, hostile.toc(hostile.one_kernel(KEY, "gfx1151", hostile.entry(mp_int(0))), "zstd-per-kernel", fields))
    found = gpu_code(tmp_path, {ARCHIVE: archive})
    assert found["unreadable"] == {ARCHIVE: f"its zstd region (offset 64, size 1099511627776) does not fit the file ({len(archive)} bytes)"}


# -- compressed offload bundles -----------------------------------------------------------


@pytest.fixture(scope="module")
def zlib_bomb(code) -> bytes:
    """A zlib stream of the code object's header and 256 MiB of zeros (256 KiB)."""
    return hostile.zlib_stream(code[:256], (256 << 20) - 256)


def test_a_zlib_bomb_that_declares_its_size_inflates_in_pieces(code, host_library, zlib_bomb, tmp_path) -> None:
    library = with_fatbin(host_library, tmp_path, hostile.ccob(zlib_bomb, 256 << 20))
    found = gpu_code(tmp_path, {"pkg/libk.so": library})
    assert (found["libraries"], found["unreadable"]) == ({"pkg/libk.so": ["gfx1151"]}, {})


def test_a_zlib_bomb_that_declares_less_stops_there(code, host_library, zlib_bomb, tmp_path) -> None:
    library = with_fatbin(host_library, tmp_path, hostile.ccob(zlib_bomb, 11680))
    found = gpu_code(tmp_path, {"pkg/libk.so": library})
    assert found["unreadable"] == {
        "pkg/libk.so": "its compressed offload bundle at 0x0 in its .hip_fatbin section inflates to more than the 11680 bytes its header declares"
    }


def test_a_bundle_that_declares_more_than_the_bound_is_refused_unread(code, host_library, tmp_path) -> None:
    library = with_fatbin(host_library, tmp_path, hostile.ccob(zlib.compress(code), 16 * GIB, version=3))
    found = gpu_code(tmp_path, {"pkg/libk.so": library})
    assert found["unreadable"] == {
        "pkg/libk.so": "its compressed offload bundle at 0x0 in its .hip_fatbin section declares 17179869184 bytes inflated, "
        "past the 4294967296 this reader inflates for one library"
    }


def test_many_small_bundles_are_read_in_one_pass(code, host_library, tmp_path) -> None:
    # 1 MiB of bundles a few bytes each (the old reader copied the rest of the section for
    # each: quadratic), the last one holding the code object.
    tiny = hostile.ccob(zlib.compress(b"x"), 1)
    section = tiny * ((1 << 20) // len(tiny)) + hostile.ccob(zlib.compress(code), len(code))
    found = gpu_code(tmp_path, {"pkg/libk.so": with_fatbin(host_library, tmp_path, section)})
    assert (found["libraries"], found["unreadable"]) == ({"pkg/libk.so": ["gfx1151"]}, {})


def test_bundles_nested_past_the_bound_are_refused_without_recursion(code, host_library, tmp_path) -> None:
    found = gpu_code(tmp_path, {"pkg/libk.so": with_fatbin(host_library, tmp_path, hostile.nested_bundles(code, 1200))})
    assert found["unreadable"] == {
        "pkg/libk.so": "its compressed offload bundle at 0x0 > 0x0 > 0x0 > 0x0 > 0x0 in its .hip_fatbin section is nested 5 deep, "
        "past the 4 this reader inflates"
    }
    found = gpu_code(tmp_path, {"pkg/libk.so": with_fatbin(host_library, tmp_path, hostile.nested_bundles(code, 3))})
    assert (found["libraries"], found["unreadable"]) == ({"pkg/libk.so": ["gfx1151"]}, {})


def test_a_bundle_that_says_it_ends_past_its_section_is_refused(code, host_library, tmp_path) -> None:
    section = hostile.ccob(zlib.compress(code), len(code), total=1 << 30)
    found = gpu_code(tmp_path, {"pkg/libk.so": with_fatbin(host_library, tmp_path, section)})
    assert found["unreadable"] == {
        "pkg/libk.so": "its compressed offload bundle at 0x0 in its .hip_fatbin section says it is 1073741824 bytes, past the end of the section"
    }


@pytest.mark.parametrize("version", [1, 2, 3])
def test_each_bundle_version_and_method_is_read(code, host_library, tmp_path, version) -> None:
    import zstandard

    for method, payload in ((0, zlib.compress(code)), (1, zstandard.ZstdCompressor().compress(code))):
        section = hostile.ccob(payload, len(code), method=method, version=version)
        found = gpu_code(tmp_path, {"pkg/libk.so": with_fatbin(host_library, tmp_path, section)})
        assert (found["libraries"], found["unreadable"]) == ({"pkg/libk.so": ["gfx1151"]}, {}), method


def test_a_marker_past_its_bound_is_refused_unread(host_library, tmp_path) -> None:
    # A `.rocm_kpack_ref` of 1 MiB of empty lists would decode to 56 bytes an object.
    marker = mp_map([(mp_str("kernel_name"), mp_str("lib/x.so")), (mp_str("kpack_search_paths"), mp_list([b"\x90"] * (1 << 20)))])
    (tmp_path / "marker").write_bytes(marker)
    subprocess.run([OBJCOPY, f"--add-section=.rocm_kpack_ref={tmp_path / 'marker'}", str(host_library), str(tmp_path / "libk.so")], check=True)
    library = (tmp_path / "libk.so").read_bytes()
    found = gpu_code(tmp_path, {"pkg/libk.so": library})
    assert found["unreadable"] == {"pkg/libk.so": f"its .rocm_kpack_ref section is {len(marker)} bytes, more than the 65536 a marker may have"}
    linked = elf_links(tmp_path, {"pkg/libk.so": library})
    assert linked["unreadable"] == {"pkg/libk.so": f"its .rocm_kpack_ref section is {len(marker)} bytes, more than the 65536 a marker may have"}
