"""The whole plugin in a RuleRunner, as Pants loads it from register.py: for the few tests that
run a goal as a user does (goals/check_test.py, goals/plan_test.py), where what is under test
includes register.py's wiring (every module listed, every union member registered). Every
other test builds its RuleRunner from its own module's `rules()` (rules_test.py proves each
module's list is complete on its own)."""

from __future__ import annotations

from typing import Any

from pants.testutil.rule_runner import RuleRunner

from rocm_build import register
from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner


def whole_plugin_rule_runner(*rules: Any, **options: Any) -> RuleRunner:
    """The plugin's rules and target types and `rules` (the test's QueryRules and any Pants
    goals it runs beside ours), on a store of its own; `options` go to RuleRunner."""
    return isolated_rule_runner(
        rules=[*register.rules(), *rules],
        target_types=register.target_types(),
        **options,
    )
