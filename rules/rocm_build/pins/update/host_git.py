"""git on this host, for the programs that move pins and edit patches (update-pins,
patch-workspace): only the schemes the pin allows (scripts/git_urls.py), isolated from the
caller's git (isolated_git.py: no GIT_* of theirs, no config, no hooks, no prompt), tokens
redacted from what it says; and UpdateError, how they fail."""

from __future__ import annotations

import os
import subprocess
from typing import Optional

from rocm_build.isolated_git import run_git
from rocm_build.scripts import git_urls as GIT_URLS


class UpdateError(Exception):
    """A failure that leaves the pins file untouched; the message says what to do."""


def git(*args: str, cwd: Optional[str] = None, pin_url: str = "") -> subprocess.CompletedProcess:
    """git on this host, with only the schemes the pin allows (scripts/git_urls.py)."""
    allowed = GIT_URLS.git_protocol_allow(GIT_URLS.schemes_for(pin_url))
    result = run_git(args, cwd=cwd, env={"GIT_ALLOW_PROTOCOL": allowed})
    # What these programs read of git is refs, SHAs and its messages: text.
    return subprocess.CompletedProcess(
        result.args, result.returncode, result.stdout.decode(errors="replace"), result.stderr.decode(errors="replace")
    )


def redact(text: str) -> str:
    token = os.environ.get("GITHUB_TOKEN")
    return GIT_URLS.redact(text.replace(token, "***") if token else text)


def checkout(pin_name: str, url: str, commit: str, dest: str) -> None:
    steps = [
        ("init", "-q", "--", dest),
        ("-C", dest, "fetch", "-q", "--depth", "1", "--", url, commit),
        ("-C", dest, "checkout", "-q", "--detach", "FETCH_HEAD", "--"),
    ]
    for step in steps:
        result = git(*step, pin_url=url)
        if result.returncode != 0:
            raise UpdateError(
                f"[{pin_name}] cannot fetch {commit} from {url}: {redact(result.stderr.strip())}; "
                "the pins file was not changed."
            )
