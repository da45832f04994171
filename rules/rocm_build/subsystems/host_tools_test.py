"""Which lookup finds each host tool, and what of it enters cache keys (host_tools.py)."""

from __future__ import annotations

import hashlib
import os
import subprocess

from pants.core.util_rules.system_binaries import BashBinary, GitBinary
from pants.testutil.rule_runner import QueryRule

from rocm_build.subsystems import host_tools
from rocm_build.subsystems.host_tools import _LINK_SCRIPT, SYSTEM_DIRS, HostTools
from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner


def first_in_system_dirs(name: str) -> str:
    return next(f"{d}/{name}" for d in SYSTEM_DIRS if os.access(f"{d}/{name}", os.X_OK))


def version_fingerprint(path: str) -> str:
    return hashlib.sha256(subprocess.run([path, "--version"], capture_output=True, check=True).stdout).hexdigest()


def test_bash_is_pants_own_and_git_and_python_carry_their_versions() -> None:
    rule_runner = isolated_rule_runner(
        rules=[*host_tools.rules(), QueryRule(HostTools, []), QueryRule(BashBinary, []), QueryRule(GitBinary, [])],
    )
    tools = rule_runner.request(HostTools, [])
    # bash: Pants' BashBinary, found as our lookup found it (first in the system directories,
    # fingerprinted by its --version), so the keys of processes that run it did not change.
    assert tools.bash == rule_runner.request(BashBinary, [])
    bash = first_in_system_dirs("bash")
    assert (tools.bash.path, tools.bash.fingerprint) == (bash, version_fingerprint(bash))
    # git: ours, because Pants' GitBinary has the same fingerprint for every git.
    pants_git = rule_runner.request(GitBinary, [])
    assert tools.git.path == pants_git.path == first_in_system_dirs("git")
    assert pants_git.fingerprint == hashlib.sha256().hexdigest()
    assert tools.git.fingerprint == version_fingerprint(tools.git.path)
    # python3: from the system directories, never a pyenv shim on PATH.
    python = first_in_system_dirs("python3")
    assert (tools.python.path, tools.python.fingerprint) == (python, version_fingerprint(python))


def test_links_made_at_once_into_one_named_cache_all_succeed(tmp_path) -> None:
    # Parallel builds link the same toolchain's cache: with one shared temporary name, one
    # `mv` moved the other's link away (`mv: cannot stat '.rocm/root.new'`).
    (tmp_path / "sdk").mkdir()
    runs = [
        subprocess.Popen(["bash", "-c", _LINK_SCRIPT, "link", str(tmp_path / "root"), str(tmp_path / "sdk")], stderr=subprocess.PIPE)
        for _ in range(40)
    ]
    failures = [r.stderr.read().decode() for r in runs if r.wait() != 0]
    assert failures == []
    assert os.readlink(tmp_path / "root") == str(tmp_path / "sdk")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root", "sdk"]  # no link left behind
