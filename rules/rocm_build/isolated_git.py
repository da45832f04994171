"""The host's git as every tool of ours that runs it on the host runs it (the patch workspace,
update-pins, the patch checks): isolated from the git of whoever called us.

A caller's git reaches ours through the environment: inside a git hook `GIT_DIR` and
`GIT_INDEX_FILE` are set (a checkout then writes into the caller's repository, not ours), and
`GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n` or `GIT_CONFIG_PARAMETERS` (what
`git -c` hands its children) set any config, hooks and filters included. pantsd keeps the
environment it started with, so a daemon started from a hook carries them into every later
run: the environment is cleaned per call, not once. Every call also turns hooks off, so no hook
of a repository's own config runs either (the workspace is ours, but its `.git/config` is the
user's to edit).

Processes in Pants' sandboxes get only the environment their rule gives them, so the scripts
there (scripts/source_pack.py, scripts/apply_patches.py) need none of this; the one script the
host runs, apply_patches.py in the workspace, gets `isolated_env()` from its caller.

Standard library only: the engine-free modules (upstream/workspace_repo.py, programs/) use it.
"""

from __future__ import annotations

import functools
import os
import subprocess
from typing import Dict, Mapping, Optional, Sequence

# `git rev-parse --local-env-vars` of git 2.39 (the variables that point git at another
# repository, index or object store), kept here as well as asked for: a git that does not know
# one of them would not list it, and a caller's variable must still not reach it.
LOCAL_ENV_VARS = (
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
    "GIT_OBJECT_DIRECTORY", "GIT_DIR", "GIT_WORK_TREE", "GIT_IMPLICIT_WORK_TREE", "GIT_GRAFT_FILE",
    "GIT_INDEX_FILE", "GIT_NO_REPLACE_OBJECTS", "GIT_REPLACE_REF_BASE", "GIT_PREFIX",
    "GIT_INTERNAL_SUPER_PREFIX", "GIT_SHALLOW_FILE", "GIT_COMMON_DIR",
)  # fmt: skip
# Not in that list but as strong: config from the environment, and what changes the diffs we
# save (GIT_DIFF_OPTS=--unified=1 would write patches with one line of context).
ALSO_DROPPED = ("GIT_CONFIG_SYSTEM", "GIT_DIFF_OPTS", "GIT_EXTERNAL_DIFF", "GIT_ATTR_SOURCE", "GIT_CEILING_DIRECTORIES")
CONFIG_PAIR_PREFIXES = ("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_")
# Only the host's git itself: no system or user config (a user's diff.noprefix would change the
# patches we write), no prompt.
PINNED_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
# Before every command: no hook runs, whatever a config file says.
HOOKS_OFF = ("-c", "core.hooksPath=/dev/null")

# Asked once per process: cached by the function, no global rebound (free-threaded Python).
@functools.lru_cache(maxsize=None)
def _asked_git() -> frozenset:
    """What this git says points it elsewhere, asked once per process with none of them set."""
    listed = subprocess.run(
        ["git", "rev-parse", "--local-env-vars"], capture_output=True, cwd="/",
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **PINNED_ENV},
    )  # fmt: skip
    return frozenset(listed.stdout.decode(errors="replace").split()) if listed.returncode == 0 else frozenset()


def local_env_vars() -> frozenset:
    """What this git says points it elsewhere, with our own list."""
    return _asked_git() | frozenset(LOCAL_ENV_VARS)


def dropped(name: str) -> bool:
    return name in local_env_vars() or name in ALSO_DROPPED or name.startswith(CONFIG_PAIR_PREFIXES)


def isolated_env(extra: Optional[Mapping[str, str]] = None, base: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """`base` (this process's environment) without the caller's git, then `extra` (ours: a
    temporary index, an author, the schemes a pin allows)."""
    kept = {k: v for k, v in (os.environ if base is None else base).items() if not dropped(k)}
    return {**kept, **PINNED_ENV, **(extra or {})}


def run_git(
    args: Sequence[str], *, cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None, stdin: Optional[bytes] = None
) -> subprocess.CompletedProcess:
    """git `args` with hooks off in the isolated environment; stdout and stderr as bytes (a
    diff is bytes: a CRLF file's `\\r`, a Latin-1 file's text)."""
    return subprocess.run(["git", *HOOKS_OFF, *args], cwd=cwd, input=stdin, capture_output=True, env=isolated_env(env))
