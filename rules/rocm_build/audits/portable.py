"""Which manylinux policy a built wheel meets, by `auditwheel show` (PyPI's auditwheel).

A wheel built in a glibc-2.42 image may not load on a glibc-2.39 host; auditwheel reads the
versioned symbols and the shared libraries the wheel's ELF files need and names the most
portable platform tag the wheel is consistent with. Where that is a manylinux tag the wheel
is tagged with it (nothing is grafted in: a wheel that needs libraries outside the policy,
such as the ROCm runtime, is consistent only with `linux_*` and keeps that tag). The policy
goes into `rocm_build_info.json` either way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Tuple

from pants.backend.python.subsystems.python_tool_base import PythonToolBase
from pants.backend.python.target_types import ConsoleScript
from pants.backend.python.util_rules import pex
from pants.backend.python.util_rules.pex import PexRequest, VenvPex, VenvPexProcess
from pants.engine.fs import Digest
from pants.engine.process import Process, ProcessResult
from pants.engine.rules import Get, collect_rules, rule
from pants.util.frozendict import FrozenDict
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.subsystems.host_tools import REMOTE_CACHE_FIRST_MILLIS
from rocm_build.wheel.built_wheel import BuiltWheel

_TAG = re.compile(r'consistent\s+with\s+the\s+following\s+platform\s+tag:\s+"([^"]+)"')


class Auditwheel(PythonToolBase):
    options_scope = "auditwheel"
    name = "auditwheel"
    help = "auditwheel (https://github.com/pypa/auditwheel): the manylinux policy each built wheel meets."
    default_version = "auditwheel==6.8.2"
    # The same venv runs scripts/elf_links.py and scripts/gpu_code.py, whose kpack reader
    # (scripts/kpack.py) reads TheRock's split device code: msgpack for the table of contents,
    # zstandard for its frames.
    default_extra_requirements = ["msgpack==1.1.0", "zstandard==0.23.0"]
    default_main = ConsoleScript("auditwheel")
    default_requirements = ["auditwheel>=6,<7"]
    register_interpreter_constraints = True
    default_interpreter_constraints = ["CPython>=3.10,<3.14"]
    # The tool's built-in lock, shipped beside this module (a `resource` in ./BUILD): Pants 2.17
    # to 2.31 refuse a tool without one, 2.22+ read it while registering options (the help names
    # its auditwheel version), and with `install_from_resolve` unset the tool installs from it.
    # This repository's `auditwheel` resolve (pants.toml) is this same file: `pants
    # generate-lockfiles --resolve=auditwheel` regenerates it.
    default_lockfile_resource = ("rocm_build.audits", "auditwheel.lock")


@dataclass(frozen=True)
class PlatformPolicy:
    tag: str  # e.g. manylinux_2_28_x86_64, or linux_x86_64 when no policy holds; `any` if pure

    @property
    def manylinux(self) -> bool:
        return self.tag.startswith(("manylinux", "musllinux"))

    def to_json(self) -> dict:
        # The tool is pinned by the lock of its resolve ([auditwheel].install_from_resolve).
        if self.tag == "any":
            return {"tag": "any", "by": "wheel file name (pure Python: nothing for auditwheel to check)"}
        return {"tag": self.tag, "by": "auditwheel show"}


@dataclass(frozen=True)
class AuditwheelPythonProcess:
    """One of our scripts (rules/rocm_build/scripts/) run by the Python of auditwheel's venv,
    which has pyelftools, msgpack and zstandard: elf_links.py, gpu_code.py."""

    argv: Tuple[str, ...]  # the script's path in the sandbox, then its arguments
    input_digest: Digest  # the script, what it imports, what it reads
    description: str
    env: FrozenDict[str, str] = FrozenDict()


@rule(desc="Running a script with the Python of auditwheel's venv", level=LogLevel.DEBUG)
async def auditwheel_python_process(request: AuditwheelPythonProcess, auditwheel: Auditwheel) -> Process:
    pex = await Get(VenvPex, PexRequest, auditwheel.to_pex_request())
    process = await Get(
        Process,
        VenvPexProcess(
            pex, argv=request.argv, input_digest=request.input_digest, description=request.description,
            level=LogLevel.DEBUG, extra_env=request.env,
        ),
    )  # fmt: skip
    # The venv's python, not its auditwheel entry point, runs the script.
    return replace(process, argv=(pex.python.argv0, *process.argv[1:]))


def policy_tag(report: str) -> str:
    found = _TAG.search(report)
    if not found:
        raise ValueError(f"auditwheel said no platform tag:\n{report}")
    return found.group(1)


@rule(desc="Checking a wheel's manylinux policy", level=LogLevel.DEBUG)
async def check_platform_policy(request: BuiltWheel, auditwheel: Auditwheel) -> PlatformPolicy:
    if request.wheel_name[: -len(".whl")].endswith("-any"):
        # A pure wheel has no ELF files; `auditwheel show` exits 1 on it ("This does not
        # look like a platform wheel").
        return PlatformPolicy("any")
    pex = await Get(VenvPex, PexRequest, auditwheel.to_pex_request())
    process = await Get(
        Process,
        VenvPexProcess(
            pex,
            argv=("show", request.wheel_name),
            input_digest=request.wheel,
            description=f"auditwheel show {request.wheel_name}",
            level=LogLevel.DEBUG,
        ),
    )
    # The input is a wheel: with a remote cache, ask it before pulling the wheel for a local run.
    result = await Get(ProcessResult, Process, replace(process, remote_cache_speculation_delay_millis=REMOTE_CACHE_FIRST_MILLIS))
    return PlatformPolicy(policy_tag(result.stdout.decode()))


@memoized
def rules():
    # The pex rules come with Pants' Python backend; listed so that rule sets without it (the
    # plugin's RuleRunner tests) still have what auditwheel's venv needs.
    return FrozenOrderedSet([*collect_rules(), *pex.rules()])
