"""Real local git repositories for tests: the upstreams tests fetch from (file:// URLs)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Mapping

GIT_ENV = {
    "GIT_AUTHOR_NAME": "fixture",
    "GIT_AUTHOR_EMAIL": "fixture@example.invalid",
    "GIT_COMMITTER_NAME": "fixture",
    "GIT_COMMITTER_EMAIL": "fixture@example.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
}


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def init_repo(path: Path, branch: str = "main") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", branch)
    return path


def commit_files(repo: Path, files: Mapping[str, str], message: str = "update") -> str:
    """Writes the files, commits them and returns the new commit's full SHA."""
    for name, content in files.items():
        target = repo / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


# An upstream's setup.py and a patch to it as a patch set holds one (`git diff`'s form).
ARCHS_SETUP = "ARCHS = ['gfx90a']\n"
ARCHS_PATCH = """\
--- a/setup.py
+++ b/setup.py
@@ -1 +1 @@
-ARCHS = ['gfx90a']
+ARCHS = ['gfx90a', 'gfx1151']
"""


def pins_toml(**pins: Mapping[str, object]) -> str:
    out = []
    for name, fields in pins.items():
        out.append(f"[{name}]")
        for key, value in fields.items():
            rendered = ("true" if value else "false") if isinstance(value, bool) else f'"{value}"'
            out.append(f"{key} = {rendered}")
        out.append("")
    return "\n".join(out)


def commit_gitlink(repo: Path, path: str, url: str, commit: str = "1" * 40, message: str = "add a submodule") -> str:
    """Commits a submodule entry (a gitlink and its .gitmodules section) with any URL, even one
    `git submodule add` refuses: how a hostile upstream looks to a fetch."""
    with open(repo / ".gitmodules", "a") as f:
        f.write(f'[submodule "{path}"]\n\tpath = {path}\n\turl = {url}\n')
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{commit},{path}")
    git(repo, "add", ".gitmodules")  # not `add -A`: the gitlink has no directory to keep it
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")
