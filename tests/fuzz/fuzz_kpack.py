"""Fuzz target: reading TheRock's `.kpack` archives and split libraries' markers
(scripts/kpack.py), device code from wheels someone else built. Intended errors: KpackError,
one line naming the field; never another exception. What it returns must be what gpu_code.py
and elf_links.py print (JSON, string keys) and each reason one line."""

from __future__ import annotations

import io
import json
import sys

from fuzz import hostile
from fuzz.hostile import mp_bin, mp_float, mp_int, mp_list, mp_map, mp_str
from rocm_build.scripts import amdgpu_elf
from rocm_build.scripts import kpack as KPACK

INSTRUMENTED = [KPACK, amdgpu_elf]
# Inputs in the suite's run (~5 s here; a 12 s run (164k inputs) covered 190 edges against 188).
RUNS = 65_536
KEY = "lib/libtorch_hip.so#0"


def _seeds() -> list:
    head = hostile.amdgpu_header()
    one = hostile.one_kernel(KEY, "gfx1151", hostile.entry(mp_int(0)))
    stored = hostile.toc(one, "none", [hostile.blobs([(mp_int(64), mp_int(64))])])
    # Seeds stay small (libFuzzer's inputs grow to the largest): 64 MiB in RLE blocks, read for
    # its first 64 bytes; a frame that says 16 GiB, refused by its header before a block is read.
    region = hostile.zstd_region([hostile.zstd_frame(head, 64 << 20)])
    region_declared = hostile.zstd_region([hostile.zstd_frame(head, 0, declared=16 << 30)])
    archives = [
        hostile.kpack(head, stored),
        hostile.kpack(region, hostile.toc(one, "zstd-per-kernel", hostile.zstd_fields(region))),
        hostile.kpack(region_declared, hostile.toc(hostile.one_kernel(KEY, "gfx1151", hostile.entry(mp_int(0), 16 << 30)),
                                                  "zstd-per-kernel", hostile.zstd_fields(region_declared))),  # fmt: skip
        hostile.kpack(region, hostile.toc(mp_map([(mp_str(f"k#{i}"), mp_map([(mp_str("gfx1151"), hostile.entry(mp_int(0)))]))
                                                  for i in range(40)]), "zstd-per-kernel", hostile.zstd_fields(region))),  # fmt: skip
        hostile.kpack(head, hostile.toc(b"\xdf" + (1 << 20).to_bytes(4, "big"), "none")),  # a million entries, said
        hostile.kpack(head, hostile.toc(one, "none", [hostile.blobs([(mp_int(10**9), mp_int(64))])])),
        hostile.kpack(head, hostile.toc(one, "none", [hostile.blobs([(mp_int(-64), mp_int(-1))])])),
        hostile.kpack(head, hostile.toc(one, "none", [hostile.blobs([(mp_int(64), mp_int(1 << 40))])])),
        hostile.kpack(head, hostile.toc(one, "none", [(mp_str("blobs"), mp_list([mp_int(7)]))])),
        hostile.kpack(head, hostile.toc(one, "none", [(mp_str("blobs"), mp_map([(mp_str("0"), mp_int(64))]))])),
        hostile.kpack(head, hostile.toc(one, "none", [hostile.blobs([(mp_float(64.0), mp_int(64))])])),
        hostile.kpack(head, hostile.toc(mp_map([(mp_str(KEY), mp_list([mp_str("gfx1151")]))]), "none")),
        hostile.kpack(head, hostile.toc(mp_map([(mp_bin(KEY.encode()), mp_map([]))]), "none")),
        hostile.kpack(head, hostile.toc(one, "none", [(mp_str("group_name"), hostile.mp_nested(10_000))])),
    ]
    marker = mp_map([(mp_str("kernel_name"), mp_str("lib/libtorch_hip.so")), (mp_str("kpack_search_paths"), mp_list([mp_str("../.kpack/t_@GFXARCH@.kpack")]))])
    wrappers = (0x4B504948).to_bytes(4, "little") + bytes(12) + (3).to_bytes(4, "little") + bytes(4)
    return [b"\0" + a for a in archives] + [b"\1" + marker, b"\2" + wrappers * 3]


SEEDS = _seeds()


def test_one_input(data: bytes) -> None:
    if not data:
        return
    body = data[1:]
    try:
        if data[0] % 3 == 0:
            found = KPACK.read_archive(io.BytesIO(body), len(body))
        elif data[0] % 3 == 1:
            found = list(KPACK.read_marker(body))
        else:
            found = KPACK.hipk_indexes(body)
    except KPACK.KpackError as e:
        assert str(e) and "\n" not in str(e), repr(str(e))
        return
    json.dumps(found)  # what the scripts print: string keys only
    for why in (found.get("unreadable", {}).values() if isinstance(found, dict) else ()):
        assert why and "\n" not in why, repr(why)


if __name__ == "__main__":
    from fuzz.harness import main

    main(sys.modules[__name__], sys.argv)
