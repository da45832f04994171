"""toolchain/isolation.py: whether builds run without network (the namespace probe, asked once
per pantsd, and its refusal naming both fixes), and how a failed build is explained: a timeout,
no namespace, or an exit code, with the network hint when the log shows a blocked connection.
tests/e2e/hermetic_test.py's test_a_build_step_cannot_reach_the_network and errors_test.py's
"build command fails" and "timeout" cases, at the function that writes their text."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pants.engine.process import FallibleProcessResult, Process, ProcessCacheScope
from pants.testutil.option_util import create_subsystem
from pants.testutil.rule_runner import MockGet, run_rule_with_mocks

from rocm_build.errors import RocmBuildError
from rocm_build.subsystems.build_isolation import BuildIsolationSubsystem
from rocm_build.subsystems.rocm_build import RocmBuildSubsystem
from rocm_build.toolchain.isolation import EXIT_NO_NAMESPACE, PROBE, NetworkIsolation, explain_build_failure, network_isolation

OWNER = "tests/mini/aotriton:wheel"
TOOLS = SimpleNamespace(bash=SimpleNamespace(path="/usr/bin/bash"))  # the rule reads only bash's path
LOG = "dist/tests.mini.aotriton/mini_aotriton.build.log"


def isolation(enabled: bool, exit_code: int = 0, stderr: bytes = b""):
    probes = []

    def probe(process: Process) -> FallibleProcessResult:
        probes.append(process)
        return SimpleNamespace(exit_code=exit_code, stderr=stderr)

    # The setting in its own scope; [rocm-build]'s deprecated key of the same name left unset.
    settings = create_subsystem(BuildIsolationSubsystem, network_isolation=enabled)
    old = create_subsystem(RocmBuildSubsystem, network_isolation=True)
    result = run_rule_with_mocks(
        network_isolation, rule_args=[settings, old, TOOLS], mock_gets=[MockGet(FallibleProcessResult, (Process,), probe)]
    )
    return result, probes


def test_isolation_is_probed_once_per_pantsd_and_turned_off_without_a_probe() -> None:
    result, probes = isolation(True)
    assert result == NetworkIsolation(True)
    (process,) = probes
    assert process.argv == ("/usr/bin/bash", "-c", PROBE) and process.cache_scope == ProcessCacheScope.PER_RESTART_SUCCESSFUL
    assert isolation(False) == (NetworkIsolation(False), [])


def test_a_machine_without_namespaces_is_refused_naming_both_fixes() -> None:
    with pytest.raises(RocmBuildError) as e:
        isolation(True, exit_code=1, stderr=b"unshare: unshare failed: Operation not permitted\n")
    assert str(e.value) == (
        "Builds run without network and at a fixed path, in new network, mount and UTS namespaces (`unshare --net "
        "--mount --uts`), and this machine does not permit them:\n    unshare: unshare failed: Operation not permitted\n"
        "Allow them (e.g. `sysctl -w kernel.unprivileged_userns_clone=1`, or run as root), or let builds use the "
        "host's network with `[build-isolation] network_isolation = false` in pants.toml (rocm_build_info.json records it)."
    )


def test_what_the_build_records_of_its_network() -> None:
    assert NetworkIsolation(True).describe() == "none (own network namespace)"
    assert NetworkIsolation(False).describe() == "host (network_isolation = false)"
    # A container has none whatever the setting says.
    assert NetworkIsolation(False).describe(in_image=True) == "none (container, --network=none)"
    assert NetworkIsolation(False).isolated(in_image=True) and not NetworkIsolation(False).isolated(in_image=False)


def test_a_build_that_reached_for_the_network_is_told_what_to_declare() -> None:
    output = "step 1\nurllib.error.URLError: <urlopen error [Errno 101] Network is unreachable>\n"
    message = explain_build_failure(OWNER, 3600, 1, output, LOG)
    assert message.startswith(
        f"rocm_wheel {OWNER}: the build failed (exit 1).\nIt tried to reach the network. Builds have no network: "
        "everything a build reads must be a declared input. Add what it downloads as a build requirement "
        f"(`build_requirements` on {OWNER}, then `pants lock-build-requirements {OWNER}`) or as an `upstream_archive` "
        "named in its `archives` field.\nLast lines of the log:\n"
    )
    assert "Network is unreachable" in message and message.endswith(f"\nFull log: {LOG}")


def test_a_timeout_no_namespace_and_a_plain_failure() -> None:
    assert explain_build_failure(OWNER, 3, 1, "Exceeded timeout of 3 seconds", LOG).startswith(
        f"rocm_wheel {OWNER}: the build exceeded its timeout of 3 s (raise `timeout` on the target if the build needs longer)."
    )
    assert explain_build_failure(OWNER, 3600, EXIT_NO_NAMESPACE, "", LOG).startswith(
        f"rocm_wheel {OWNER}: the build could not start: no network namespace could be made for it. Allow them"
    )
    plain = explain_build_failure(OWNER, 3600, 3, "the compiler said no\n", LOG)
    assert plain.startswith(f"rocm_wheel {OWNER}: the build failed (exit 3).\nLast lines of the log:\n")
    assert "the compiler said no" in plain and "network" not in plain
