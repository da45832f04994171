"""upstream/download.py: the one kind of process that reaches the network, from its request, with
the real host tools and mirror step (upstream/mirror_table.py): what runs and what it sees, and
that its key holds what it pins and the script, never the mirror table. The fetches it serves
run end to end in tests/e2e/first_run_test.py and rust_test.py (through mirrors) and
remote_cache_test.py (a second machine takes the fetch from the cache)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, Mapping, Tuple

import pytest
from pants.engine.fs import Digest, DigestContents
from pants.engine.process import Process
from pants.testutil.rule_runner import QueryRule, RuleRunner
from pants.util.frozendict import FrozenDict
from pants.util.logging import LogLevel

from rocm_build.sandbox_scripts import SCRIPTS_DIR
from rocm_build.script_modules import script_bytes
from rocm_build.subsystems.host_tools import REMOTE_CACHE_FIRST_MILLIS, HostTools
from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner
from rocm_build.upstream import download
from rocm_build.upstream.download import DOWNLOAD_TIMEOUT_SECONDS, DownloadProcess

CA = "/etc/ssl/certs/ca-certificates.crt"
ARCHIVE = DownloadProcess(
    "fetch_archive.py", ("0" * 64, "up-1.0", "https://archive.invalid/up-1.0.tar.gz"), "Fetching up 1.0",
    output_directories=("out",), output_files=("newest",),
)  # fmt: skip
PACK = DownloadProcess(
    "source_pack.py", ("fetch", "https://github.com/up/up", "1" * 40, "0", "pack"), "Fetching up @ 111111111111",
    imports=("git_urls.py",), ca_certs=False, env=FrozenDict({"GIT_TERMINAL_PROMPT": "0"}),
)  # fmt: skip


@pytest.fixture
def rule_runner(tmp_path: Path) -> RuleRunner:
    return isolated_rule_runner(
        rules=[*download.rules(), QueryRule(Process, [DownloadProcess]), QueryRule(HostTools, []), QueryRule(DigestContents, [Digest])],
        named_caches=tmp_path / "named",
    )


def made(rule_runner: RuleRunner, request: DownloadProcess, mirrors: Mapping[str, str] = FrozenDict()) -> Tuple[Process, Dict[str, bytes]]:
    """The Process and its sandbox's files, with `[GLOBAL] ca_certs_path` set as pants.toml sets it."""
    rule_runner.set_options([f"--ca-certs-path={CA}", f"--rocm-build-mirrors={json.dumps(dict(mirrors))}"])
    process = rule_runner.request(Process, [request])
    return process, {fc.path: fc.content for fc in rule_runner.request(DigestContents, [process.input_digest])}


def test_a_download_runs_its_script_beside_the_mirror_reader_with_the_ca_bundle_named(rule_runner: RuleRunner) -> None:
    process, files = made(rule_runner, ARCHIVE)
    python = rule_runner.request(HostTools, []).python.path
    assert process.argv == (python, f"{SCRIPTS_DIR}/fetch_archive.py", *ARCHIVE.args)
    assert files == {f"{SCRIPTS_DIR}/{s}": script_bytes(s) for s in ("fetch_archive.py", "mirrors.py")}
    assert dict(process.env) == {"PATH": "/usr/bin:/bin", "ROCM_BUILD_CA_CERTS": CA}
    assert dict(process.append_only_caches) == {"rocm_build_mirrors": ".mirrors"}
    assert (process.output_directories, process.output_files) == (("out",), ("newest",))
    # A cache hit first: a download's sandbox is small, its output large (host_tools.py says why).
    assert process.remote_cache_speculation_delay_millis == REMOTE_CACHE_FIRST_MILLIS
    assert (process.timeout_seconds, process.level, process.description) == (DOWNLOAD_TIMEOUT_SECONDS, LogLevel.INFO, "Fetching up 1.0")


def test_git_fetches_get_their_imports_and_env_but_no_ca_bundle(rule_runner: RuleRunner) -> None:
    process, files = made(rule_runner, PACK)
    assert sorted(files) == [f"{SCRIPTS_DIR}/{s}" for s in ("git_urls.py", "mirrors.py", "source_pack.py")]
    assert dict(process.env) == {"PATH": "/usr/bin:/bin", "GIT_TERMINAL_PROMPT": "0"}


def test_the_mirror_table_is_in_no_key(rule_runner: RuleRunner) -> None:
    # The same Process, so the same key, with or without a mirror: moving to one rebuilds nothing.
    without, _ = made(rule_runner, ARCHIVE)
    through, _ = made(rule_runner, ARCHIVE, {"https://archive.invalid/": "file:///srv/archives/"})
    assert through == without
