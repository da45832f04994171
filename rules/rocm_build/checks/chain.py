"""The checks of a rocm_wheel chain (in build order: chain_order.py) that need no compile, run
before any build.

A torch build takes hours: whatever can be known without compiling (preflight.py: a gpu
target upstream does not build, a missing toolchain, an archive nobody resolved, a file the
recipe names that the pinned tree lacks, a lock that no longer matches its tree, pip's
cmake) stops `package` before the first build of the chain, with every problem found.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Tuple

from pants.engine.addresses import Address
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.errors import RocmBuildError
from rocm_build.wheel.chain_order import WheelChain, WheelChainRequest
from rocm_build.checks.findings import ComponentStatus
from rocm_build.checks.preflight import QuickCheck, TreeCheck
from rocm_build.checks import preflight
from rocm_build.wheel import chain_order

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChainRequest:
    root: Address


@dataclass(frozen=True)
class CheckedChain:
    """The chain passed its checks. It names the chain and nothing else, so that an edit the
    checks pass (a patch) leaves it equal: what waits on it (each build of the chain) is not
    restarted by Pants when the checks run again (build/build.py, ChainWheelRequest)."""

    root: Address
    addresses: Tuple[Address, ...]  # in build order, the root last


def raise_problems(root: Address, statuses: Tuple[ComponentStatus, ...]) -> None:
    problems = list(dict.fromkeys(p for status in statuses for p in status.problems))
    if problems:
        raise RocmBuildError(
            f"{root.spec}: {len(problems)} problem(s) found before any build "
            f"(`pants rocm-plan --check {root.spec}` lists them too):\n"
            + "\n".join(f"- {p}" for p in problems)
        )


@rule(desc="Checking a rocm_wheel chain before any work")
async def check_chain(request: ChainRequest) -> CheckedChain:
    chain = (await Get(WheelChain, WheelChainRequest(request.root))).specs
    # What needs no fetch first: a machine without ROCm stops here, naming the toolchain.
    quick = await MultiGet(Get(ComponentStatus, QuickCheck(s.address)) for s in chain)
    raise_problems(request.root, quick)
    for status in quick:
        if status.skipped:
            logger.warning(status.skipped)
    # Then every pinned tree, fetched and patched: files the recipes name, locks, cmake.
    trees = await MultiGet(Get(ComponentStatus, TreeCheck(s.address)) for s in chain)
    raise_problems(request.root, trees)
    # Notes (which cmake builds use, ...) are the same each run: `pants check` and
    # `rocm-plan --check` show them; here only under -ldebug.
    for status in trees:
        for note in status.notes:
            logger.debug(f"{status.owner}: {note}")
    return CheckedChain(request.root, tuple(s.address for s in chain))


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *preflight.rules(), *chain_order.rules()])
