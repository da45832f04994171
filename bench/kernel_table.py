#!/usr/bin/env python3
"""docs/checks.md's tables of the last triton_kernel_test and upstream_choices_test runs, from
their reports in dist/test/.

Usage: python3 bench/kernel_table.py [DIST]   (after `./pants test components/flash_attention:kernels
       components/vllm:kernels tests/kernels:lds`; prints one Markdown row per test and target)
       python3 bench/kernel_table.py --choices [DIST]   (after `./pants test components/vllm:choices
       components/flash_attention:choices`; one row per test and case, one column per gpu target)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def spills(kernel: dict) -> int:
    return (kernel.get("vgpr_spill_count") or 0) + (kernel.get("sgpr_spill_count") or 0)


def test_name(report_path: Path) -> str:
    return report_path.parent.name.replace(".", "/", report_path.parent.name.count(".") - 1).replace(".", ":")


def choice_rows(dist: Path) -> list:
    lines = []
    for report_path in sorted(dist.glob("test/*/choices.json")):
        report = json.loads(report_path.read_text())
        targets = sorted(report["targets"])
        if not lines or lines[0] != f"| test | case | {' | '.join(targets)} |":
            lines += [f"| test | case | {' | '.join(targets)} |", "| --- | --- |" + " --- |" * len(targets)]
        cases = list(report["targets"][targets[0]]["choices"])
        for case in cases:
            row = [report["targets"][t]["choices"].get(case, {}).get("choice", "-") for t in targets]
            lines.append(f"| `{test_name(report_path)}` | {case} | " + " | ".join(f"`{c}`" for c in row) + " |")
    return lines


def rows(dist: Path) -> list:
    lines = [
        "| test | target | kernels | specializations | failures | spilling (largest spill count) | max scratch a lane | compile time |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for report_path in sorted(dist.glob("test/*/report.json")):
        report = json.loads(report_path.read_text())
        test = test_name(report_path)
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
    args = sys.argv[1:]
    table = choice_rows if args[:1] == ["--choices"] else rows
    args = args[1:] if table is choice_rows else args
    print("\n".join(table(Path(args[0] if args else "dist"))))
