"""Fuzz target: check_box.py on a box whose files and environment are the input: KFD properties
of two nodes, /proc/self/environ (the visibility and override variables), /etc/os-release,
/proc/meminfo, amdgpu's and TTM's sysfs values, the kernel release, install_set.json and what
the package manager answers. Intended errors: none, as on a user's machine every oddity is a
finding (a `note` naming the file or variable); each finding one line a field."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

from rocm_build.scripts import check_box as BOX

INSTRUMENTED = [BOX]
# Inputs in the suite's run (~5 s here; a 12 s run (42k inputs) covered 314 edges against 312).
RUNS = 16_384
# In memory where there is a tmpfs: a run writes the files that changed since the last.
ROOT = Path(tempfile.mkdtemp(prefix="fuzz-box-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
atexit.register(shutil.rmtree, ROOT, True)  # each run left its box behind in /dev/shm
WRITTEN: dict = {}
FILES = (
    "sys/class/kfd/kfd/topology/nodes/1/properties", "sys/class/kfd/kfd/topology/nodes/2/properties", "proc/self/environ",
    "etc/os-release", "proc/meminfo", "sys/class/drm/renderD128/device/mem_info_gtt_total",
    "sys/class/drm/renderD128/device/mem_info_vram_total", "sys/module/ttm/parameters/pages_limit", "proc/sys/kernel/osrelease",
    "set/install_set.json",
)  # fmt: skip
SEPARATOR = b"\xff\xfe"  # between the files' contents in an input; the last part is the tool's answer
ANSWER = [""]
BOX.run_tool = lambda argv: ANSWER[0]  # the package manager answers with the input, not a process per run

for relative in FILES:
    (ROOT / relative).parent.mkdir(parents=True, exist_ok=True)
(ROOT / "dev/dri").mkdir(parents=True, exist_ok=True)
(ROOT / "dev/kfd").write_bytes(b"")
(ROOT / "dev/dri/renderD128").write_bytes(b"")


def box(*parts: str, answer: str = "") -> bytes:
    return SEPARATOR.join(p.encode() for p in (*parts, answer))


STRIX = "cpu_cores_count 0\nsimd_count 80\ngfx_target_version 110501\ndrm_render_minor 128\nunique_id 1311768467463790320\n"
GFX1100 = "cpu_cores_count 0\nsimd_count 96\ngfx_target_version 110000\ndrm_render_minor 129\n"
MEMORY = ("MemTotal: 130023424 kB\n", "66571993088\n", "4294967296\n", "16252928\n", "6.18.6-200.fc43.x86_64\n")
SET = '{"target": "components/vllm:wheel", "gpu_targets": ["gfx1151"]}'
DPKG = "linux-firmware\tii \t20251125.git1-0ubuntu1\n"
SEEDS = [
    box(STRIX, "", "PATH=/usr/bin\0", "ID=ubuntu\nID_LIKE=debian\n", *MEMORY, SET, answer=DPKG),
    *(box(STRIX.replace("110501", v), "", "", "ID=fedora\n", *MEMORY, SET, answer="linux-firmware\t20260110-1.fc43\n")
      for v in ("gfx1151", "110501 0", "0x1afa5")),  # fmt: skip
    box(GFX1100, STRIX, "ROCR_VISIBLE_DEVICES=0\0", 'ID="arch"\n', *MEMORY, SET),
    box(STRIX, "", "HIP_VISIBLE_DEVICES=1\0CUDA_VISIBLE_DEVICES=0\0", "ID=debian\n", *MEMORY, "null"),
    box(STRIX, GFX1100, "HSA_OVERRIDE_GFX_VERSION_1=11.0.0\0HSA_OVERRIDE_GFX_VERSION=11.5.1\0", "", *MEMORY, '{"gpu_targets": [1151]}'),
    box(GFX1100, STRIX, "ROCR_VISIBLE_DEVICES=GPU-123456,0x1\0HIP_VISIBLE_DEVICES=GPU-1234,0,0\0", "ID=opensuse-tumbleweed\nID_LIKE=\"opensuse suse\"\n",
        "MemTotal: 31037849 kB\n", "15892656128\n", "103079215104\n", "3880000\n", "", '["gfx1151"]'),  # fmt: skip
    box(STRIX, "", "HSA_OVERRIDE_GFX_VERSION=11.5\0", "ID=ubuntu\n", "MemTotal: x kB\n", "-1\n", "0x10\n", "", "linux-next\n", '{"gpu_targets": "gfx1151"}'),
]


def test_one_input(data: bytes) -> None:
    parts = data.split(SEPARATOR)
    parts += [b""] * (len(FILES) + 1 - len(parts))
    for relative, content in zip(FILES, parts):
        if WRITTEN.get(relative) != content:
            (ROOT / relative).write_bytes(content)
            WRITTEN[relative] = content
    ANSWER[0] = parts[len(FILES)].decode("utf-8", "replace")
    for finding in BOX.check_box(ROOT, ["gfx1151"]):
        assert finding.level in ("ok", "note", "WARN", "FAIL"), finding
        for text in (finding.found, finding.source, finding.fix):
            assert "\n" not in text and "\r" not in text, finding
    targets, why = BOX.set_targets(ROOT / "set")
    assert (targets is None) == bool(why) or (targets is None and why == ""), (targets, why)
    assert "\n" not in why, why


if __name__ == "__main__":
    from fuzz.harness import main

    main(sys.modules[__name__], sys.argv)
