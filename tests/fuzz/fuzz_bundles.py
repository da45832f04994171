"""Fuzz target: the offload sections of host libraries (scripts/gpu_code.py): one pass over a
section finding AMDGPU ELF headers and compressed offload bundles (CCOB), inflated in pieces,
nested ones from a work list; and the ELF section table around them. Intended error:
Unreadable, one line naming the bundle or the field; never another exception."""

from __future__ import annotations

import sys
import zlib

from fuzz import hostile
from rocm_build.scripts import amdgpu_elf
from rocm_build.scripts import gpu_code as GPU_CODE

INSTRUMENTED = [GPU_CODE, amdgpu_elf]
# Inputs in the suite's run (~5 s here; a 12 s run (87k inputs) covered 143 edges against 142).
RUNS = 32_768
# A short run explores the logic, not throughput: a bundle may inflate to 64 MiB here.
GPU_CODE.MAX_INFLATED = 64 << 20


def _seeds() -> list:
    head = hostile.amdgpu_header()
    tiny = hostile.ccob(zlib.compress(b"x"), 1)
    sections = [
        head + hostile.amdgpu_header(0x41),
        hostile.ccob(zlib.compress(head), len(head)),
        hostile.ccob(hostile.zlib_stream(head, 1 << 20), 11680),  # says less than it inflates to
        hostile.ccob(zlib.compress(head), 16 << 30, version=3),
        hostile.ccob(hostile.zstd_frame(head, 1 << 20), (1 << 20) + 64, method=1),
        hostile.ccob(zlib.compress(head), len(head), version=1),
        tiny * 64 + head,
        hostile.nested_bundles(head, 6),
        hostile.ccob(zlib.compress(head), len(head), total=1 << 30),
    ]
    libraries = [hostile.host_elf([(".hip_fatbin", s)]) for s in sections[:3]]
    libraries.append(hostile.host_elf([(".llvm.offloading", head), (".rocm_kpack_ref", b"\x80")]))
    return [b"\0" + s for s in sections] + [b"\1" + lib for lib in libraries]


SEEDS = _seeds()


def test_one_input(data: bytes) -> None:
    if not data:
        return
    try:
        if data[0] % 2 == 0:
            found = GPU_CODE.Bundles().read(data[1:], ".hip_fatbin")
        else:
            found = GPU_CODE.archs_of(data[1:]) or set()
    except GPU_CODE.Unreadable as e:
        assert str(e) and "\n" not in str(e), repr(str(e))
        return
    assert all(isinstance(a, str) and a.startswith(("gfx", "unknown-mach-")) for a in found), found


if __name__ == "__main__":
    from fuzz.harness import main

    main(sys.modules[__name__], sys.argv)
