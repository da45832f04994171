"""checks/shared_patch_sets.py with real git: a patch set two sources apply is tried on the one
the report does not check in its own right, and its failure names that source and its pin."""

from __future__ import annotations

from pathlib import Path

import pytest
from pants.engine.addresses import Address
from pants.testutil.rule_runner import QueryRule, RuleRunner

from rocm_build.checks import shared_patch_sets
from rocm_build.checks.findings import Findings
from rocm_build.checks.shared_patch_sets import SharedPatchSetsRequest
from rocm_build.testutil.git_fixtures import ARCHS_PATCH, ARCHS_SETUP, commit_files, init_repo, pins_toml
from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner
from rocm_build.upstream.target_types import PatchSetTarget, UpstreamArchiveTarget, UpstreamRepoTarget

HEADER = "Why: a\nUpstream: none\nDrop when: c\n\n"
SDIST = Address("components/fa", target_name="sdist")
SRC = Address("components/fa", target_name="src")


@pytest.fixture
def rule_runner() -> RuleRunner:
    return isolated_rule_runner(
        rules=[*shared_patch_sets.rules(), QueryRule(Findings, [SharedPatchSetsRequest])],
        target_types=[UpstreamRepoTarget, UpstreamArchiveTarget, PatchSetTarget],
    )


def write_sources(rule_runner: RuleRunner, tmp_path: Path, git_setup: str) -> str:
    """Two sources of one component sharing patches/fa (as components/flash_attention's `:sdist`
    and `:src`), each its own pin; a third source with a patch set of its own. Returns the git
    pin's commit."""
    sdist = init_repo(tmp_path / "sdist")
    sdist_commit = commit_files(sdist, {"setup.py": ARCHS_SETUP})
    repo = init_repo(tmp_path / "repo")
    commit = commit_files(repo, {"setup.py": git_setup})
    rule_runner.write_files(
        {
            "components/pins/all.toml": pins_toml(
                fa_sdist={"url": f"file://{sdist}", "track": "main", "commit": sdist_commit},
                fa={"url": f"file://{repo}", "track": "main", "commit": commit},
                other={"url": f"file://{repo}", "track": "main", "commit": commit},
            ),
            "components/fa/BUILD": (
                "upstream_repo(name='sdist', pin='fa_sdist', patches=['patches/fa:gfx1151'])\n"
                "upstream_repo(name='src', pin='fa', patches=['patches/fa:gfx1151'])\n"
                "upstream_repo(name='other', pin='other', patches=['patches/other:gfx1151'])\n"
            ),
            "patches/fa/BUILD": "patch_set(name='gfx1151')",
            "patches/fa/0001-archs.patch": HEADER + ARCHS_PATCH,
            "patches/other/BUILD": "patch_set(name='gfx1151')",
        }
    )
    return commit


def findings(rule_runner: RuleRunner, source: Address, *checked: Address) -> Findings:
    return rule_runner.request(Findings, [SharedPatchSetsRequest(source, (source, *checked))])


def test_a_patch_set_that_does_not_apply_to_the_other_source_names_it_and_its_pin(rule_runner, tmp_path) -> None:
    # The git pin's setup.py is not the sdist's: the patch made on the sdist does not apply there.
    commit = write_sources(rule_runner, tmp_path, "ARCHS = ['gfx942']\n")
    found = findings(rule_runner, SDIST)
    (problem,) = found.problems
    said, _, git_said = problem.partition("\ngit apply said:\n")
    assert said == (
        f"patches/fa:gfx1151, which components/fa:sdist applies, is applied by components/fa:src (fa @ "
        f"{commit[:12]}) too, and applying it there failed:\n"
        "components/fa:src: patches/fa/0001-archs.patch: the hunk at setup.py line 1 does not match the pinned source. "
        "No patch before it changes setup.py: the pinned file changed there (or this patch did); refresh the patch "
        "against the pinned commit (or use an anchored edit, *.edit.toml).\n"
        "Fix it in a patch workspace: `./pants patch-workspace components/fa:src` checks out the pinned tree with the "
        "patches before it as git commits; redo the patch there, commit it with its header, then `./pants "
        "patch-workspace --save components/fa:src` (and remove the old file)."
    )
    assert "error: patch failed: setup.py:1" in git_said
    assert found.summary == ""
    # Either way round; and not at all when the report checks the other source on its own line.
    assert findings(rule_runner, SRC) == Findings(summary=", its patch sets tried on components/fa:sdist too")
    assert findings(rule_runner, SDIST, SRC) == Findings()


def test_a_patch_set_that_applies_to_every_source_says_where_it_was_tried(rule_runner, tmp_path) -> None:
    write_sources(rule_runner, tmp_path, ARCHS_SETUP)
    assert findings(rule_runner, SDIST) == Findings(summary=", its patch sets tried on components/fa:src too")
    # A source sharing no patch set is tried on nothing.
    assert findings(rule_runner, Address("components/fa", target_name="other")) == Findings()
