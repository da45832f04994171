"""The install set's check of the box: the metadata the set writes is what check_box.py reads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rocm_build.install.box_check import CHECK_SCRIPT, SET_METADATA, set_metadata
from rocm_build.script_modules import script_bytes


def test_check_box_reads_the_gpu_targets_the_set_writes(tmp_path: Path) -> None:
    install = tmp_path / "dist" / "components.vllm.install"
    install.mkdir(parents=True)
    (install / CHECK_SCRIPT).write_bytes(script_bytes(CHECK_SCRIPT))
    (install / SET_METADATA).write_bytes(set_metadata("components/vllm:wheel", ("gfx1100", "gfx1151")))
    assert (install / SET_METADATA).read_text() == (
        '{\n  "target": "components/vllm:wheel",\n  "gpu_targets": [\n    "gfx1100",\n    "gfx1151"\n  ]\n}\n'
    )
    # A box with a gfx1151 (KFD node 1) and nothing else: the set's second target is found.
    node = tmp_path / "root/sys/class/kfd/kfd/topology/nodes/1"
    node.mkdir(parents=True)
    (node / "properties").write_text("gfx_target_version 110501\ndrm_render_minor 128\n")
    run = subprocess.run([sys.executable, CHECK_SCRIPT, "--root", str(tmp_path / "root")], cwd=install, capture_output=True, text=True)
    assert run.stdout.splitlines()[0] == "ok    gpu-target: node 1 gfx1151 (110501), a target of this set (gfx1100, gfx1151)"

