"""The kinds of source, from their fields alone: what each is, and the error for a target that
is no source where it was named."""

from __future__ import annotations

import pytest
from pants.core.target_types import GenericTarget
from pants.engine.addresses import Address
from pants.engine.internals.scheduler import ExecutionError
from pants.engine.rules import QueryRule
from pants.testutil.rule_runner import RuleRunner

from rocm_build.prebuilt.target_generator import PrebuiltWheelsTarget
from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner
from rocm_build.toolchain.target_types import RocmToolchainTarget
from rocm_build.upstream import sources
from rocm_build.upstream.sources import SourceDescription, SourceRequest
from rocm_build.upstream.target_types import PatchSetTarget, PrebuiltWheelTarget, UpstreamArchiveTarget, UpstreamRepoTarget
from rocm_build.wheel import source_kind
from rocm_build.wheel.target_types import RocmWheelTarget


@pytest.fixture
def rule_runner() -> RuleRunner:
    runner = isolated_rule_runner(
        rules=[*sources.rules(), *source_kind.rules(), QueryRule(SourceDescription, [SourceRequest])],
        target_types=[
            UpstreamRepoTarget, UpstreamArchiveTarget, PrebuiltWheelTarget, PrebuiltWheelsTarget, RocmWheelTarget,
            RocmToolchainTarget, PatchSetTarget, GenericTarget,
        ],
    )
    runner.write_files(
        {
            "up/BUILD": """
upstream_repo(name="repo", pin="vllm")
upstream_archive(name="pinned", pin="vllm-sdist")
upstream_archive(name="inline", url="https://example.invalid/x.tar.gz", sha256="0" * 64)
prebuilt_wheel(name="torch", pin="therock-torch")
rocm_wheel(name="wheel", source=":repo", toolchain=":llvm")
rocm_toolchain(name="llvm", provider="llvm", path="/usr/lib/llvm-19")
target(name="group")
"""
        }
    )
    return runner


def describe(rule_runner: RuleRunner, name: str) -> SourceDescription:
    return rule_runner.request(SourceDescription, [SourceRequest(Address("up", target_name=name), "the `source` field of up:t")])


def test_each_kind_says_what_it_is_and_which_pin_names_its_locks(rule_runner: RuleRunner) -> None:
    repo = describe(rule_runner, "repo")
    assert (repo.alias, repo.tree, repo.pin, repo.pins_file, repo.pin_table) == ("upstream_repo", True, "vllm", "components/pins", "vllm")
    pinned = describe(rule_runner, "pinned")
    assert (pinned.tree, pinned.pin, pinned.pins_file, pinned.pin_table) == (True, "vllm-sdist", "components/archives", "vllm-sdist")
    # url and sha256 in BUILD: the locks are named by the target, and no pins file is read.
    inline = describe(rule_runner, "inline")
    assert (inline.tree, inline.pin, inline.pins_file) == (True, "inline", "")
    torch = describe(rule_runner, "torch")
    assert (torch.alias, torch.tree, torch.pin_table) == ("prebuilt_wheel", False, "prebuilt.therock-torch")
    wheel = describe(rule_runner, "wheel")
    assert (wheel.alias, wheel.tree, wheel.pin) == ("rocm_wheel", False, "")


def test_a_target_that_is_no_source_is_refused_naming_the_kinds(rule_runner: RuleRunner) -> None:
    with pytest.raises(ExecutionError) as e:
        describe(rule_runner, "llvm")
    assert (
        "the `source` field of up:t names up:llvm, a `rocm_toolchain`; it must be an `upstream_repo` or an "
        "`upstream_archive` or a `prebuilt_wheel` or a `rocm_wheel` target"
    ) in str(e.value)
