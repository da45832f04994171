"""A patch set that several sources apply, tried on each of them.

`patches/flash_attention/` is applied by `components/flash_attention:sdist` (the PyPI sdist
`:wheel-from-sdist` builds) and by `:src` (the git pin of `:wheel`). A patch made and saved in the
sdist's workspace changes what the git pin gets too, and nothing built from the sdist would try
it there. So `pants check` (and `rocm-plan --check`) of a component fetches and patches every
other source that applies one of its source's patch sets, and names the source, its pin and the
failure. It is the report's, not `package`'s (chain.py): a build of one source does not read the
other's tree, and must not wait for its fetch.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import DefaultDict, Dict, List, Tuple

from pants.engine.addresses import Address, Addresses, UnparsedAddressInputs
from pants.engine.engine_aware import EngineAwareReturnType
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import AllTargets
from pants.util.frozendict import FrozenDict
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.checks.findings import EXPECTED_FAILURES, Findings, problem_text
from rocm_build.upstream.target_types import PatchSetsField
from rocm_build.upstream.upstream_repo import ResolvedUpstream, UpstreamRequest, UpstreamSpec
from rocm_build.upstream import upstream_repo

ORIGIN = "pants check (a patch set shared with another source)"


@dataclass(frozen=True)
class PatchSetUsers:
    """Each patch_set of the repository -> the sources whose `patches` list it, sorted."""

    users: FrozenDict[Address, Tuple[Address, ...]]


@rule(desc="Listing the sources that apply each patch set", level=LogLevel.DEBUG)
async def patch_set_users(targets: AllTargets) -> PatchSetUsers:
    sources = [t for t in targets if t.has_field(PatchSetsField)]
    listed = await MultiGet(
        Get(
            Addresses,
            UnparsedAddressInputs(t[PatchSetsField].value or (), owning_address=t.address,
                                  description_of_origin=f"the `patches` field of {t.address.spec}"),
        )  # fmt: skip
        for t in sources
    )
    users: DefaultDict[Address, List[Address]] = defaultdict(list)
    for target, sets in zip(sources, listed):
        for patch_set in sets:
            users[patch_set].append(target.address)
    return PatchSetUsers(FrozenDict({s: tuple(sorted(a)) for s, a in users.items()}))


@dataclass(frozen=True)
class SourceTrialRequest:
    address: Address


@dataclass(frozen=True)
class SourceTrial(EngineAwareReturnType):
    pinned: str  # "flash_attention @ 0e60e39473e8", an archive's URL and sha256
    problem: str = ""  # why it could not be fetched and patched, as its own build would say

    def cacheable(self) -> bool:
        return False  # made from a failure it caught (findings.py, ComponentStatus)


@rule(desc="Fetching and patching a source that shares a patch set")
async def try_source(request: SourceTrialRequest) -> SourceTrial:
    try:
        spec = await Get(UpstreamSpec, UpstreamRequest(request.address, ORIGIN))
    except EXPECTED_FAILURES as e:
        return SourceTrial("its pin could not be read", problem_text(e))
    pinned = spec.pinned
    try:
        await Get(ResolvedUpstream, UpstreamRequest(request.address, ORIGIN))
    except EXPECTED_FAILURES as e:
        return SourceTrial(pinned, problem_text(e))
    return SourceTrial(pinned)


@dataclass(frozen=True)
class SharedPatchSetsRequest:
    source: Address  # a component's source
    # The sources checked in their own right in the same report: their own lines say how they fare.
    checked: Tuple[Address, ...] = ()


def shared_with_others(users: PatchSetUsers, request: SharedPatchSetsRequest) -> Dict[Address, Tuple[Address, ...]]:
    """Each other source (not checked in its own right) -> the patch sets it shares with `source`."""
    others: Dict[Address, List[Address]] = {}
    for patch_set, sources in sorted(users.users.items()):
        if request.source not in sources:
            continue
        for other in sources:
            if other != request.source and other not in request.checked:
                others.setdefault(other, []).append(patch_set)
    return {o: tuple(sets) for o, sets in sorted(others.items())}


@rule(desc="Trying a source's patch sets on the other sources that apply them")
async def check_shared_patch_sets(request: SharedPatchSetsRequest, users: PatchSetUsers) -> Findings:
    others = shared_with_others(users, request)
    trials = await MultiGet(Get(SourceTrial, SourceTrialRequest(o)) for o in others)
    problems = []
    for (other, sets), trial in zip(others.items(), trials):
        if trial.problem:
            named = ", ".join(s.spec for s in sets)
            it = "it" if len(sets) == 1 else "them"
            problems.append(
                f"{named}, which {request.source.spec} applies, {'is' if len(sets) == 1 else 'are'} applied by "
                f"{other.spec} ({trial.pinned}) too, and applying {it} there failed:\n{trial.problem}"
            )
    summary = f", its patch sets tried on {', '.join(o.spec for o in others)} too" if others and not problems else ""
    return Findings(tuple(problems), summary=summary)


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *upstream_repo.rules()])
