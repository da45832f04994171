"""The preflight's third check: do the torch and triton an upstream names agree with the chain's?

The chain's versions are what its rocm_wheel dependencies build (a recipe's
PYTORCH_BUILD_VERSION / TRITON_WHEEL_VERSION, else the pin's version) and what its prebuilt
wheels pin; the upstream's are what scripts/tree_scan.py found in its CMake, pyproject.toml,
setup.py and the requirement files its recipe reads (vLLM's `TORCH_SUPPORTED_VERSION_ROCM`,
`torch==X`). Only releases are compared: 2.13.0+rocm10.0.0 agrees with 2.13.0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

from pants.engine.addresses import Address
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.prebuilt import wheel_rules as prebuilt_rules
from rocm_build.prebuilt.wheel_rules import PrebuiltRequest, PrebuiltSpec
from rocm_build.wheel import build_spec
from rocm_build.wheel.build_spec import WheelBuildSpec, WheelRequest
from rocm_build.wheel.kinds import KINDS, by_project, by_version_var
from rocm_build.wheel.recipe_paths import named_paths

# Versions a chain's torch and triton come as: the dependency's kind, and the variable its
# recipe may set the version with (kinds.py).
CHAIN_PACKAGES = by_version_var()
# A prebuilt wheel's project -> the kind it is, where they differ (PyTorch's triton wheels).
KIND_OF_PROJECT = by_project()


def module_name(name: str) -> str:
    return re.sub(r"[-.]+", "_", name).lower()


@dataclass(frozen=True)
class ChainVersionsRequest:
    address: Address


@dataclass(frozen=True)
class ChainVersions:
    # (package, version, where the chain says it): torch and triton of the dependencies
    versions: Tuple[Tuple[str, str, str], ...]
    # module name -> the rocm_wheel dependency that provides it once built
    provided: Tuple[Tuple[str, str], ...]
    # (distribution, its version or "" where the chain does not know it, the target that
    # brings it): what an install set of this chain holds besides run-time locks
    dists: Tuple[Tuple[str, str, str], ...] = ()


@rule(desc="Reading the torch and triton a rocm_wheel chain builds or pins")
async def chain_versions(request: ChainVersionsRequest) -> ChainVersions:
    seen: Dict[Address, WheelBuildSpec] = {}
    queue = [request.address]
    prebuilt: List[Address] = []
    while queue:
        spec = await Get(WheelBuildSpec, WheelRequest(queue.pop()))
        for dep in spec.dependencies:
            if dep not in seen:
                seen[dep] = await Get(WheelBuildSpec, WheelRequest(dep))
                queue.append(dep)
        prebuilt += [p for p in spec.prebuilt if p not in prebuilt]
    versions: List[Tuple[str, str, str]] = []
    provided: Dict[str, str] = {}
    dists: Dict[str, Tuple[str, str]] = {}
    for dep in seen.values():
        kind, var = dep.kind, CHAIN_PACKAGES.get(dep.kind, "")
        version = _known(dep.env.get(var, dep.version))  # the recipe's variable, else the pin's
        for name in (dep.upstream.pin_name, kind, (KINDS[kind].dist if kind in KINDS else "") or "generic"):
            if name != "generic":
                provided.setdefault(module_name(name), dep.owner)
                dists.setdefault(module_name(name), (version, dep.owner))
        if var in dep.env:
            versions.append((kind, dep.env[var], f"{dep.owner} (`env` {var})"))
        elif var and not dep.version.startswith("0.0.0+"):
            versions.append((kind, dep.version, f"{dep.owner} (pin {dep.upstream.pin_name})"))
    pins = await MultiGet(Get(PrebuiltSpec, PrebuiltRequest(a, "the `dependencies` of a rocm_wheel")) for a in prebuilt)
    for pin in pins:
        name = module_name(pin.pin.project)
        dists[name] = (_known(pin.pin.version or exact_version(pin.pin.track)), pin.owner)
        package = KIND_OF_PROJECT.get(name, name)
        if package in CHAIN_PACKAGES and pin.pin.version:
            versions.append((package, pin.pin.version, f"prebuilt_wheel {pin.owner} ({pin.where})"))
    return ChainVersions(tuple(versions), tuple(sorted(provided.items())), tuple((n, v, o) for n, (v, o) in sorted(dists.items())))


def _known(version: str) -> str:
    """The version, or "" for the stand-in version_env.py gives a pin without one (0.0.0+g<sha>)."""
    return "" if version.startswith("0.0.0+") else version


def exact_version(track: str) -> str:
    """The version an unresolved pin's `track` allows alone ("==2.13.0+rocm10.0.0"), else ""."""
    match = re.fullmatch(r"\s*===?\s*([^\s*,;]+)\s*", track)
    return match.group(1) if match else ""


def release(version: str) -> str:
    """2.13.0+rocm7.14.0 -> 2.13.0, 2.13.0a0+gitabc -> 2.13.0: what must agree."""
    match = re.match(r"\d+(?:\.\d+)*", version)
    return match.group(0) if match else version


def version_findings(spec: WheelBuildSpec, where: str, scan: dict, chain: Sequence[Tuple[str, str, str]]) -> List[str]:
    """A requirement file counts when the recipe's `build_requirements` read it (`-r`); CMake,
    pyproject.toml and setup.py always do."""
    read = {p.path for p in named_paths(spec.requirements, (), "") if p.named_by.startswith("build_requirements")}
    problems = []
    for named in scan["versions"]:
        requirement_file = named["file"].endswith(".txt") and not named["file"].endswith("CMakeLists.txt")
        if requirement_file and named["file"] not in read:
            continue
        for package, version, said_by in chain:
            if package == named["name"] and release(named["version"]) != release(version):
                problems.append(
                    f"{spec.owner}: {named['file']} line {named['line']} ({where}) names {package} {named['version']} "
                    f"(`{named['text']}`), but the chain's {package} is {version} ({said_by}). Fix: move one of the "
                    "pins so they agree, or patch the line if upstream's is wrong."
                )
    return problems


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *prebuilt_rules.rules(), *build_spec.rules()])
