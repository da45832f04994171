"""docs/pants-versions.md carries the report of the tree as it is; each `Get` is classified as
`pants migrate-call-by-name` treats it."""

from __future__ import annotations

import ast
from pathlib import Path
from textwrap import dedent
from typing import List, Tuple

from rocm_build.programs.pants_api_report import (
    COMMENT,
    FORM,
    IN_A_HELPER,
    IN_EXPRESSION,
    MULTIGET_ITERABLE,
    NESTED,
    NOT_ASSIGNMENT,
    RULE_DECORATORS,
    REWRITTEN,
    get_sites,
    moved_imports,
    multiget_sites,
    PAGE,
    report,
    shown_on_page,
    visited_by_the_goal,
)

def sites(source: str) -> List[Tuple[int, str]]:
    source = dedent(source)
    return get_sites(ast.parse(source), source)


def test_the_page_shows_the_counts_of_this_tree() -> None:
    shown = shown_on_page(Path(PAGE).read_text())
    assert shown == report(Path(".")), f"{PAGE} is out of date; run: python3 rules/rocm_build/programs/pants_api_report.py --write ."


def test_the_goal_visits_async_defs_under_rule_and_goal_rule_as_plain_names_only() -> None:
    assert RULE_DECORATORS == {"rule", "goal_rule"}
    source = dedent(
        """\
        @rule
        async def a(): ...
        @rule(desc="x", level=LogLevel.DEBUG)
        async def b(): ...
        @goal_rule
        async def c(): ...
        @goal_rule()
        async def d(): ...
        @_uncacheable_rule
        async def e(): ...
        @rules.rule
        async def f(): ...
        @rule
        def g(): ...
        async def h(): ...
        """
    )
    visited = {f.name: visited_by_the_goal(f) for f in ast.parse(source).body}
    assert visited == dict(a=True, b=True, c=True, d=True, e=False, f=False, g=False, h=False)


def test_assignments_of_a_get_or_an_awaited_get_in_a_rule_body_are_rewritten() -> None:
    assert sites(
        """\
        @rule(desc="x")
        async def r(request: R) -> O:
            a = await Get(A, AReq(request.x))
            b = Get(B, BReq, request.y)
            c = await Get(C)
            d = await Get(D, {request.x: X, request.y: Y})
            e = f = await Get(E, EReq())
            return O(a, b, c, d, e)
        """
    ) == [(3, REWRITTEN), (4, REWRITTEN), (5, REWRITTEN), (6, REWRITTEN), (7, REWRITTEN)]


def test_a_multiget_of_gets_as_its_arguments_is_rewritten_one_over_an_iterable_is_not() -> None:
    assert sites(
        """\
        @goal_rule
        async def r(request: R) -> O:
            a, b = await MultiGet(Get(A, AReq()), Get(B, BReq()))
            many = await MultiGet(Get(A, AReq(x)) for x in request.xs)
            listed = await MultiGet([Get(A, AReq(x)) for x in request.xs])
            *more, last = await MultiGet(*(Get(A, AReq(x)) for x in request.xs), Get(B, BReq()))
            return O()
        """
    ) == [(3, REWRITTEN), (3, REWRITTEN), (4, MULTIGET_ITERABLE), (5, MULTIGET_ITERABLE), (6, MULTIGET_ITERABLE), (6, REWRITTEN)]


def test_a_get_outside_a_visited_rule_is_in_a_helper() -> None:
    assert sites(
        """\
        async def helper(x):
            return await Get(A, AReq(x))
        @_uncacheable_rule
        async def uncacheable(request: R) -> O:
            a = await Get(A, AReq())
        def make(x):
            return Get(A, AReq(x))
        @rule
        async def r(request: R) -> O:
            async def inner():
                b = await Get(B, BReq())
            def sync():
                c = Get(C, CReq())
            d = await Get(D, DReq())
        """
    ) == [(2, IN_A_HELPER), (5, IN_A_HELPER), (7, IN_A_HELPER), (11, IN_A_HELPER), (13, IN_A_HELPER), (14, REWRITTEN)]


def test_a_get_in_a_compound_statement_of_a_rule_is_nested() -> None:
    assert sites(
        """\
        @rule
        async def r(request: R) -> O:
            if request.x:
                a = await Get(A, AReq())
            for x in request.xs:
                b = await Get(B, BReq(x))
            try:
                c = await Get(C, CReq())
            except E:
                pass
            with cm():
                d = await Get(D, DReq())
            while (await Get(W, WReq())).more:
                pass
        """
    ) == [(4, NESTED), (6, NESTED), (8, NESTED), (12, NESTED), (13, NESTED)]


def test_a_get_whose_statement_is_no_plain_assignment_is_not_an_assignment() -> None:
    assert sites(
        """\
        @rule
        async def r(request: R) -> O:
            await Get(A, AReq())
            workspace.write_digest(await Get(Digest, CreateDigest(files)))
            b: B = await Get(B, BReq())
            return await Get(O, OReq())
        """
    ) == [(3, NOT_ASSIGNMENT), (4, NOT_ASSIGNMENT), (5, NOT_ASSIGNMENT), (6, NOT_ASSIGNMENT)]


def test_a_get_inside_the_value_of_an_assignment_is_in_an_expression() -> None:
    assert sites(
        """\
        @rule
        async def r(request: R) -> O:
            a = (await Get(A, AReq())).field
            b = [await Get(B, BReq(x)) for x in request.xs]
            c = await Get(C, CReq(await Get(D, DReq())))
            e = MultiGet(Get(E, EReq()))
        """
    ) == [(3, IN_EXPRESSION), (4, IN_EXPRESSION), (5, REWRITTEN), (5, IN_EXPRESSION), (6, IN_EXPRESSION)]


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
        """
    ) == [(3, FORM), (4, FORM), (5, FORM), (6, FORM), (7, FORM), (8, FORM), (9, FORM), (10, REWRITTEN), (10, FORM)]


def test_a_get_with_a_comment_on_one_of_its_lines_is_skipped() -> None:
    assert sites(
        """\
        @rule
        async def r(request: R) -> O:
            a = await Get(  # the archive
                A,
                AReq(),
            )
            b = await Get(
                B,
                BReq("#"),
            )
            # a comment above the statement is outside the range
            c = await Get(C, CReq())
            d = await Get(D, DReq())  # one on its line is not
        """
    ) == [(3, COMMENT), (7, COMMENT), (12, REWRITTEN), (13, COMMENT)]


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
