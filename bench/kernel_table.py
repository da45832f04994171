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


def kernel_figures(kernels_report: dict, target: str, names: list) -> str:
    """The largest spill count and scratch of each named kernel on `target`, from the component's
    triton_kernel_test report: the choice beside its kernels' figures."""
    found = kernels_report.get("targets", {}).get(target, {}).get("kernels", [])
    parts = []
    for name in names:
        mine = [k for k in found if k["name"] == name]
        if mine:
            parts.append(f"{name} {max(spills(k) for k in mine)} spilled, {max(k.get('scratch_bytes') or 0 for k in mine)} B")
    return "; ".join(parts)


def choice_rows(dist: Path) -> list:
    lines = []
    for report_path in sorted(dist.glob("test/*/choices.json")):
        report = json.loads(report_path.read_text())
        targets = sorted(report["targets"])
        # The component's kernel test beside it (components/vllm:kernels for components/vllm:choices).
        kernels_path = report_path.parent.with_name(report_path.parent.name.rsplit(".", 1)[0] + ".kernels") / "report.json"
        kernels_report = json.loads(kernels_path.read_text()) if kernels_path.exists() else {}
        header = f"| test | case | {' | '.join(targets)} | kernels of the {targets[0]} choice (spills, scratch a lane) |"
        if not lines or lines[0] != header:
            lines += [header, "| --- | --- |" + " --- |" * (len(targets) + 1)]
        for case in report["targets"][targets[0]]["choices"]:
            records = [report["targets"][t]["choices"].get(case, {}) for t in targets]
            figures = kernel_figures(kernels_report, targets[0], records[0].get("kernels", []))
            lines.append(f"| `{test_name(report_path)}` | {case} | " + " | ".join(f"`{r.get('choice', '-')}`" for r in records)
                         + f" | {figures} |")
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
