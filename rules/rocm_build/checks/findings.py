"""The preflight's vocabulary: what a check is asked (a union member per check, QuickCheckRequest
or TreeCheckRequest), what it finds, and what a component's checks add up to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from pants.build_graph.address import ResolveError
from pants.engine.engine_aware import EngineAwareReturnType
from pants.engine.environment import EnvironmentName
from pants.engine.process import ProcessExecutionFailure
from pants.engine.target import InvalidFieldException
from pants.engine.unions import union

from rocm_build.errors import RocmBuildError
from rocm_build.upstream.upstream_repo import ResolvedUpstream
from rocm_build.wheel.build_spec import WheelBuildSpec

# What a check turns into a problem: the failures our rules and Pants raise for a person (a
# sentence naming the target and the fix). Anything else is a bug of ours, and surfaces as one.
EXPECTED_FAILURES = (RocmBuildError, ResolveError, InvalidFieldException, ProcessExecutionFailure)


def problem_text(e: Exception) -> str:
    """A failed Get's message: our rules raise RocmBuildError with a complete sentence."""
    return str(e).strip()


@dataclass(frozen=True)
class Findings(EngineAwareReturnType):
    """What one check found. Each problem is a sentence naming the target, what is wrong and
    how to fix it; a note is worth knowing, not wrong."""

    problems: Tuple[str, ...] = ()
    notes: Tuple[str, ...] = ()
    summary: str = ""  # added to the component's `ok` line
    stop: bool = False  # the checks after it have nothing to stand on: they do not run

    @classmethod
    def failed(cls, e: Exception, stop: bool = False) -> "Findings":
        return cls((problem_text(e),), stop=stop)

    def cacheable(self) -> bool:
        return False  # as ComponentStatus, below: made from failures it caught


@dataclass(frozen=True)
class ComponentStatus(EngineAwareReturnType):
    owner: str
    problems: Tuple[str, ...] = ()
    notes: Tuple[str, ...] = ()  # worth knowing, not wrong (e.g. which cmake builds use)
    skipped: Optional[str] = None  # an optional component that will not be built, and why
    summary: str = ""  # what was checked, for the `ok` line

    def cacheable(self) -> bool:
        # The checks catch the failures of the rules they ask (to report every problem, not
        # the first). Pants keeps no dependencies of a failed rule, so a status made from a
        # caught failure would not be invalidated when the file that caused it is fixed: it is
        # made again in each run instead (what the checks ask for is memoized as usual).
        return False


@dataclass(frozen=True)
class TreeUnderCheck:
    """What a tree check gets besides the spec: the fetched, patched tree, and where it is from
    (`<pin> at <commit>`, for messages)."""

    upstream: ResolvedUpstream
    where: str


# The checks are members of these unions, each with its rule (Findings); preflight.py registers
# them in one list and runs them in its order. Their rules ask for targets and processes, which
# needs the environment in scope.
@union(in_scope_types=[EnvironmentName])
@dataclass(frozen=True)
class QuickCheckRequest:
    """A check that needs no tree: BUILD files, pins, the toolchain, the interpreter."""

    spec: WheelBuildSpec


@union(in_scope_types=[EnvironmentName])
@dataclass(frozen=True)
class TreeCheckRequest:
    """A check of the fetched, patched tree."""

    spec: WheelBuildSpec
    tree: TreeUnderCheck
