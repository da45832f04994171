"""`pants check` runs the preflight of `rocm-plan --check`: the same report, the same verdict.

One of the two test modules on the whole plugin (with plan_test.py): it runs `check` and `rocm-plan`
as a user does, so what it proves includes register.py's wiring, not only the goals' own rules."""

from __future__ import annotations

import pytest
from pants.core.goals import check
from pants.core.util_rules import distdir, environments
from pants.core.goals.check import Check, CheckResults
from pants.engine.addresses import Address
from pants.engine.rules import QueryRule
from pants.engine.target import WrappedTarget, WrappedTargetRequest
from pants.testutil.rule_runner import RuleRunner

from rocm_build.goals.check import RocmPreflightFieldSet, RocmPreflightRequest
from rocm_build.goals.plan import RocmPlan
from rocm_build.testutil.git_fixtures import pins_toml
from rocm_build.testutil.plugin_rules import whole_plugin_rule_runner


@pytest.fixture
def rule_runner() -> RuleRunner:
    runner = whole_plugin_rule_runner(
        *check.rules(), *distdir.rules(), *environments.rules(), QueryRule(CheckResults, [RocmPreflightRequest])
    )
    runner.write_files(
        {
            # An upstream no fetch reaches and a toolchain that is not there: problems both goals report.
            "components/pins/all.toml": pins_toml(a={"url": "file:///nowhere/a", "track": "main", "commit": "a" * 40}),
            "components/BUILD": "rocm_toolchain(name='llvm', provider='llvm', path='/nowhere')\n"
            "upstream_repo(name='a-src', pin='a')\n"
            "rocm_wheel(name='a', source=':a-src', toolchain=':llvm')\n",
        }
    )
    return runner


def test_check_reports_what_rocm_plan_check_prints_and_fails_the_same(rule_runner: RuleRunner) -> None:
    plan = rule_runner.run_goal_rule(RocmPlan, args=["--check", "components:a"])
    assert plan.exit_code == 1
    lines = plan.stdout.splitlines()
    assert lines[0] == "FAIL  components:a" and lines[-1].endswith(" problem(s): fix them before building.")
    assert any("/nowhere" in line and "components:a" in line for line in lines[1:-1]), plan.stdout  # the toolchain
    assert any("file:///nowhere/a" in line for line in lines[1:-1]), plan.stdout  # the fetch

    target = rule_runner.request(WrappedTarget, [WrappedTargetRequest(Address("components", target_name="a"), "test")]).target
    (result,) = rule_runner.request(CheckResults, [RocmPreflightRequest([RocmPreflightFieldSet.create(target)])]).results
    assert (result.exit_code, result.stdout) == (1, plan.stdout.rstrip("\n"))
    assert result.partition_description == "components:a"

    goal = rule_runner.run_goal_rule(Check, args=["components:a"])
    assert goal.exit_code == 1
    assert "rocm-preflight failed." in goal.stderr


def test_only_rocm_wheels_are_checked(rule_runner: RuleRunner) -> None:
    def target(name: str):
        return rule_runner.request(WrappedTarget, [WrappedTargetRequest(Address("components", target_name=name), "test")]).target

    assert RocmPreflightFieldSet.is_applicable(target("a"))
    assert not RocmPreflightFieldSet.is_applicable(target("a-src"))
    assert not RocmPreflightFieldSet.is_applicable(target("llvm"))
    # Nothing to check: the goal passes without running the preflight.
    assert rule_runner.run_goal_rule(Check, args=["components:a-src"]).exit_code == 0


def test_one_report_names_every_target_that_cannot_be_built_and_why(rule_runner: RuleRunner) -> None:
    # The CI recipe's first goal (docs/pins-and-patches.md): two targets that cannot be built for
    # different reasons, as components/vllm:wheel-on-therock (TheRock's pins not resolved) beside
    # another; both named in the one report, before any build.
    rule_runner.write_files(
        {
            "components/pins/therock.toml": (
                '[prebuilt.t-torch]\nproject = "torch"\ntrack = "==2.13.0"\nindex_url = "https://index.invalid/simple/"\npython = "3.12"\n'
                'version = ""\nfile = ""\nsha256 = ""\n'
            ),
            "components/BUILD": "rocm_toolchain(name='llvm', provider='llvm', path='/nowhere')\n"
            "upstream_repo(name='a-src', pin='a')\n"
            "rocm_wheel(name='a', source=':a-src', toolchain=':llvm')\n"
            "prebuilt_wheel(name='t-torch', pin='t-torch')\n"
            "rocm_wheel(name='b', source=':a-src', toolchain=':llvm', dependencies=[':t-torch'])\n",
        }
    )
    targets = [
        rule_runner.request(WrappedTarget, [WrappedTargetRequest(Address("components", target_name=n), "test")]).target
        for n in ("a", "b")
    ]
    (result,) = rule_runner.request(CheckResults, [RocmPreflightRequest([RocmPreflightFieldSet.create(t) for t in targets])]).results
    assert result.exit_code == 1
    report = result.stdout
    assert "FAIL  components:a\n" in report and "FAIL  components:b\n" in report, report
    assert (
        "prebuilt_wheel components:t-torch: pin `t-torch` ([prebuilt.t-torch] in components/pins) is not "
        "resolved: it has no version, file and sha256 yet. Run `pants run rules:update-pins -- --only t-torch`"
    ) in report, report
