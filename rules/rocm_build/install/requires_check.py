"""The preflight's check that a component's wheel will find at run time what it will require.

The upstream's metadata hook (scripts/metadata_hook.py) says, before any compile, the
Requires-Dist lines the wheel will carry (markers evaluated by the build's interpreter). The
install set satisfies one when the chain provides the distribution (a rocm_wheel or prebuilt
wheel below it: chain_versions.ChainVersions.dists) or when the `runtime_requirements` of the
chain ask for it with the same specifier (then its run-time lock pins a version that meets
it). Otherwise `pip install --require-hashes` of the install set would fail hours later, or
the lock would pin a version the wheel refuses: vLLM's requirements/rocm.txt is its
Requires-Dist, and moving the pin can change it.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Sequence

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name


def _requirement(line: str) -> Requirement:
    try:
        return Requirement(line)
    except InvalidRequirement:
        return Requirement(line.split(";")[0].strip())


def requires_findings(
    owner: str,
    build_file: str,
    hook_file: str,
    requires_dist: Sequence[str],
    chain_dists: Iterable[str],
    runtime_lines: Sequence[str],
) -> List[str]:
    """A problem for each Requires-Dist line the install set would not satisfy."""
    provided = {canonicalize_name(name) for name in chain_dists}
    asked: Dict[str, List[Requirement]] = {}
    for line in runtime_lines:
        requirement = _requirement(line)
        asked.setdefault(canonicalize_name(requirement.name), []).append(requirement)
    problems = []
    fix = f"and relock: pants lock-runtime-requirements {owner}"
    for line in requires_dist:
        requirement = _requirement(line)
        name = canonicalize_name(requirement.name)
        if name in provided:
            continue
        said = asked.get(name)
        if not said:
            problems.append(
                f"{owner}: its wheel will require `{line}` (Requires-Dist, from the metadata hook of {hook_file}), which "
                f"its install set lacks: nothing in its chain provides {requirement.name} and no `runtime_requirements` "
                f"asks for it. Fix: add `{line}` to `runtime_requirements` in {build_file} {fix}"
            )
        elif not any(r.specifier == requirement.specifier and r.extras >= requirement.extras for r in said):
            asks = ", ".join(f"`{r}`" for r in said)
            problems.append(
                f"{owner}: its wheel will require `{line}` (Requires-Dist, from the metadata hook of {hook_file}), but the "
                f"`runtime_requirements` of its chain ask for {asks}, so its lock may pin a version the wheel refuses. "
                f"Fix: make the entry `{line}` in {build_file} {fix}"
            )
    return problems
