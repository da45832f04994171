"""A triton_kernel_test's cases in several processes, and their reports merged into the one a
single process writes.

`triton_kernels.py --jobs N` runs N copies of itself (`--claims DIR`), each taking the workload's
next case (by its index in `cases()`) for a gpu target whenever it is done with one, and merges
their reports here. A process that drew long cases takes fewer, so they end together (a fixed
share of every Nth case left one process working alone for the last 20 s of flash-attention's
28). Pants gives the test its share of the machine's cores (`{pants_concurrency}`), so on a box
with idle cores a large upstream's compile is spread over them.

The merged report is the serial one. In one process a later case reuses the kernels an earlier
case compiled (Triton keeps them in memory), so the serial report lists each specialization once,
under the first case that compiled it; in another process the later case compiles it again. So:
kernels in case order, each specialization (Triton's hash) once, with its first case; `loaded`
when any process loaded its code object (the serial driver marks every record of a loaded code
object); each pruned autotune config and each failure once; a target's seconds the longest
process's. Cases must not rest on state an earlier case left: each may run in another process.

Standard library only.
"""

from __future__ import annotations

import fcntl
import json
import os
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional


def claimed_cases(count: int, claims: Optional[str], target: str) -> Iterator[int]:
    """The indices of the cases this process runs for `target`: all of them in order without
    `claims`; with it, the next unclaimed one each time, until none is left. The processes share
    a counter per target in the folder `claims`, read and raised under an exclusive lock."""
    if claims is None:
        yield from range(count)
        return
    counter = os.path.join(claims, f"{target}.next")
    while True:
        with open(counter, "a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)  # released when the file is closed
            f.seek(0)
            index = int(f.read() or 0)
            f.seek(0)
            f.truncate()
            f.write(str(index + 1))
        if index >= count:
            return
        yield index


def merge_reports(reports: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The report of all shards (each a report of triton_kernels.py over its cases), as one
    process over every case would have written it."""
    merged = {key: value for key, value in reports[0].items() if key != "targets"}
    merged["targets"] = {
        target: merge_target([report["targets"][target] for report in reports]) for target in reports[0]["targets"]
    }
    return merged


def merge_target(results: List[Dict[str, Any]]) -> Dict[str, Any]:
    cases = results[0]["cases"]  # every shard lists every case, in the workload's order
    order = {case: index for index, case in enumerate(cases)}

    def in_case_order(field: str) -> List[Dict[str, Any]]:
        # Stable: a case's records keep the order its process made them in. A failure of
        # `cases()` itself (no index) comes first, as in the serial run.
        records = [record for result in results for record in result[field]]
        return sorted(records, key=lambda record: order.get(record["case"], -1))

    loaded = {k["code_object_sha256"] for result in results for k in result["kernels"] if k["loaded"]}
    kernels = [dict(k, loaded=k["code_object_sha256"] in loaded) for k in once(in_case_order("kernels"), lambda k: k["triton_hash"])]
    seconds: Dict[str, float] = {}
    for result in results:
        seconds.update(result["case_seconds"])
    return {
        "limits": results[0]["limits"],
        "cases": cases,
        "case_seconds": {case: seconds[case] for case in cases if case in seconds},
        "kernels": kernels,
        "failures": once(in_case_order("failures"), canonical),
        "autotune_pruned": once(in_case_order("autotune_pruned"), pruned_key),
        "seconds": max(result["seconds"] for result in results),
    }


def once(records: Iterable[Dict[str, Any]], key: Callable[[Dict[str, Any]], Any]) -> List[Dict[str, Any]]:
    """The records in order, each key's first only."""
    seen, kept = set(), []
    for record in records:
        if key(record) not in seen:
            seen.add(key(record))
            kept.append(record)
    return kept


def canonical(record: Dict[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, default=str)


def pruned_key(record: Dict[str, Any]) -> str:
    """A pruned config is the same one whichever case's autotuning tried it."""
    return canonical({field: value for field, value in record.items() if field != "case"})
