"""The preflight's run of the upstream's own cheap steps, offline, before any compile.

Checks of a rocm_wheel's patched tree that the file checks (preflight.py) cannot make:

- the upstream's PEP 517 metadata hook (`prepare_metadata_for_build_wheel` of the backend its
  pyproject.toml names, else setuptools' legacy backend over setup.py), run by build_wheel.sh
  in the build's own sandbox: the same Process as the build (venv with the lock and the
  prebuilt dependency wheels, environment, network namespace), stopping before the build
  steps (scripts/metadata_hook.py). It catches a version lookup that needs `.git` and a build
  requirement the lock lacks.
- a scan of the tree for configure-time downloads (scripts/tree_scan.py, a process keyed by the
  tree alone): each hit is in a file `downloads_covered` maps to an override variable the
  recipe sets, or it is a problem naming file and line. A Cargo.lock is a download too (cargo
  fetches its crates) unless the recipe's `cargo_lock` names it (its crates are then
  fetched from it, cargo_crates.py); a Cargo.toml
  with no lock is unpinned.
- the torch/triton versions the upstream names, found by the same scan, against the chain's
  (chain_versions.py).
- the Requires-Dist lines the hook reports, against what the install set will hold: the
  chain's wheels and the `runtime_requirements` of the chain (install/requires_check.py).

The rocm_wheel dependencies are not built yet when this runs: a module or build requirement
that one of them provides (by pin name or `kind`) is a note, not a problem.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, replace
from typing import Dict, List, Tuple

from pants.engine.addresses import Address
from pants.engine.fs import CreateDigest, Digest, DigestContents, DigestSubset, FileContent, MergeDigests, PathGlobs
from pants.engine.process import FallibleProcessResult, Process
from pants.util.logging import LogLevel
from pants.engine.rules import Get, collect_rules, rule
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.checks.findings import TreeCheckRequest, EXPECTED_FAILURES, Findings, problem_text
from rocm_build.errors import RocmBuildError, indent, tail
from rocm_build.install import runtime_lock
from rocm_build.install.requires_check import requires_findings
from rocm_build.install.runtime_lock import ChainRuntimeRequirements, ChainRuntimeRequirementsRequest
from rocm_build.prepare import inputs as build_inputs
from rocm_build.rust.cargo_lock import CRATES_IO
from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_bytes
from rocm_build.scripts import tree_scan as TREE_SCAN
from rocm_build.upstream import tree_scan_rules
from rocm_build.upstream.tree_scan_rules import TreeScan, TreeScanRequest
from rocm_build.wheel import build_process
from rocm_build.wheel import chain_versions
from rocm_build.wheel.build_process import PreflightBuild, PreflightWheelRequest, WheelBuildRequest
from rocm_build.wheel.build_spec import NOT_RUN, WheelBuildSpec
from rocm_build.wheel.chain_versions import ChainVersions, ChainVersionsRequest, version_findings
from rocm_build.wheel.chain_versions import module_name
from rocm_build.wheel.recipe_paths import named_paths

HOOK_OUT = "out/preflight.json"
TAIL_LINES = 4


# ------------------------------------------------------------------------- the metadata hook


@dataclass(frozen=True)
class MetadataHookRequest:
    address: Address
    project: str  # the directory the wheel command builds, tree-relative ("" is the root)


@dataclass(frozen=True)
class MetadataHook:
    result: str  # metadata_hook.py's JSON


@rule(desc="Running an upstream's metadata hook in its build sandbox")
async def run_metadata_hook(request: MetadataHookRequest) -> MetadataHook:
    prepared = await Get(PreflightBuild, PreflightWheelRequest(request.address))
    build = await Get(Process, WheelBuildRequest, prepared.request)
    spec = prepared.request.spec
    hook = await Get(Digest, CreateDigest([FileContent(f"{SCRIPTS_DIR}/metadata_hook.py", script_bytes("metadata_hook.py"))]))
    # The build's own process, told to stop after the venv (build_wheel.sh): same sandbox,
    # environment and network; its log is kept apart from the build's.
    env = {**build.env, "ROCM_BUILD_PREFLIGHT": request.project or ".", "ROCM_BUILD_LOG_NAME": build.env["ROCM_BUILD_LOG_NAME"] + ".preflight"}
    if "ROCM_BUILD_CONTAINER_ENV" in env:  # in an image the switch must reach the container too
        env["ROCM_BUILD_CONTAINER_ENV"] = " ".join(sorted({*env["ROCM_BUILD_CONTAINER_ENV"].split(), "ROCM_BUILD_PREFLIGHT"}))
    process = replace(
        build,
        env=env,
        input_digest=await Get(Digest, MergeDigests([build.input_digest, hook])),
        description=f"Running the metadata hook of {spec.owner} (preflight, no compile)",
        timeout_seconds=900,
    )
    result = await Get(FallibleProcessResult, Process, process)
    if result.exit_code != 0:
        output = result.stdout.decode(errors="replace") + result.stderr.decode(errors="replace")
        raise RocmBuildError(
            f"{spec.owner}: the preflight could not run the metadata hook in the build's sandbox "
            f"(exit {result.exit_code}):\n{indent(tail(output, 8))}"
        )
    contents = await Get(DigestContents, DigestSubset(result.output_digest, PathGlobs([HOOK_OUT])))
    if not contents:
        output = result.stdout.decode(errors="replace") + result.stderr.decode(errors="replace")
        raise RocmBuildError(
            f"{spec.owner}: the preflight's metadata hook wrote no result ({HOOK_OUT}) in the build's sandbox; "
            f"its output ended:\n{indent(tail(output, 8))}"
        )
    return MetadataHook(contents[0].content.decode())


def hook_findings(spec: WheelBuildSpec, project: str, where: str, result: dict, provided: Dict[str, str]) -> Tuple[List[str], List[str]]:
    """(problems, notes) from metadata_hook.py's result. `provided`: module name -> the
    rocm_wheel dependency that provides it once built."""
    problems: List[str] = []
    notes: List[str] = []
    owner, build_file = spec.owner, f"{spec.address.spec_path}/BUILD"
    file = f"{project}/{result['file']}" if project else result["file"]
    for unmet in result["unmet_requires"]:
        name = module_name(unmet["name"])
        if name == "cmake":
            continue  # left to the system's (seed 000)
        if name in provided:
            notes.append(f"{file} build-system requires `{unmet['requirement']}`: {provided[name]} provides it (built first)")
            continue
        have = f"the lock has {unmet['name']} {unmet['installed']}" if unmet["installed"] else "the lock lacks it"
        problems.append(
            f"{owner}: {file} of {where} requires `{unmet['requirement']}` to build, but {have}. "
            f"Fix: add `{unmet['requirement']}` to `build_requirements` in {build_file} and relock: "
            f"pants lock-build-requirements {owner}"
        )
    if result["ok"]:
        return problems, notes
    last = indent("\n".join(result["tail"][-TAIL_LINES:]), "        ")
    module = result["missing_module"]
    if result["needs_git"]:
        pins = spec.upstream.pins_file
        current = f" (`version_env` = {list(spec.version_env)} did not reach it)" if spec.version_env else ""
        said = indent(result["git_said"], "        ")
        problems.append(
            f"{owner}: the metadata hook of {file} ({where}) needs `.git` to know its version, and a build's tree has "
            f"none{current}:\n{said}\n"
            f"      Fix: set `version_env` in {build_file} to the variable the upstream reads instead, e.g. "
            f"`version_env=[\"SETUPTOOLS_SCM_PRETEND_VERSION\"]`; it gets {spec.version} (the pin's version: "
            f"add `version = \"...\"` to [{spec.upstream.pin_name}] in {pins} if that is not it)."
        )
    elif module and module_name(module.split(".")[0]) in provided:
        notes.append(
            f"the metadata hook of {file} imports {module}, which {provided[module_name(module.split('.')[0])]} "
            "provides once built: checked by the build"
        )
    elif module:
        problems.append(
            f"{owner}: the metadata hook of {file} ({where}) cannot import {module}; it ended:\n{last}\n"
            f"      Fix: add the distribution that provides `{module}` to `build_requirements` in {build_file} "
            f"and relock: pants lock-build-requirements {owner}"
        )
    else:
        problems.append(f"{owner}: the metadata hook of {file} ({where}) failed; it ended:\n{last}")
    return problems, notes


# ---------------------------------------------------------------------------- the tree scan's findings


def runs_in_build(file: str, project: str) -> bool:
    """CMake files may be included from anywhere; a Python file counts where the build runs
    it: beside the project's setup.py, at the top, or in a top-level build directory (not the
    setup.py of another project in the tree, e.g. flash-attention's hopper/)."""
    if not file.endswith(".py"):
        return True
    directory = posixpath.dirname(file)
    return directory in ("", project) or file.split("/")[0] in TREE_SCAN.BUILD_DIRS


def download_findings(spec: WheelBuildSpec, where: str, scan: dict, project: str = "") -> Tuple[List[str], List[str]]:
    """(problems, notes): each download in a file `downloads_covered` does not cover, and each
    Cargo.lock that `cargo_lock` does not name."""
    owner, build_file = spec.owner, f"{spec.address.spec_path}/BUILD"
    set_by_recipe = {*spec.env, *(var for var, _ in spec.archives)}
    problems: List[str] = []
    notes: List[str] = []
    by_file: Dict[str, list] = {}
    for hit in scan["downloads"]:
        if not runs_in_build(hit["file"], project):
            continue
        if hit["what"] == "pip install":
            # Every build's pip finds only the lock's wheelhouse (PIP_NO_INDEX, build_wheel.sh):
            # not a download, but what it installs must be locked.
            notes.append(f"{hit['file']} line {hit['line']} runs pip (`{hit['text']}`): it installs from the lock's wheelhouse only")
            continue
        by_file.setdefault(hit["file"], []).append(hit)
    for file, hits in by_file.items():
        var = spec.downloads_covered.get(file)
        lines = "; ".join(f"line {h['line']} {h['what']}: `{h['text']}`" for h in hits)
        if var is not None and var.startswith(NOT_RUN):
            continue  # the recipe says why the build never gets there (e.g. a CUDA-only CMake file)
        if var is None:
            problems.append(
                f"{owner}: {file} ({where}) would download at build time, which a build cannot (no network): {lines}. "
                f"Fix: pin what it fetches (an upstream_archive in `archives`) and map the file to the variable "
                f"that makes it use that copy in `downloads_covered` in {build_file} (or `\"{NOT_RUN} <why>\"` where "
                "this build never reaches it), or patch the download out."
            )
        elif var not in set_by_recipe:
            problems.append(
                f"{owner}: `downloads_covered` maps {file} to {var}, but the recipe does not set {var}: add it to "
                f"`archives` (a pinned upstream_archive) or `env` in {build_file}."
            )
        elif var not in scan["env_vars"].get(file, []):
            problems.append(
                f"{owner}: `downloads_covered` maps {file} to {var}, but {file} ({where}) does not read {var}; "
                f"its downloads stay: {lines}. Fix the variable in {build_file}, or patch the download out."
            )
    cargo_problems, cargo_notes, cargo_files = cargo_findings(spec, where, scan.get("cargo", {}))
    problems += cargo_problems
    notes += cargo_notes
    for file in sorted(set(spec.downloads_covered) - set(by_file) - cargo_files):
        notes.append(f"`downloads_covered` names {file}, which downloads nothing at {where}: drop it")
    return problems, notes


def cargo_findings(spec: WheelBuildSpec, where: str, cargo: dict) -> Tuple[List[str], List[str], set]:
    """(problems, notes, the Cargo files seen): each Cargo.lock is the `cargo_lock` its crates are
    fetched from, and no Cargo.toml is without a lock, unless `downloads_covered` says cargo
    never runs there."""
    owner, build_file = spec.owner, f"{spec.address.spec_path}/BUILD"
    problems: List[str] = []
    notes: List[str] = []
    locks, unlocked = cargo.get("locks", []), cargo.get("unlocked", [])
    seen = {lock["file"] for lock in locks} | set(unlocked)
    not_run = {f for f in seen if spec.downloads_covered.get(f, "").startswith(NOT_RUN)}
    not_run_fix = f'(or `"{NOT_RUN} <why>"` for the file in `downloads_covered` where this build never runs cargo)'
    for lock in locks:
        if lock["file"] in not_run:
            continue
        crates = sum(lock["registries"].values())
        git = lock["git"]
        what = f"{crates} registry crate(s)" + (f" and {len(git)} git source(s)" if git else "")
        if spec.cargo_lock == lock["file"]:
            others = sorted(set(lock["registries"]) - set(CRATES_IO))
            problems += [
                f"{owner}: {lock['file']} ({where}) names crates of the registry {r!r}: only crates.io crates and git "
                f"sources are fetched from a lock. Fix: vendor them into the tree with a patch (and say so in "
                f"`downloads_covered` in {build_file})"
                for r in others
            ]
            notes.append(f"{lock['file']}: {what}, each fetched by its checksum or commit (`cargo_lock`; cargo offline)")
            continue
        sources = "".join(f"; line {g['line']} `{g['source']}`" for g in git)
        problems.append(
            f"{owner}: {lock['file']} ({where}) has cargo fetch {what} at build time, which a build cannot "
            f"(no network){sources}. Fix: name it in `cargo_lock` in {build_file} (each crate is then fetched by the "
            f"checksum or commit the lock gives) {not_run_fix}."
        )
    for manifest in unlocked:
        if manifest in not_run:
            continue
        problems.append(
            f"{owner}: {manifest} ({where}) is a Cargo manifest with no Cargo.lock in its directory or above: cargo "
            "would resolve its crates at build time, unpinned (and, with no network, fail). Fix: add the lock to the "
            f"tree with a patch (`cargo generate-lockfile` where crates.io is reachable) and name it in "
            f"`cargo_lock` in {build_file} {not_run_fix}."
        )
    if spec.cargo_lock and spec.cargo_lock not in {lock["file"] for lock in locks}:
        known = ", ".join(sorted(lock["file"] for lock in locks)) or "none"
        problems.append(f"{owner}: its `cargo_lock` {spec.cargo_lock!r} is not a Cargo.lock of {where} (its locks: {known}); fix it in {build_file}")
    return problems, notes, seen


# ---------------------------------------------------------------------------- the check


class UpstreamStepsCheck(TreeCheckRequest):
    pass


@rule(desc="Running a rocm_wheel upstream's own cheap steps", level=LogLevel.DEBUG)
async def check_upstream_steps(request: UpstreamStepsCheck) -> Findings:
    """The upstream's own cheap steps: its tree scanned for downloads and the torch/triton it
    names, then its metadata hook run in the build's sandbox."""
    spec, tree = request.spec, request.tree
    where = tree.where
    try:
        scan = json.loads((await Get(TreeScan, TreeScanRequest(tree.upstream.source, spec.owner))).result)
        chain = await Get(ChainVersions, ChainVersionsRequest(spec.address))
    except EXPECTED_FAILURES as e:
        return Findings.failed(e)
    projects = [p.path for p in named_paths(spec.requirements, spec.steps, spec.wheel_command) if p.is_project]
    problems, notes = download_findings(spec, where, scan, projects[0] if projects else "")
    problems += version_findings(spec, where, scan, chain.versions)
    if not projects:
        return Findings(tuple(problems), (*notes, f"metadata hook not run: the wheel command `{spec.wheel_command}` names no project directory"))
    try:
        hook = await Get(MetadataHook, MetadataHookRequest(spec.address, projects[0]))
    except EXPECTED_FAILURES as e:
        return Findings((*problems, problem_text(e)), tuple(notes))
    result = json.loads(hook.result)
    found, more_notes = hook_findings(spec, projects[0], where, result, dict(chain.provided))
    # What the wheel will require at run time, against what its install set will hold.
    runtime = await Get(ChainRuntimeRequirements, ChainRuntimeRequirementsRequest(spec.address))
    found += requires_findings(
        spec.owner, f"{spec.address.spec_path}/BUILD", f"{projects[0]}/{result['file']}".lstrip("/"), result["requires_dist"],
        [*(name for name, _, _ in chain.dists), *runtime.sdk], [*runtime.chain],
    )  # fmt: skip
    return Findings((*problems, *found), (*notes, *more_notes))


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        *build_inputs.rules(),
        *build_process.rules(),
        *tree_scan_rules.rules(),
        *chain_versions.rules(),
        *runtime_lock.rules(),
    ])
