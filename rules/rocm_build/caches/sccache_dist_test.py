"""caches/sccache_dist.py: the farm's settings reach builds through a named cache, never a key; a
scheduler that does not answer is a warning and local compiles; a missing or unreadable token
file and a bad URL are errors that name the setting; the toolchain archive is packed from the
build's own compiler. The settings' parsing is scripts/dist_relay_test.py's; a real farm,
a server lost and a scheduler down are tests/e2e/sccache_dist_test.py's."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from types import SimpleNamespace
from typing import List, Tuple

import pytest
from pants.engine.addresses import Address
from pants.engine.fs import EMPTY_DIGEST
from pants.engine.internals.scheduler import ExecutionError
from pants.engine.process import FallibleProcessResult
from pants.testutil.rule_runner import QueryRule, RuleRunner

from e2e.local_server import free_port  # a port nothing listens on: a server that is down
from rocm_build.caches import sccache_dist
from rocm_build.caches.sccache_dist import FARM_CACHE, DistToolchain, DistToolchainRequest, SccacheFarm, pack_dist_toolchain
from rocm_build.errors import RocmBuildError
from rocm_build.sandbox_scripts import SCRIPTS_DIR
from rocm_build.testutil.engine import Asked, drive
from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner
from rocm_build.toolchain.rocm_sdk import ResolvedToolchain

OPTION = "[sccache] dist_scheduler_url (PANTS_SCCACHE_DIST_SCHEDULER_URL)"
TOKEN = "s3cret-token"


@pytest.fixture
def named(tmp_path: Path) -> Path:
    return tmp_path / "named"


@pytest.fixture
def rule_runner(named: Path) -> RuleRunner:
    return isolated_rule_runner(
        rules=[*sccache_dist.rules(), QueryRule(SccacheFarm, [])],
        named_caches=named,
    )


def farm(rule_runner: RuleRunner, *options: str) -> SccacheFarm:
    rule_runner.set_options(list(options))
    return rule_runner.request(SccacheFarm, [])


def test_a_scheduler_that_does_not_answer_is_a_warning_and_the_token_stays_in_a_private_file(
    rule_runner: RuleRunner, named: Path, tmp_path: Path, caplog
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(f"{TOKEN}\n")
    url = f"http://127.0.0.1:{free_port()}"
    found = farm(rule_runner, f"--sccache-dist-scheduler-url={url}", f"--sccache-dist-token-file={token_file}")
    assert (found.shown, found.servers) == (url, 0)
    assert found.problem.startswith("cannot connect: [Errno 111] Connection refused")
    assert f"sccache-dist scheduler {url} ({OPTION}) cannot be used: cannot connect" in caplog.text
    assert caplog.text.rstrip().endswith("Builds compile locally.")
    assert TOKEN not in caplog.text
    stored = named / FARM_CACHE / "dist.json"
    assert json.loads(stored.read_text())["token"] == TOKEN
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    # No farm: the settings go, and builds compile locally without a word.
    caplog.clear()
    assert farm(rule_runner) == SccacheFarm("", 0, "")
    assert not stored.exists() and caplog.text == ""


def errors(rule_runner: RuleRunner, named: Path, *options: str) -> List[str]:
    with pytest.raises(ExecutionError) as raised:
        farm(rule_runner, *options)
    assert all(isinstance(e, RocmBuildError) for e in raised.value.wrapped_exceptions)
    return [str(e) for e in raised.value.wrapped_exceptions]


def test_the_token_file_and_the_url_are_checked_naming_the_setting(rule_runner: RuleRunner, named: Path, tmp_path: Path) -> None:
    url = "--sccache-dist-scheduler-url=http://farm.example:10600"
    assert errors(rule_runner, named, url) == [
        f"{OPTION} is set but [sccache] dist_token_file is not: name the file that holds the farm's client token."
    ]
    missing = tmp_path / "no-token"
    assert errors(rule_runner, named, url, f"--sccache-dist-token-file={missing}") == [
        f"[sccache] dist_token_file: cannot read {missing}: No such file or directory."
    ]
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    bad = "--sccache-dist-scheduler-url=http://me:pw@farm.example:10600"
    assert errors(rule_runner, named, bad, f"--sccache-dist-token-file={token_file}") == [
        f"{OPTION}: the URL carries credentials; give the token in the token file."
    ]


TOOLCHAIN = ResolvedToolchain(Address("toolchains", target_name="rocm"), "rocm", "rocm 7.1.0\nclang version 20", "rocm7.1", "rocm_toolchain_ab12")


def packing(exit_code: int) -> Tuple[object, Asked]:
    """pack_dist_toolchain driven with its process answering `exit_code`: (its result or error, what it asked)."""
    tools = SimpleNamespace(python=SimpleNamespace(path="/usr/bin/python3"))
    said = b"tar: .rocm/root/lib/llvm/bin/clang: Cannot open\n"

    def answer(output_type: type, asked: object) -> object:
        if output_type is FallibleProcessResult:
            return SimpleNamespace(exit_code=exit_code, stderr=said, output_digest=EMPTY_DIGEST)
        return EMPTY_DIGEST

    try:
        return drive(pack_dist_toolchain(DistToolchainRequest(TOOLCHAIN), tools), answer)
    except RocmBuildError as e:
        return e, []


def test_the_toolchain_is_packed_from_its_compiler_in_its_own_cache_and_a_failure_names_it() -> None:
    result, asked = packing(0)
    assert result == DistToolchain(EMPTY_DIGEST)
    (process,) = [a for t, a in asked if t is FallibleProcessResult]
    # The compiler relative to the toolchain's root, which the toolchain's named cache mounts at .rocm.
    assert process.argv == (
        "/usr/bin/python3", f"{SCRIPTS_DIR}/dist_toolchain.py", "pack", ".rocm/root", "lib/llvm/bin/clang", ".sccache-toolchain"
    )  # fmt: skip
    assert dict(process.append_only_caches) == {"rocm_toolchain_ab12": ".rocm"}
    assert process.output_directories == (".sccache-toolchain",)
    failed, _ = packing(3)
    assert str(failed) == (
        "toolchains:rocm: packing its compiler for sccache-dist's build servers failed (exit 3):\n"
        "    tar: .rocm/root/lib/llvm/bin/clang: Cannot open"
    )
