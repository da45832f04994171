"""`[compiler-cache]` and the keys it took from `[rocm-build]` (compiler_cache.py)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from pants.engine.internals.scheduler import ExecutionError
from pants.engine.rules import collect_rules, rule
from pants.testutil.rule_runner import QueryRule

from rocm_build.subsystems.compiler_cache import CompilerCacheSubsystem
from rocm_build.subsystems.rocm_build import RocmBuildSubsystem
from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner


@dataclass(frozen=True)
class CompilerCache:
    launcher: str
    remote_storage: str


@rule
async def read_compiler_cache(compilers: CompilerCacheSubsystem, settings: RocmBuildSubsystem) -> CompilerCache:
    return CompilerCache(compilers.launcher_name(settings), compilers.remote_storage(settings))


def compiler_cache(*options: str) -> CompilerCache:
    rule_runner = isolated_rule_runner(rules=[*collect_rules(), QueryRule(CompilerCache, [])])
    rule_runner.set_options(list(options))
    return rule_runner.request(CompilerCache, [])


def test_defaults_are_ccache_without_remote_storage() -> None:
    assert compiler_cache() == CompilerCache("ccache", "")


def test_the_new_keys_are_read() -> None:
    got = compiler_cache("--compiler-cache-launcher=sccache", "--compiler-cache-ccache-remote-storage=redis://h:6379")
    assert got == CompilerCache("sccache", "redis://h:6379")


def test_the_old_keys_still_count_until_their_removal() -> None:
    got = compiler_cache("--rocm-build-compiler-launcher=sccache", "--rocm-build-ccache-remote-storage=redis://old:6379")
    assert got == CompilerCache("sccache", "redis://old:6379")


def test_old_and_new_key_together_are_refused_naming_both() -> None:
    with pytest.raises(ExecutionError) as failure:
        compiler_cache("--rocm-build-compiler-launcher=sccache", "--compiler-cache-launcher=ccache")
    assert "--compiler-cache-launcher" in str(failure.value) and "--rocm-build-compiler-launcher" in str(failure.value)
