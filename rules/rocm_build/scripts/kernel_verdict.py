"""The verdict of a triton_kernel_test, from triton_kernels.py's report and the target's fields.

Usage: kernel_verdict.py REPORT.json EXPECTED.json
  EXPECTED: {"owner", "workload", "expected_failures": {"<case>@<gpu target>": why}, "fail_on_spills"}

Prints, per gpu target, every kernel specialization with its arch (read from the code object),
VGPRs, spills, scratch and LDS, then every failure, then the verdict. Exits 1 when the test
fails: a failure not in `expected_failures`, a listed one that did not happen, a code object
for another arch than its target, a target that compiled nothing, or (with `fail_on_spills`)
a kernel that spills. Standard library only: the plugin's tests load it as it is.
"""

import json
import sys


def spills(kernel):
    return (kernel.get("vgpr_spill_count") or 0) + (kernel.get("sgpr_spill_count") or 0)


def short_key(key):
    """A specialization as people read it: the arguments that are not None (the report keeps all)."""
    return " ".join(part for part in (key or "-").split(" ") if not part.endswith("=None"))


def kernel_line(kernel):
    return (
        f"    {kernel['name']} [{short_key(kernel.get('key'))}] ({kernel['case']}): {kernel.get('arch')}, "
        f"{kernel.get('vgpr_count')} VGPRs, {spills(kernel)} spilled, {kernel.get('scratch_bytes') or 0} B scratch "
        f"a lane, {kernel.get('lds_bytes') or 0} B LDS"
    )


def failure_line(failure):
    sizes = ""
    if failure.get("required") is not None:
        sizes = f" (required {failure['required']}, limit {failure.get('limit')}, {failure.get('resource', 'resource')})"
    where = f"{failure.get('kernel') or 'no kernel named'} [{short_key(failure.get('key'))}]"
    message = " ".join(str(failure.get("message", "")).split())[:400]
    return f"{failure['case']}@{failure['target']}: {where}: {failure['type'].rsplit('.', 1)[-1]}{sizes}: {message}"


def verdict(report, expected):
    """(lines to print, problems): the test passes when there are no problems."""
    listed = dict(expected.get("expected_failures") or {})
    lines, problems, happened = [], [], set()
    for target, result in sorted(report["targets"].items()):
        kernels, failures = result["kernels"], result["failures"]
        spilling = [k for k in kernels if spills(k)]
        names = sorted({k["name"] for k in kernels})
        lines.append(
            f"{target}: {len(kernels)} specialization(s) of {len(names)} kernel(s), {len(failures)} failure(s), "
            f"{len(spilling)} spilling, in {result.get('seconds', 0):.1f} s"
        )
        lines += [kernel_line(k) for k in kernels]
        for k in kernels:
            if k.get("arch") != target:
                problems.append(f"{k['name']} [{k.get('key')}] was compiled for {target}, but its code object says {k.get('arch')}")
        if expected.get("fail_on_spills"):
            problems += [f"{k['name']} [{k.get('key')}] spills {spills(k)} register(s) on {target} (fail_on_spills)" for k in spilling]
        for failure in failures:
            key = f"{failure['case']}@{target}"
            happened.add(key)
            if key in listed:
                lines.append(f"  expected failure {failure_line(failure)} -- {listed[key]}")
            else:
                problems.append(f"{failure_line(failure)}")
        if not kernels and not failures:
            problems.append(f"nothing was compiled for {target}: the workload {expected.get('workload')} launches no Triton kernel")
    for key in sorted(set(listed) - happened):
        problems.append(
            f"{key} is listed in `expected_failures` ({listed[key]}) but did not fail: drop it from {expected.get('owner')}"
        )
    return lines, problems


def header(report):
    """What was compiled, first: the upstream under test (its wheel version, or pin and patch
    digests), then the venv's triton and torch."""
    return [*(f"under test: {entry['line']}" for entry in report.get("under_test") or []),
            f"triton {report.get('triton')}, torch {report.get('torch')}"]


def main():
    with open(sys.argv[1]) as f:
        report = json.load(f)
    with open(sys.argv[2]) as f:
        expected = json.load(f)
    lines, problems = verdict(report, expected)
    print("\n".join(header(report)))
    print("\n".join(lines))
    if problems:
        print(f"\n{expected.get('owner')}: {len(problems)} problem(s):")
        print("\n".join(f"  - {p}" for p in problems))
        sys.exit(1)
    print(f"\n{expected.get('owner')}: every kernel compiled for {', '.join(sorted(report['targets']))}")


if __name__ == "__main__":
    main()
