"""An install set from dist/ installed as a user installs it: real pip, `--no-index
--require-hashes`, into a fresh venv of the set's Python, then Python run with `env.sh` sourced."""

from __future__ import annotations

import subprocess
from pathlib import Path

# pip and Python see nothing of this machine's configuration.
CLEAN_ENV = {"PIP_CONFIG_FILE": "/dev/null", "PATH": "/usr/bin:/bin"}


def python311() -> str:
    found = sorted(Path.home().glob(".pyenv/versions/3.11*/bin/python3.11"))
    return str(found[0]) if found else "python3.11"


def install_into_fresh_venv(install: Path, venv: Path) -> None:
    subprocess.run([python311(), "-m", "venv", str(venv)], check=True)
    installed = subprocess.run(
        [str(venv / "bin/python"), "-m", "pip", "install", "--disable-pip-version-check",
         "--no-index", "--find-links", "wheels", "--require-hashes", "-r", "requirements.txt"],
        cwd=install, env=CLEAN_ENV, capture_output=True, text=True,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr


def run_in_set(install: Path, venv: Path, code: str) -> subprocess.CompletedProcess:
    """`code` run by the venv's Python as a user runs it: env.sh sourced first."""
    return subprocess.run(
        ["bash", "-c", f'. ./env.sh && exec "{venv}/bin/python" -c "$0"', code],
        cwd=install, env=CLEAN_ENV, capture_output=True, text=True,
    )  # fmt: skip
