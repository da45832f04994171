"""isolated_git.py: what of the caller's environment reaches our git, and that every git the
plugin runs on the host goes through it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from rocm_build.isolated_git import HOOKS_OFF, isolated_env, local_env_vars, run_git

PLUGIN = Path(__file__).parent


def test_the_callers_git_variables_are_dropped_and_ours_set() -> None:
    caller = {
        "PATH": "/usr/bin:/bin", "HOME": "/home/u", "GIT_DIR": "/x/.git", "GIT_INDEX_FILE": "/x/.git/index",
        "GIT_WORK_TREE": "/x", "GIT_OBJECT_DIRECTORY": "/x/o", "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.hooksPath",
        "GIT_CONFIG_VALUE_0": "/h", "GIT_CONFIG_PARAMETERS": "'a.b'='c'", "GIT_DIFF_OPTS": "--unified=1",
        "GIT_CONFIG_GLOBAL": "/home/u/.gitconfig", "GIT_SSH_COMMAND": "ssh -i key",
    }  # fmt: skip
    assert isolated_env({"GIT_INDEX_FILE": "/tmp/ours"}, base=caller) == {
        "PATH": "/usr/bin:/bin", "HOME": "/home/u", "GIT_SSH_COMMAND": "ssh -i key",  # how to reach a host: theirs
        "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_INDEX_FILE": "/tmp/ours",
    }  # fmt: skip
    # What this git itself lists is dropped, also a name our list lacks.
    asked = subprocess.run(["git", "rev-parse", "--local-env-vars"], capture_output=True, text=True, cwd="/").stdout.split()
    assert set(asked) <= local_env_vars() and "GIT_DIR" in asked


def test_hooks_are_off_whatever_the_config_says(tmp_path: Path) -> None:
    repo, marker = tmp_path / "repo", tmp_path / "ran"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    hook = repo / ".git" / "hooks" / "post-commit"
    hook.write_text(f"#!/bin/sh\necho ran > {marker}\n")
    hook.chmod(0o755)
    ident = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    made = run_git(["-C", str(repo), "commit", "-q", "--allow-empty", "-m", "x"], env=ident)
    assert made.returncode == 0, made.stderr
    assert not marker.exists()
    assert HOOKS_OFF == ("-c", "core.hooksPath=/dev/null")


# `subprocess.run(["git", ...` or a `git` argv written out: only isolated_git.py starts git on
# the host. scripts/ runs in sandboxes, whose environment its rules give (no caller's GIT_*).
GIT_ARGV = re.compile(r"""\[\s*["']git["']\s*,""")


def test_every_host_git_goes_through_isolated_git() -> None:
    read = [
        path for path in sorted(PLUGIN.rglob("*.py"))
        if "scripts" not in path.relative_to(PLUGIN).parts and "testutil" not in path.relative_to(PLUGIN).parts
        and not path.name.endswith("_test.py") and path.name != "isolated_git.py"
    ]  # fmt: skip
    # The whole plugin is here (rules:tree), with the modules that run git.
    assert {"upstream/workspace_repo.py", "pins/update/host_git.py"} <= {str(p.relative_to(PLUGIN)) for p in read}
    starts = [
        f"{path.relative_to(PLUGIN)}:{number}"
        for path in read
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if GIT_ARGV.search(line)
    ]
    assert starts == []
    # It finds one where there is one.
    assert GIT_ARGV.search('subprocess.run(["git", "-C", dest])')
