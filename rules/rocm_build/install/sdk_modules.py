"""Python modules that TheRock's SDK ships inside its own wheels instead of on an index.

A `runtime_requirements` entry naming one of these is not locked from PyPI: the install set
says how to install it from the SDK already in the venv. The table is data, with where each
fact was read; check it again when the SDK's packaging moves.

amdsmi (vLLM picks its ROCm platform through it; without it vLLM falls back to an unspecified
platform without an error):
- TheRock's index has no `amdsmi` project: `build_tools/packaging/python/rocm_whl_next_ownership.yaml`
  at TheRock 89553ce3 (2026-08-22) lists none. The Python module is payload of rocm-sdk-core, at
  `<site-packages>/_rocm_sdk_core/share/amd_smi/amdsmi`, not installed as a top-level package
  (ROCm/rocm-systems#11452, 2026-09-10: "In a fresh venv the CLI works and `import amdsmi`
  raises `ModuleNotFoundError`"; ROCm/TheRock#3054, open; rocm-systems#7091's test plan
  installs it with `pip install .` from that directory).
- PyPI's `amdsmi` (newest 7.0.2, community-built from ROCm 7.0.2's py-interface) is a
  py3-none-any wheel with no library: its ctypes bindings, generated from 7.0.2's header, load
  an unversioned `libamd_smi.so` from `$ROCM_HOME`/`$ROCM_PATH`/lib, the loader path or
  /opt/rocm/lib (read in amdsmi-7.0.2-py3-none-any.whl, `amdsmi_wrapper.py`). rocm-sdk-core
  ships only SONAME-versioned libraries, and AMD's packaging page lists "community-built PyPI
  amdsmi releases through 7.0.2" as "requires a matching ROCm libamd_smi.so"
  (rocm.docs.amd.com/projects/amdsmi/en/docs-10.2.0/packaging.html): not usable with a
  ROCm 10 SDK.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence, Tuple

from rocm_build.errors import RocmBuildError

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


@dataclass(frozen=True)
class SdkModule:
    wheel: str  # the SDK wheel that ships it
    tree: str  # its installable source tree, relative to site-packages
    source: str  # where that is documented


SDK_MODULES = {
    "amdsmi": SdkModule("rocm-sdk-core", "_rocm_sdk_core/share/amd_smi", "ROCm/rocm-systems#11452, ROCm/TheRock#3054"),
}


def project_name(requirement: str) -> str:
    """The normalized project name of a requirement line (PEP 503)."""
    m = _NAME.match(requirement)
    return re.sub(r"[-_.]+", "-", m.group(1)).lower() if m else ""


def index_requirements(owner: str, requirements: Sequence[str]) -> Tuple[str, ...]:
    """The requirements that are locked from an index: every one but the SDK's modules."""
    for line in requirements:
        if not project_name(line) or line.split()[0].startswith("-"):
            raise RocmBuildError(
                f"{owner}: `runtime_requirements` entry {line!r} is not a requirement (a project name with "
                "an optional version specifier, e.g. `einops>=0.8`; no pip options or -r files)"
            )
    return tuple(line for line in requirements if project_name(line) not in SDK_MODULES)


def sdk_requirements(owner: str, requirements: Sequence[str]) -> Tuple[str, ...]:
    """The SDK's modules among the requirements, by name (the SDK's version is the toolchain's)."""
    found = []
    for line in requirements:
        name = project_name(line)
        if name in SDK_MODULES:
            if line.strip() != name:
                raise RocmBuildError(
                    f"{owner}: `runtime_requirements` entry {line!r}: {name} comes with TheRock's "
                    f"{SDK_MODULES[name].wheel}, whose version is the SDK's; name it without a version."
                )
            found.append(name)
    return tuple(found)
