#!/usr/bin/env python3
"""docs/checks.md's table of the last triton_kernel_test runs, from their reports in dist/test/.

Usage: python3 bench/kernel_table.py [DIST]   (after `./pants test components/flash_attention:kernels
       components/vllm:kernels tests/kernels:lds`; prints one Markdown row per test and target)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def spills(kernel: dict) -> int:
    return (kernel.get("vgpr_spill_count") or 0) + (kernel.get("sgpr_spill_count") or 0)


def rows(dist: Path) -> list:
    lines = [
        "| test | target | kernels | specializations | failures | spilling (largest spill count) | max scratch a lane | compile time |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for report_path in sorted(dist.glob("test/*/report.json")):
        report = json.loads(report_path.read_text())
        test = report_path.parent.name.replace(".", "/", report_path.parent.name.count(".") - 1).replace(".", ":")
        for target, result in sorted(report["targets"].items()):
            kernels = result["kernels"]
            spilling = [k for k in kernels if spills(k)]
            failures = ", ".join(sorted({f["case"] for f in result["failures"]})) or "none"
            lines.append(
                f"| `{test}` | {target} | {len({k['name'] for k in kernels})} | {len(kernels)} | {failures} | "
                f"{len(spilling)} ({max((spills(k) for k in spilling), default=0)}) | "
                f"{max((k.get('scratch_bytes') or 0 for k in kernels), default=0)} B | {result.get('seconds', 0):.0f} s |"
            )
    return lines


if __name__ == "__main__":
    print("\n".join(rows(Path(sys.argv[1] if len(sys.argv) > 1 else "dist"))))
