"""Quick check: every archive the recipe names (`archives`) is pinned and resolved."""

from __future__ import annotations

from typing import List

from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.checks.findings import QuickCheckRequest, EXPECTED_FAILURES, Findings, problem_text
from rocm_build.upstream import archives as upstream_archives
from rocm_build.upstream.archives import ArchiveRequest, ArchiveSpec, pin_problem


class ArchivePinsCheck(QuickCheckRequest):
    pass


@rule(desc="Checking a rocm_wheel's archives are resolved", level=LogLevel.DEBUG)
async def check_archive_pins(request: ArchivePinsCheck) -> Findings:
    spec = request.spec
    problems: List[str] = []
    for _, address in spec.archives:
        try:
            archive = await Get(ArchiveSpec, ArchiveRequest(address, f"the `archives` field of {spec.owner}"))
        except EXPECTED_FAILURES as e:
            problems.append(problem_text(e))
            continue
        problem = pin_problem(archive)
        if problem:
            problems.append(problem)
    return Findings(tuple(problems))


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        *upstream_archives.rules(),
    ])
