"""docs/pants-versions.md carries the report of the tree as it is; each `Get` is classified as
`pants migrate-call-by-name` treats it."""

from __future__ import annotations

import ast
from pathlib import Path
from textwrap import dedent
from typing import List, Tuple

from rocm_build.programs.pants_api_report import (
    AFTER_NESTED_DEF,
    BUILT_BY_A_CALL,
    FORM,
    IN_A_HELPER,
    PAGE,
    REWRITTEN,
    RULE_DECORATORS,
    UNION,
    get_sites,
    is_rule,
    moved_imports,
    multiget_sites,
    report,
    shown_on_page,
    union_bases,
)


def sites(source: str, unions: Tuple[str, ...] = ()) -> List[Tuple[int, str]]:
    return get_sites(ast.parse(dedent(source)), unions)


def test_the_page_shows_the_counts_of_this_tree() -> None:
    shown = shown_on_page(Path(PAGE).read_text())
    assert shown == report(Path(".")), f"{PAGE} is out of date; run: python3 rules/rocm_build/programs/pants_api_report.py --write ."


def test_a_rule_is_a_def_under_rule_goal_rule_or_uncacheable_rule_in_any_form() -> None:
    assert RULE_DECORATORS == {"rule", "goal_rule", "_uncacheable_rule"}
    source = dedent(
        """\
        @rule
        async def a(): ...
        @rule(desc="x", level=LogLevel.DEBUG)
        async def b(): ...
        @goal_rule
        async def c(): ...
        @_uncacheable_rule
        async def d(): ...
        @rules.rule
        async def e(): ...
        @rule
        def f(): ...
        @memoized
        async def g(): ...
        async def h(): ...
        """
    )
    found = {f.name: is_rule(f) for f in ast.parse(source).body}
    assert found == dict(a=True, b=True, c=True, d=True, e=True, f=True, g=False, h=False)


def test_every_get_of_a_rule_is_rewritten_wherever_it_stands_in_it() -> None:
    # 2.31's goal replaces each `Get(...)` node of the rule, not statements of its body.
    assert sites(
        """\
        @rule(desc="x")
        async def r(request: R) -> O:
            if request.x:
                a = await Get(A, AReq())
            for x in request.xs:
                b = (await Get(B, BReq(x))).field
            many = await MultiGet(Get(A, AReq(x)) for x in request.xs)
            c = await Get(C, CReq(await Get(D, DReq())))  # a comment does not stop it
            await Get(E, EReq())
            return await Get(O, OReq())
        """
    ) == [(4, REWRITTEN), (6, REWRITTEN), (7, REWRITTEN), (8, REWRITTEN), (8, REWRITTEN), (9, REWRITTEN), (10, REWRITTEN)]


def test_the_four_forms_with_plain_names_are_rewritten() -> None:
    assert sites(
        """\
        @rule
        async def r(request: R) -> O:
            a = await Get(A, AReq(request.x))
            b = Get(B, BReq, request.y)
            c = await Get(C)
            d = await Get(D, {request.x: X, request.y: Y})
        """
    ) == [(3, REWRITTEN), (4, REWRITTEN), (5, REWRITTEN), (6, REWRITTEN)]


def test_a_get_outside_a_rule_is_in_a_helper() -> None:
    assert sites(
        """\
        async def helper(x):
            return await Get(A, AReq(x))
        def make(x):
            return Get(A, AReq(x))
        @rule
        async def r(request: R) -> O:
            d = await Get(D, DReq())
            async def inner():
                b = await Get(B, BReq())
        X = Get(X, XReq())
        """
    ) == [(2, IN_A_HELPER), (4, IN_A_HELPER), (7, REWRITTEN), (9, IN_A_HELPER), (10, IN_A_HELPER)]


def test_a_get_below_a_def_nested_in_a_rule_is_left() -> None:
    # Leaving any `def`, the goal's transformer sets the function it is in to "" (its
    # leave_FunctionDef), so the rest of the rule is looked up under no name.
    assert sites(
        """\
        @rule
        async def r(request: R) -> O:
            a = await Get(A, AReq())
            def key(x):
                return x.name
            b = await Get(B, BReq())
            c = sorted(request.xs, key=lambda x: x.name)
            return await Get(O, OReq())
        """
    ) == [(3, REWRITTEN), (6, AFTER_NESTED_DEF), (8, AFTER_NESTED_DEF)]


def test_a_get_the_goal_cannot_map_is_form() -> None:
    assert sites(
        """\
        @rule
        async def r(request: R) -> O:
            a = await Get(lockfile.A, AReq())
            b = await Get(B, module.BReq())
            c = await Get(C, request.input)
            d = await Get(D, DReq, request.x, 4)
            e = await Get(E, module.EReq, request.x)
            f = await Get(F, {request.x: module.X})
            g = await engine.Get(G, GReq())
            h, i = await MultiGet(Get(H, HReq()), rules.Get(I, IReq()))
            j = await Get(J, input=JReq())
        """
    ) == [(3, FORM), (4, FORM), (5, FORM), (6, FORM), (7, FORM), (8, FORM), (9, FORM), (10, REWRITTEN), (10, FORM), (11, FORM)]


def test_a_request_built_by_a_function_is_left() -> None:
    # The goal looks for a rule taking a type named as the call: `script_files` is no type.
    assert sites(
        """\
        @rule
        async def r(request: R) -> O:
            a = await Get(Digest, script_files("a.py"))
            b = await Get(Digest, CreateDigest(files))
        """
    ) == [(3, BUILT_BY_A_CALL), (4, REWRITTEN)]


def test_a_get_over_a_union_base_is_left() -> None:
    source = """\
        @rule
        async def r(request: R) -> O:
            a = await Get(Findings, QuickCheckRequest, check(spec))
            b = await Get(B, {member: QuickCheckRequest})
            c = await Get(C, CReq, member)
        """
    assert sites(source, ("QuickCheckRequest",)) == [(3, UNION), (4, UNION), (5, REWRITTEN)]


def test_union_bases_are_those_declared_and_those_members_are_registered_into() -> None:
    source = dedent(
        """\
        @union
        class Mine: ...
        @union(in_scope_types=[EnvironmentName])
        class Scoped: ...
        class Plain: ...
        def rules():
            return [UnionRule(PackageFieldSet, WheelFieldSet), UnionRule(core.CheckRequest, Mine2)]
        """
    )
    assert union_bases(ast.parse(source)) == ["Mine", "Scoped", "PackageFieldSet", "CheckRequest"]


def test_multiget_sites_are_counted_wherever_they_are() -> None:
    source = "async def h():\n    return await MultiGet(Get(A, AReq()) for _ in x)\n"
    assert multiget_sites(ast.parse(source)) == 1


def test_the_moved_environment_types_are_imported_in_one_module_only_as_the_fallback() -> None:
    assert "imported by 1 module(s): `rules/rocm_build/pants_environments.py` (as the fallback)\n" in report(Path("."))


def test_an_import_of_a_moved_module_is_a_fallback_only_in_an_except_import_error() -> None:
    old = "from pants.core.util_rules.environments import EnvironmentTarget"
    new = "from pants.core.environments.target_types import EnvironmentTarget"
    assert moved_imports(ast.parse(old)) == [("pants.core.util_rules.environments", False)]
    guarded = f"try:\n    {new}\nexcept ImportError:\n    {old}\n"
    assert moved_imports(ast.parse(guarded)) == [("pants.core.util_rules.environments", True)]
    other = f"try:\n    {new}\nexcept KeyError:\n    {old}\n"
    assert moved_imports(ast.parse(other)) == [("pants.core.util_rules.environments", False)]
