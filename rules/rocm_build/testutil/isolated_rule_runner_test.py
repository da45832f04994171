"""testutil/isolated_rule_runner.py: a RuleRunner's processes write into named caches of its own,
and the plugin's tests build no RuleRunner any other way."""

from __future__ import annotations

import ast
import json
import os
import tempfile
from pathlib import Path

from pants.base.build_environment import get_pants_cachedir
from pants.testutil.rule_runner import QueryRule

from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner
from rocm_build.upstream import mirror_table
from rocm_build.upstream.mirror_table import MIRRORS_CACHE, Mirrors

PLUGIN = Path(__file__).parent.parent
TABLE = {"https://github.com/": "file:///srv/mirrors/github/"}


def test_a_process_writes_into_named_caches_of_the_runners_own() -> None:
    # The mirror step writes a named cache every Pants on the machine reads: the step that
    # removed the outer run's table when a unit test ran it in the developer's named caches.
    runner = isolated_rule_runner(rules=[*mirror_table.rules(), QueryRule(Mirrors, [])])
    named = Path(runner.options_bootstrapper.bootstrap_options.for_global_scope().named_caches_dir)
    default = Path(get_pants_cachedir(), "named_caches").resolve()  # Pants' own default
    assert named != default and named.is_relative_to(Path(tempfile.gettempdir()).resolve())
    runner.set_options([f"--rocm-build-mirrors={json.dumps(TABLE)}"])
    # The options the rules read name the same folder after set_options as the processes use.
    assert Path(runner.options_bootstrapper.bootstrap_options.for_global_scope().named_caches_dir) == named
    runner.request(Mirrors, [])
    assert json.loads((named / MIRRORS_CACHE / "mirrors.json").read_text()) == TABLE
    assert os.listdir(named) == [MIRRORS_CACHE]


def test_every_rule_runner_of_the_plugins_tests_is_built_here() -> None:
    built = {}
    for path in sorted(PLUGIN.rglob("*.py")):
        calls = [
            node.lineno
            for node in ast.walk(ast.parse(path.read_text(), str(path)))
            # RuleRunner itself or a class of it (the helper's)
            if isinstance(node, ast.Call) and str(getattr(node.func, "id", getattr(node.func, "attr", ""))).endswith("RuleRunner")
        ]
        if calls:
            built[str(path.relative_to(PLUGIN))] = calls
    assert len(list(PLUGIN.rglob("*_test.py"))) > 100  # the whole plugin is read
    assert list(built) == ["testutil/isolated_rule_runner.py"], built
