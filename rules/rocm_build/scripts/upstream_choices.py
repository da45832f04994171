"""Record what an upstream's own code decides at run time on each gpu target, and judge it.

Usage:
    python upstream_choices.py --workload PATH/TO/choices_workload.py --target gfx1151 \
        [--target gfx942 ...] --expected expected.json --report report.json

A wheel can be complete and correct and still run several times slower than it should,
because of what the upstream decides once it sees the GPU: vLLM's attention backend, its MoE
config file, flash-attention's config family. Those decisions are plain Python that reads the
arch, so they can be read here, without a GPU: for each target the compile-only HIP driver of
triton_kernels.py (shipped beside this script) is made the active Triton driver, and the
workload's cases call the upstream's own selection code, which sees that arch.

The workload is a Python file defining `cases()`, called once per target after that target's
driver is active; it returns (name, callable) pairs, each callable returning the choice as a
short string, or a dict {"choice": str, "detail": ..., "kernels": [names]} (the Triton kernels the
choice runs, which a report shows beside their figures from the triton_kernel_test). An exception is recorded as the choice
`error: <type>: <message>`, so a decision that cannot be made is a choice too.

EXPECTED is {"owner", "workload", "under_test": [...], "expected_choices": {"<case>@<gpu target>": "<choice>"}}
(`under_test`: the upstream's tree or wheel the choices are of, its pin and patch digests; the
report and the output name it first);
keys may be fnmatch patterns (`attention_*@gfx1151`), the most specific (longest) matching
key wins, and an exact key beats every pattern. The test fails, naming the case, the expected
and the new choice, when a choice differs, when a case matches no key, and when a key matches
no case (the upstream dropped it: drop the key). Exit 0 on pass, 1 on fail, 2 when it could
not run.

The driver module is loaded under a private name and its directory taken off sys.path before
the workload is imported: a module named `triton_kernels` on sys.path shadows the package of
that name, which vLLM imports when it can (import_utils.has_triton_kernels).
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib.util
import json
import os
import sys
import time
import traceback
from typing import Any

def load_driver() -> Any:
    """scripts/triton_kernels.py (its ARCHS, driver_class, DriverSwap, Recorder, load_workload),
    beside this script, loaded under a name no upstream imports."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)  # for its imports of amdgpu_elf and kernel_shards
    try:
        spec = importlib.util.spec_from_file_location("_rocm_compile_only_driver", os.path.join(here, "triton_kernels.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    return module


def as_choice(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        out = {"choice": str(value["choice"]), "detail": value.get("detail")}
        if value.get("kernels"):  # the Triton kernels the choice runs, by name
            out["kernels"] = list(value["kernels"])
        return out
    return {"choice": str(value), "detail": None}


def run_cases(workload: Any, target: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    try:
        cases = list(workload.cases())
    except Exception as exc:
        traceback.print_exc()
        return {"cases()": {"choice": f"error: {type(exc).__name__}: {exc}", "detail": None}}
    for name, call in cases:
        try:
            out[name] = as_choice(call())
        except Exception as exc:
            if os.environ.get("UPSTREAM_CHOICES_TRACEBACK"):
                traceback.print_exc()
            message = " ".join(str(exc).split())[:300]
            out[name] = {"choice": f"error: {type(exc).__name__}: {message}", "detail": None}
    return out


# --------------------------------------------------------------------------------------------
# The verdict (standard library only: the plugin's tests call it directly).


def expected_for(key: str, expected: dict[str, str]) -> str | None:
    """The expected-choices key that states `key` (`case@target`): itself, else the longest
    pattern that matches it."""
    if key in expected:
        return key
    matching = [k for k in expected if fnmatch.fnmatchcase(key, k)]
    return max(matching, key=len) if matching else None


def verdict(choices: dict[str, dict[str, dict[str, Any]]], expected: dict[str, str]) -> list[str]:
    """Problems, one line each: every recorded choice against its expected key, and every
    key against the recorded choices."""
    problems: list[str] = []
    used: set[str] = set()
    for target, by_case in choices.items():
        for case, record in by_case.items():
            key = f"{case}@{target}"
            stated = expected_for(key, expected)
            if stated is None:
                problems.append(f"{key}: chose `{record['choice']}`, which no key of `expected_choices` states: "
                                f"add \"{key}\": \"{record['choice']}\"")
                continue
            used.add(stated)
            if record["choice"] != expected[stated]:
                via = "" if stated == key else f" (by \"{stated}\")"
                problems.append(f"{key}: the choice changed: expected `{expected[stated]}`{via}, now `{record['choice']}`")
    for key in expected:
        if key not in used:
            problems.append(f"\"{key}\" in `expected_choices` matches no case on any gpu target: drop it "
                            "(or the workload lost a case)")
    return problems


def table(choices: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    targets = list(choices)
    cases: list[str] = []
    for by_case in choices.values():
        cases += [c for c in by_case if c not in cases]
    width = max([len(c) for c in cases] + [4])
    lines = [f"  {'case':<{width}}  " + "  ".join(targets)]
    for case in cases:
        lines.append(f"  {case:<{width}}  " + "  |  ".join(choices[t].get(case, {}).get("choice", "-") for t in targets))
    return lines


def header(under_test: list[dict[str, Any]], triton_version: str) -> list[str]:
    """What the choices are of, first: the upstream's tree or wheel (pin, patch digests), then triton."""
    return [*(f"under test: {entry['line']}" for entry in under_test), f"triton {triton_version}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", required=True)
    parser.add_argument("--target", action="append", required=True)
    parser.add_argument("--expected", required=True)
    parser.add_argument("--report", required=True)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    with open(args.expected) as f:
        expected_file = json.load(f)
    driver = load_driver()
    unknown = [t for t in args.target if t not in driver.ARCHS]
    if unknown:
        print(f"unknown target(s) {', '.join(unknown)}; known: {', '.join(sorted(driver.ARCHS))}", file=sys.stderr)
        return 2
    import triton

    swap, recorder = driver.DriverSwap(), driver.Recorder()
    # The upstream may read the active driver at import: the first target's comes first.
    swap.install(driver.driver_class(args.target[0], driver.ARCHS[args.target[0]], recorder))
    try:
        workload = driver.load_workload(os.path.abspath(args.workload))
    except Exception:
        traceback.print_exc()
        print(f"could not import workload {args.workload}", file=sys.stderr)
        return 2
    # What the choices are of: the upstream's tree (pin, patch digests) the test's rule names.
    under_test = list(expected_file.get("under_test") or [])
    report: dict[str, Any] = {"owner": expected_file.get("owner"), "triton": triton.__version__, "targets": {}, "under_test": under_test}
    try:
        for target in args.target:
            swap.install(driver.driver_class(target, driver.ARCHS[target], recorder))
            started = time.monotonic()
            report["targets"][target] = {"choices": run_cases(workload, target),
                                         "seconds": round(time.monotonic() - started, 2)}
    finally:
        swap.restore()
    choices = {t: r["choices"] for t, r in report["targets"].items()}
    problems = verdict(choices, dict(expected_file.get("expected_choices") or {}))
    report["problems"] = problems
    with open(args.report, "w") as out:
        json.dump(report, out, indent=1, sort_keys=True, default=str)
        out.write("\n")
    print("\n".join([*header(under_test, triton.__version__), *table(choices)]))
    owner = expected_file.get("owner", "the test")
    if problems:
        print(f"\n{owner}: {len(problems)} choice(s) not as `expected_choices` states "
              f"(a pin move or a patch changed what the upstream decides; if the new choice is right, "
              f"update the key):")
        print("\n".join(f"  - {p}" for p in problems))
        return 1
    print(f"\n{owner}: all {sum(len(c) for c in choices.values())} choice(s) as expected.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
