from __future__ import annotations

from typing import Tuple

import pytest
from pants.core.goals.lint import LintResult, Partitions
from pants.engine.addresses import Address
from pants.engine.rules import QueryRule
from pants.testutil.rule_runner import RuleRunner

from rocm_build.goals import patch_header_lint
from rocm_build.goals.patch_header_lint import PatchHeadersRequest, PatchSetFieldSet
from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner
from rocm_build.upstream.target_types import PatchSetTarget

DIFF = "--- a/f.py\n+++ b/f.py\n@@ -1 +1 @@\n-a\n+b\n"
GOOD = "Why: f.py says a.\nUpstream: none (ours).\nDrop when: never.\n\n" + DIFF


@pytest.fixture
def rule_runner() -> RuleRunner:
    # The lint member's own rules, and Pants' lint types it answers: no plugin-wide registry.
    return isolated_rule_runner(
        rules=[
            *patch_header_lint.rules(),
            QueryRule(Partitions, [PatchHeadersRequest.PartitionRequest]),
            QueryRule(LintResult, [PatchHeadersRequest.Batch]),
        ],
        target_types=[PatchSetTarget],
    )


def lint(rule_runner: RuleRunner, *addresses: Address, args: Tuple[str, ...] = ()) -> Tuple[LintResult, ...]:
    rule_runner.set_options(list(args))
    field_sets = tuple(PatchSetFieldSet.create(rule_runner.get_target(a)) for a in addresses)
    partitions = rule_runner.request(Partitions, [PatchHeadersRequest.PartitionRequest(field_sets)])
    return tuple(
        rule_runner.request(LintResult, [PatchHeadersRequest.Batch(PatchHeadersRequest.tool_name, p.elements, p.metadata)]) for p in partitions
    )


def test_patch_sets_with_headers_pass(rule_runner: RuleRunner) -> None:
    rule_runner.write_files({
        "p/BUILD": 'patch_set(name="set")',
        "p/0001-a.patch": GOOD,
        "p/0002-b.edit.toml": "# Why: x\n# Upstream: none\n# Drop when: y\n[[edit]]\npath = 'f.py'\npattern = 'a'\nreplace = 'b'\n",
    })  # fmt: skip
    (result,) = lint(rule_runner, Address("p", target_name="set"))
    assert result.exit_code == 0, result.stdout
    assert result.linter_name == "patch-headers"
    assert "2 patch file(s) have their header" in result.stdout


def test_a_patch_without_a_key_fails_naming_the_file_and_the_key(rule_runner: RuleRunner) -> None:
    rule_runner.write_files({
        "p/BUILD": 'patch_set(name="set")',
        "p/0001-a.patch": GOOD,
        "p/0002-b.patch": "Make f.py say b.\n\n" + DIFF,
        "q/BUILD": 'patch_set(name="set")',
        "q/0001-c.edit.toml": "# Why: x\n# Drop when: y\n[[edit]]\npath = 'f.py'\npattern = 'a'\nreplace = 'b'\n",
    })  # fmt: skip
    (result,) = lint(rule_runner, Address("p", target_name="set"), Address("q", target_name="set"))
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith("p/0002-b.patch: its header has no `Why:`, `Upstream:`, `Drop when:`."), lines
    assert lines[1].startswith("q/0001-c.edit.toml: its header has no `Upstream:`."), lines
    assert lines[2] == "2 of 3 patch file(s) lack a header key"


def test_skip(rule_runner: RuleRunner) -> None:
    rule_runner.write_files({"p/BUILD": 'patch_set(name="set")', "p/0001-a.patch": DIFF})
    assert lint(rule_runner, Address("p", target_name="set"), args=("--patch-headers-skip",)) == ()
