"""`[build-isolation]` and the keys it took from `[rocm-build]` (build_isolation.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import pytest
from pants.engine.rules import collect_rules, rule
from pants.testutil.rule_runner import QueryRule

from rocm_build.subsystems.build_isolation import BuildIsolationSubsystem
from rocm_build.subsystems.rocm_build import RocmBuildSubsystem
from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner


@dataclass(frozen=True)
class Isolation:
    network: bool
    engine: Optional[str]
    roots: Tuple[str, ...]


@rule
async def read_isolation(isolation: BuildIsolationSubsystem, settings: RocmBuildSubsystem) -> Isolation:
    return Isolation(isolation.network(settings), isolation.engine(settings), isolation.worker_roots(settings))


def isolation(*options: str) -> Isolation:
    rule_runner = isolated_rule_runner(rules=[*collect_rules(), QueryRule(Isolation, [])])
    rule_runner.set_options(list(options))
    return rule_runner.request(Isolation, [])


def test_defaults_are_the_ones_rocm_build_had() -> None:
    assert isolation() == Isolation(True, None, ("/usr", "/usr/local", "/opt/rocm"))


def test_the_new_keys_are_read() -> None:
    got = isolation(
        "--no-build-isolation-network-isolation",
        "--build-isolation-container-engine=docker",
        "--build-isolation-worker-search-path=['/opt/python']",
    )
    assert got == Isolation(False, "docker", ("/opt/python",))


def test_the_old_keys_still_count_until_their_removal() -> None:
    got = isolation(
        "--no-rocm-build-network-isolation",
        "--rocm-build-container-engine=podman",
        "--rocm-build-worker-search-path=['/srv']",
    )
    assert got == Isolation(False, "podman", ("/srv",))


def test_old_and_new_key_together_are_refused_naming_both() -> None:
    with pytest.raises(Exception) as failure:
        isolation("--rocm-build-worker-search-path=['/a']", "--build-isolation-worker-search-path=['/b']")
    assert "--build-isolation-worker-search-path" in str(failure.value)
    assert "--rocm-build-worker-search-path" in str(failure.value)
