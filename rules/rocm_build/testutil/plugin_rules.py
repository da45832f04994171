"""A RuleRunner for the plugin's rules, as the tests that run them through Pants build it."""

from __future__ import annotations

from typing import Any

from pants.core.util_rules import system_binaries
from pants.testutil.rule_runner import RuleRunner

from rocm_build import register


def plugin_rule_runner(*rules: Any, **options: Any) -> RuleRunner:
    """The plugin's rules and target types, the system binaries they look up, and `rules` (the
    test's QueryRules and any rules of its own), on a store of its own; `options` go to RuleRunner."""
    return RuleRunner(
        rules=[*register.rules(), *system_binaries.rules(), *rules],
        target_types=register.target_types(),
        isolated_local_store=True,
        **options,
    )
