"""The preflight's report, as `rocm-plan --check` prints it and `pants check` shows it.

For the chains of the given rocm_wheel targets: one line per component (ok, skip or FAIL with
each problem, from checks/preflight.py's checks). Both goals call `component_report`, so they
cannot disagree. `pants check` judges sources, pins, locks and recipes only; `rocm-plan
--check` also checks the install sets of the targets on its command line that an earlier
`package` left in dist/ (`installed_set_report`: goal rules alone read dist/).
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Tuple

from pants.base.build_root import BuildRoot
from pants.engine.addresses import Address
from pants.engine.fs import CreateDigest, Digest, FileContent
from pants.engine.rules import Get, MultiGet
from pants.engine.target import WrappedTarget, WrappedTargetRequest
from pants.option.global_options import GlobalOptions

from rocm_build.errors import RocmBuildError
from rocm_build.install.load_check import CheckedInstallSet, InstallSetCheckRequest, SetWheel
from rocm_build.install.runtime_set import RuntimeSet, RuntimeSetRequest
from rocm_build.wheel.build_spec import WheelBuildSpec, dist_dir
from rocm_build.wheel.built_wheel import BuiltWheel
from rocm_build.wheel.chain_order import WheelChain, WheelChainRequest
from rocm_build.checks.findings import ComponentStatus, Findings
from rocm_build.checks.shared_patch_sets import SharedPatchSetsRequest
from rocm_build.checks.preflight import QuickCheck, TreeCheck
from rocm_build.wheel.target_types import RocmWheelTarget


@dataclass(frozen=True)
class PreflightReport:
    lines: Tuple[str, ...]
    problems: int  # how many; the goals fail when there is any

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def dist_path(global_options: GlobalOptions) -> Path:
    return Path(BuildRoot().path, global_options.pants_distdir)


async def chain_specs(addresses: Iterable[Address], goal: str) -> List[WheelBuildSpec]:
    """The rocm_wheel chains of the given targets, in build order, each component once."""
    roots = tuple(addresses)
    wrapped = await MultiGet(Get(WrappedTarget, WrappedTargetRequest(a, goal)) for a in roots)
    wheels = [w.target.address for w in wrapped if isinstance(w.target, RocmWheelTarget)]
    chains = await MultiGet(Get(WheelChain, WheelChainRequest(a)) for a in wheels)
    specs = list({s.address: s for chain in chains for s in chain.specs}.values())
    if not specs:
        raise RocmBuildError(f"{goal}: give it rocm_wheel targets, e.g. `pants {goal} components/vllm:wheel`")
    return specs


async def component_report(specs: List[WheelBuildSpec]) -> PreflightReport:
    """One line per component (ok, skip or FAIL with its problems), then the verdict."""
    quick = await MultiGet(Get(ComponentStatus, QuickCheck(s.address)) for s in specs)
    trees = await MultiGet(Get(ComponentStatus, TreeCheck(s.address)) for s in specs)
    # Each source's patch sets on the other sources that apply them (a report's check, not a
    # build's: checks/shared_patch_sets.py); a source of the report is tried on its own line.
    checked = tuple(s.upstream.address for s in specs)
    shared = await MultiGet(Get(Findings, SharedPatchSetsRequest(a, checked)) for a in checked)
    lines: List[str] = []
    first_owner: Dict[str, str] = {}  # each distinct problem -> the component it was listed under
    for q, t, sh in zip(quick, trees, shared):
        problems = (*q.problems, *t.problems, *sh.problems)
        if q.skipped:
            lines.append(f"skip  {q.owner}: {q.skipped}")
        elif problems:
            lines.append(f"FAIL  {q.owner}")
            for p in problems:
                # A toolchain shared by the chain fails the same way for each: say it once.
                if p in first_owner:
                    lines.append(f"      - as for {first_owner[p]}: {p.splitlines()[0][:90]}...")
                else:
                    lines.append(f"      - {p}")
                    first_owner[p] = q.owner
        else:
            lines.append(f"ok    {q.owner}  ({t.summary}{sh.summary})")
        lines += [f"      note: {n}" for n in t.notes]
    skipped = sum(1 for q in quick if q.skipped)
    count = len(first_owner)
    if count:
        verdict = f"{count} problem(s): fix them before building."
    elif skipped:
        verdict = f"{len(specs) - skipped} component(s) ok, {skipped} skipped."
    else:
        verdict = f"all {len(specs)} component(s) ok."
    return PreflightReport((*lines, verdict), count)


def _set_wheels(install: Path) -> List[Tuple[str, bytes, bool]]:
    """(name, bytes, built by the chain) of each wheel of an install set in dist/: a wheel whose
    rocm_build_info.json names no prebuilt source had its GPU code audited when it was built."""
    found = []
    for path in sorted((install / "wheels").glob("*.whl")):
        with zipfile.ZipFile(path) as wheel:
            info = next((n for n in wheel.namelist() if n.endswith(".dist-info/rocm_build_info.json")), None)
            built = info is not None and "prebuilt" not in json.loads(wheel.read(info)).get("source", {})
        found.append((path.name, path.read_bytes(), built))
    return found


async def installed_set_report(roots: Iterable[Address], specs: List[WheelBuildSpec], dist: Path) -> PreflightReport:
    """The load check `package` runs, on each install set of `roots` already in dist/. It reads
    dist/, which only a goal rule may do: `rocm-plan --check` calls it, `pants check` does not."""
    gpu_targets = tuple(dict.fromkeys(t for s in specs for t in s.gpu_targets))
    lines, count = [], 0
    for root in roots:
        install = dist / f"{dist_dir(root)}.install"
        wheels = _set_wheels(install) if install.is_dir() else []
        if not wheels:
            continue
        digests = await MultiGet(Get(Digest, CreateDigest([FileContent(name, data)])) for name, data, _ in wheels)
        set_wheels = tuple(SetWheel(BuiltWheel(d, name), name, built) for d, (name, _, built) in zip(digests, wheels))
        chain = tuple(s.address for s in specs)
        sdk = (await Get(RuntimeSet, RuntimeSetRequest(root.spec, chain))).sdk_install
        checked = await Get(CheckedInstallSet, InstallSetCheckRequest(root.spec, set_wheels, gpu_targets, chain, sdk))
        where = install.relative_to(dist.parent) if dist.parent in install.parents else install
        if checked.problems:
            lines += [f"FAIL  install set {where}", *(f"      - {p}" for p in checked.problems)]
        else:
            lines.append(f"ok    install set {where}  ({checked.summary()})")
        lines += [f"      note: {n}" for n in checked.notes]
        count += len(checked.problems)
    return PreflightReport(tuple(lines), count)
