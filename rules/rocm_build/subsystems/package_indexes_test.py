"""pip's index arguments from Pants' `[python-repos]`, and `[rocm-build]`'s keys that set builds
apart from it (package_indexes.py)."""

from __future__ import annotations

import pytest
from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import QueryRule

from rocm_build.subsystems import package_indexes
from rocm_build.subsystems.package_indexes import PipIndexArgs
from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner


def index_args(*options: str) -> PipIndexArgs:
    rule_runner = isolated_rule_runner(rules=[*package_indexes.rules(), QueryRule(PipIndexArgs, [])])
    rule_runner.set_options(list(options))
    return rule_runner.request(PipIndexArgs, [])


def test_python_repos_defaults_are_pypi_and_no_find_links() -> None:
    assert index_args().args == ("--index-url", "https://pypi.org/simple/")


def test_python_repos_indexes_and_find_links_become_pip_arguments() -> None:
    got = index_args("--python-repos-indexes=['https://a/simple', 'https://b/simple']", "--python-repos-find-links=['/w']")
    assert got.args == ("--index-url", "https://a/simple", "--extra-index-url", "https://b/simple", "--find-links", "/w")
    assert got.where == "[python-repos] indexes and find_links"
    assert index_args("--python-repos-indexes=[]").args == ("--no-index",)


def test_rocm_build_keys_set_builds_apart_from_pants_own_resolves() -> None:
    got = index_args("--rocm-build-index-urls=[]", "--rocm-build-find-links=['/wheels']", "--python-repos-find-links=['/pants']")
    assert got.args == ("--no-index", "--find-links", "/wheels")
    assert got.where == "[rocm-build] index_urls and find_links"
    # Each key on its own: the other still comes from [python-repos].
    got = index_args("--rocm-build-index-urls=[]", "--python-repos-find-links=['/pants']")
    assert got.args == ("--no-index", "--find-links", "/pants")
    assert got.where == "[rocm-build] index_urls and [python-repos] find_links"


def test_a_url_with_credentials_is_refused_naming_the_option_not_the_secret() -> None:
    with pytest.raises(ExecutionError) as failure:
        index_args("--python-repos-indexes=['https://user:s3cret@example.com/simple']")
    message = str(failure.value)
    assert "[python-repos] indexes: the URL for example.com/simple carries credentials" in message
    assert "s3cret" not in message
    with pytest.raises(ExecutionError) as failure:
        index_args("--rocm-build-find-links=['https://tok@example.com/wheels']")
    assert "[rocm-build] find_links: the URL for example.com/wheels carries credentials" in str(failure.value)

