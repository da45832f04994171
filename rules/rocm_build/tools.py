"""Host tools the rules run (git, bash, python3), found at fixed system locations.

The tool's path is part of every cache key that uses it, so we only look in the standard
system directories, which are the same on every machine of a kind; `--version` output
goes into the key too, so a different git or python gives a different key.
"""

from __future__ import annotations

from dataclasses import dataclass

from pants.core.util_rules.system_binaries import (
    BinaryPath,
    BinaryPathRequest,
    BinaryPaths,
    BinaryPathTest,
)
from pants.engine.process import Process, ProcessCacheScope, ProcessResult
from pants.engine.rules import Get, collect_rules, rule

from rocm_build.errors import RocmBuildError

SYSTEM_DIRS = ("/usr/bin", "/bin", "/usr/local/bin")


@dataclass(frozen=True)
class HostTools:
    git: BinaryPath
    bash: BinaryPath
    python: BinaryPath


async def _find(name: str, why: str, install: str) -> BinaryPath:
    paths = await Get(
        BinaryPaths,
        BinaryPathRequest(
            binary_name=name, search_path=SYSTEM_DIRS, test=BinaryPathTest(["--version"])
        ),
    )
    if not paths.first_path:
        raise RocmBuildError(
            f"`{name}` was not found in {', '.join(SYSTEM_DIRS)}; it is needed {why}. "
            f"Install it: {install}"
        )
    return paths.first_path


@rule
async def find_host_tools() -> HostTools:
    git = await _find("git", "to fetch upstream sources and apply patches", "apt-get install git")
    bash = await _find("bash", "to run builds", "apt-get install bash")
    python = await _find(
        "python3", "to apply anchored edits and build wheels", "apt-get install python3 python3-venv"
    )
    return HostTools(git=git, bash=bash, python=python)


@dataclass(frozen=True)
class BuildPython:
    """The interpreter wheels are built with: its path runs it, its identity goes into keys."""

    path: str
    implementation: str  # e.g. CPython
    version: str  # e.g. 3.11.2

    @property
    def identity(self) -> str:
        return f"{self.implementation} {self.version}"

    @property
    def major_minor(self) -> str:
        return ".".join(self.version.split(".")[:2])


@rule
async def find_build_python(tools: HostTools) -> BuildPython:
    result = await Get(
        ProcessResult,
        Process(
            argv=(tools.python.path, "-c", "import platform; print(platform.python_implementation(), platform.python_version())"),
            description=f"Asking {tools.python.path} for its version",
            # Machine state: re-asked by each new pantsd, never shared.
            cache_scope=ProcessCacheScope.PER_RESTART_SUCCESSFUL,
        ),
    )
    implementation, version = result.stdout.decode().split()
    return BuildPython(tools.python.path, implementation, version)


def rules():
    return collect_rules()
