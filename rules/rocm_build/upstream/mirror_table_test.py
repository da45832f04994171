"""upstream/mirror_table.py: `[rocm-build] mirrors` reaches the fetch processes through a named
cache, never a key. Its process runs for real here (scripts/mirrors.py, the host's Python), in a
named cache of the test's own: the table written, sorted, and removed when the setting is
emptied; an unusable entry refused with the option named. tests/e2e/first_run_test.py and
rust_test.py fetch through a working table end to end; no e2e file sets a bad one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict

import pytest
from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import QueryRule, RuleRunner

from rocm_build.errors import RocmBuildError
from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner
from rocm_build.upstream import mirror_table
from rocm_build.upstream.mirror_table import MIRRORS_CACHE, Mirrors

GITHUB = "https://github.com/"


@pytest.fixture
def named_caches(tmp_path: Path) -> Path:
    return tmp_path / "named"


@pytest.fixture
def rule_runner(named_caches: Path) -> RuleRunner:
    return isolated_rule_runner(
        rules=[*mirror_table.rules(), QueryRule(Mirrors, [])],
        named_caches=named_caches,
    )


def configure(rule_runner: RuleRunner, table: Dict[str, str]) -> Mirrors:
    rule_runner.set_options([f"--rocm-build-mirrors={json.dumps(table)}"])
    return rule_runner.request(Mirrors, [])


def test_the_table_is_written_to_the_named_cache_sorted_and_removed_when_emptied(rule_runner: RuleRunner, named_caches: Path) -> None:
    table = {GITHUB: "file:///srv/mirrors/github/", "https://files.pythonhosted.org/": "http://127.0.0.1:8080/"}
    mirrors = configure(rule_runner, table)
    assert mirrors.table == tuple(sorted(table.items()))
    assert mirrors.caches == {MIRRORS_CACHE: ".mirrors"}
    written = named_caches / MIRRORS_CACHE / "mirrors.json"
    assert json.loads(written.read_text()) == table
    # No mirrors: the file goes, so a fetch sees none (scripts/mirrors.py's load answers []).
    assert configure(rule_runner, {}) == Mirrors(())
    assert not written.exists()


def test_an_unusable_entry_is_refused_naming_the_option_and_the_entry(rule_runner: RuleRunner) -> None:
    # Plain http is for a mirror on this machine only; a path is not a URL; both sides end alike.
    table = {GITHUB: "http://mirror.example/github/", "https://example.invalid/": "/srv/mirror/"}
    with pytest.raises(ExecutionError) as raised:
        configure(rule_runner, table)
    (error,) = raised.value.wrapped_exceptions
    assert isinstance(error, RocmBuildError)
    # Each problem said once, in the table's sorted order (the process gets it as sorted JSON).
    assert str(error) == (
        "[rocm-build] mirrors (PANTS_ROCM_BUILD_MIRRORS): the mirror '/srv/mirror/' (for 'https://example.invalid/') is a "
        "local path; write it as file:///absolute/path (allowed only for file:// pins); the mirror "
        "'http://mirror.example/github/' (for 'https://github.com/') uses the scheme `http://`, which is not allowed here "
        "(unencrypted and unauthenticated); allowed: https://, ssh://, file://"
    )
    with pytest.raises(ExecutionError, match="end both with `/` or neither, or the paths join wrongly"):
        configure(rule_runner, {GITHUB: "file:///srv/mirrors/github"})
