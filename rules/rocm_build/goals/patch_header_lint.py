"""`pants lint` of patch_set targets: every patch says why we carry it, where upstream stands
and when to drop it (`Why:`, `Upstream:`, `Drop when:`; upstream/patch_headers.py).

A member of Pants' own `lint` union (a `LintTargetsRequest`), so `pants lint ::` and
`pants lint --changed-since=...` check patch sets beside the code, and `--only=patch-headers`
or `[patch-headers].skip` select it as any linter. It runs no process: the check reads the files'
text, which the engine already holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, List, Tuple

from pants.core.goals.lint import LintResult, LintTargetsRequest
from pants.core.util_rules.partitions import PartitionerType
from pants.engine.fs import Digest, DigestContents, MergeDigests
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import FieldSet, HydratedSources, HydrateSourcesRequest
from pants.option.option_types import SkipOption
from pants.option.subsystem import Subsystem
from pants.util.logging import LogLevel

from rocm_build.upstream.patch_headers import header_problem, is_patch_file
from rocm_build.upstream.target_types import PatchSourcesField


# The linter's name (`--only=patch-headers`, `[patch-headers]`); a constant, so that
# programs/docs_check.py, which reads a goal from `name = "..."` in goals/, does not take it for one.
LINTER = "patch-headers"


class PatchHeadersSubsystem(Subsystem):
    options_scope = LINTER
    name = LINTER
    help = "Checks that every patch of a patch_set has a `Why:`, `Upstream:` and `Drop when:` header (`pants lint`)."

    skip = SkipOption("lint")


@dataclass(frozen=True)
class PatchSetFieldSet(FieldSet):
    required_fields = (PatchSourcesField,)

    sources: PatchSourcesField


class PatchHeadersRequest(LintTargetsRequest):
    field_set_type = PatchSetFieldSet
    tool_subsystem = PatchHeadersSubsystem
    # One partition: the check is cheap and runs in this process.
    partitioner_type = PartitionerType.DEFAULT_SINGLE_PARTITION


def header_problems(files: Iterable[Tuple[str, bytes]]) -> List[str]:
    """One line per patch file whose header lacks a key, in path order."""
    problems = []
    for path, content in sorted(files):
        if not is_patch_file(path):
            continue
        problem = header_problem(path, content.decode("utf-8", errors="replace"))
        if problem:
            problems.append(problem)
    return problems


@rule(desc="Checking the headers of patch sets", level=LogLevel.DEBUG)
async def lint_patch_headers(request: PatchHeadersRequest.Batch) -> LintResult:
    hydrated = await MultiGet(
        Get(HydratedSources, HydrateSourcesRequest(field_set.sources)) for field_set in request.elements
    )
    contents = await Get(DigestContents, Digest, await Get(Digest, MergeDigests(h.snapshot.digest for h in hydrated)))
    problems = header_problems((fc.path, fc.content) for fc in contents)
    checked = sum(1 for fc in contents if is_patch_file(fc.path))
    summary = f"{len(problems)} of {checked} patch file(s) lack a header key" if problems else f"{checked} patch file(s) have their header"
    return LintResult(
        exit_code=1 if problems else 0,
        stdout="\n".join([*problems, summary]) + "\n",
        stderr="",
        linter_name=PatchHeadersRequest.tool_name,
        partition_description=request.partition_metadata.description,
    )


def rules():
    return [*collect_rules(), *PatchHeadersRequest.rules()]
