"""Every module's `rules()` is complete on its own, as in Pants' backends: a RuleRunner built from
one module's list alone has a rule graph for each of the plugin's rules in that list.

A RuleRunner builds its rule graph when it is made, but only for what is queried: an incomplete
list is found only through a query that reaches the rule missing its inputs ("No installed rules
return the type X"). So each of the plugin's rules in the list is queried for its product, given
what its callers hand it: its parameters that no rule of the plugin makes (its request type, a
union member) and that are the plugin's own or a union's. All else it asks for, its other
parameters and every `Get`, the list must provide. Goal rules need no query: the engine makes one
for every goal."""

from __future__ import annotations

import functools
import inspect
import sys
from types import ModuleType
from typing import Callable, Iterable, List, get_type_hints

import pytest
from pants.engine.goal import Goal
from pants.engine.rules import QueryRule, TaskRule
from pants.engine.unions import UnionRule
from pants.testutil.rule_runner import RuleRunner

from rocm_build import register
from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner

ALL_RULES = register.rules()
# What the plugin's rules produce, and the union members it registers: the types a caller cannot
# get from the engine but must hand a rule.
PRODUCED = {r.output_type for r in ALL_RULES if isinstance(r, TaskRule)}
MEMBERS = {r.union_member for r in ALL_RULES if isinstance(r, UnionRule)}


def modules_with_rules() -> List[ModuleType]:
    """The plugin's modules that define `rules()`: every one register.py loads, and those they
    load (register.py imports them all, so they are in sys.modules)."""
    return [
        m for name, m in sorted(sys.modules.items())
        if name.startswith("rocm_build.") and not name.endswith("_test") and inspect.getmodule(getattr(m, "rules", None)) is m
    ]  # fmt: skip


def parameter_types(func: Callable) -> List[type]:
    """A rule's parameter types, from its signature: what the engine reads too, where its own
    name for them changed (`TaskRule.input_selectors`, `parameters` from Pants 2.20)."""
    # A subsystem's rule is a partial of Pants' own function, the subsystem bound.
    hints = get_type_hints(func.func if isinstance(func, functools.partial) else func)
    return [hints[name] for name in inspect.signature(func).parameters]


def queries(rules: Iterable) -> List[QueryRule]:
    """A query for each of the plugin's rules in `rules`, given what its callers hand it."""
    out = []
    for r in rules:
        if not isinstance(r, TaskRule) or not r.func.__module__.startswith("rocm_build") or issubclass(r.output_type, Goal):
            continue
        given = [t for t in parameter_types(r.func) if t not in PRODUCED and (t.__module__.startswith("rocm_build") or t in MEMBERS)]
        out.append(QueryRule(r.output_type, given))
    return out


def test_every_module_with_rules_is_found() -> None:
    names = {m.__name__ for m in modules_with_rules()}
    # One of each layer, so that a change in how modules are found cannot make the test below empty.
    assert {"rocm_build.register", "rocm_build.upstream.upstream_repo", "rocm_build.wheel.build_spec",
            "rocm_build.build.build", "rocm_build.goals.plan"} <= names  # fmt: skip
    assert len(names) > 40


@pytest.mark.parametrize("module", modules_with_rules(), ids=lambda m: m.__name__)
def test_a_module_rules_alone_build_a_rule_graph(module: ModuleType) -> None:
    rules = list(module.rules())
    # Raises where the list is incomplete, naming the rule and the type nothing returns.
    isolated_rule_runner(rules=[*rules, *queries(rules)], target_types=register.target_types())
