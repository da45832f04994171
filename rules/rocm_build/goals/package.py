"""`pants package <rocm_wheel>`: the wheel's whole chain to dist/, each wheel with its build
log under its target's directory, and the chain as one install set beside it."""

from __future__ import annotations

import json
import logging
import shlex
from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Sequence, Tuple

from pants.base.build_root import BuildRoot
from pants.core.goals.package import BuiltPackage, BuiltPackageArtifact, PackageFieldSet
from pants.core.util_rules import distdir
from pants.core.util_rules.distdir import DistDir
from pants.engine.engine_aware import EngineAwareReturnType
from pants.engine.fs import AddPrefix, CreateDigest, Digest, DigestEntries, FileContent, FileEntry, MergeDigests
from pants.engine.internals.session import RunId
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.unions import UnionRule
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet
from pants.util.logging import LogLevel

from rocm_build.build import build as wheel_build
from rocm_build.build.build import ChainWheelRequest
from rocm_build.checks import chain as chain_check
from rocm_build.checks.chain import ChainRequest, CheckedChain
from rocm_build.errors import RocmBuildError
from rocm_build.install import load_check, runtime_set
from rocm_build.install.box_check import CHECK_STEP, box_check_files
from rocm_build.install.load_check import CheckedInstallSet, InstallSetCheckRequest, SetWheel, wheels_of
from rocm_build.install.runtime_set import ENV_SCRIPT, RuntimeSet, RuntimeSetRequest, check_runtime_set, env_script, with_runtime_lines
from rocm_build.install.supply_chain import UV_STEP, supply_chain_files
from rocm_build.prepare.inputs import BuiltRocmWheel, is_prebuilt
from rocm_build.provenance import signing as provenance_signing
from rocm_build.provenance.signing import WheelWithProvenance
from rocm_build.subsystems.provenance import ProvenanceSubsystem
from rocm_build.wheel import chain_order
from rocm_build.wheel.build_spec import dist_dir
from rocm_build.wheel.built_wheel import BuiltWheel
from rocm_build.wheel.target_types import WheelSourceField
from rocm_build.goals.package_summary import (
    DistWheel,
    changed_folders,
    DistHashes,
    summary_lines,
    unwritable,
    unwritable_message,
    wheel_outcomes,
)

logger = logging.getLogger(__name__)

INSTALL_REQUIREMENTS = "requirements.txt"


@dataclass(frozen=True)
class RocmWheelFieldSet(PackageFieldSet):
    required_fields = (WheelSourceField,)

    source: WheelSourceField


def device_extras(sources: Iterable[Dict[str, str]]) -> Dict[str, Tuple[str, ...]]:
    """Host pin -> the extras its device wheels in the set stand for: torch[device-gfx1151]."""
    extras: Dict[str, Tuple[str, ...]] = {}
    for source in sources:
        if source.get("extra"):
            extras[source["device_of"]] = tuple(sorted({*extras.get(source["device_of"], ()), source["extra"]}))
    return extras


def requirement(wheel: BuiltRocmWheel, extras: Sequence[str]) -> str:
    """`name[extras]==version` of a wheel in the set."""
    name, version = (wheel.wheel_name or "").split("-")[:2]
    return f"{name}[{','.join(extras)}]=={version}" if extras else f"{name}=={version}"


@dataclass(frozen=True)
class InstallSetRequest:
    closure: Tuple[BuiltRocmWheel, ...]  # the chain, the target packaged last


@dataclass(frozen=True)
class InstallSet:
    digest: Digest
    loads: str  # what its check found (CheckedInstallSet.summary), for package's summary


# The install step of requirements.txt's header: one command, which works in a new venv and in
# one that holds an older set of the chain (each wheel rebuilt since has another version).
INSTALL_STEP = (
    "# then install, from this directory, into a new venv or over an older set in one (a wheel rebuilt since has a new "
    "version, which pip installs in place of the old):",
    "#   pip install --no-index --find-links wheels --require-hashes -r requirements.txt",
    *UV_STEP,
)


def prebuilt_steps(
    sources: Sequence[Tuple[BuiltRocmWheel, Dict[str, str]]], extras: Mapping[str, Tuple[str, ...]], outside: Mapping[str, Tuple[str, ...]]
) -> List[str]:
    """A step before the install command for each prebuilt host wheel that requires a project
    the set does not hold (TheRock's torch: rocm): it and what it requires, from its index. A
    prebuilt wheel whose requirements are all in wheels/ (the mini SDK) needs none: it is
    installed by hash with the rest. `outside`: the check's reading of each wheel's
    requirements on the set's interpreter (every wheel, pure-Python ones too: their
    requirements are read from METADATA as a platform wheel's are); a wheel it did not read is
    given its step, to be safe. A project the set lacks is in the `outside` of the wheel that
    requires it, so a wheel that needs only set wheels gets no step even when one of those
    does: that one's own step brings it. `sources`: each wheel with its build info's source;
    `extras`: device_extras of them."""
    steps = []
    for w, source in sources:
        if "prebuilt" not in source or "device_of" in source:
            continue
        needs = outside.get(w.wheel_name or "")
        if needs == ():
            continue
        steps.append(
            # What a prebuilt wheel itself requires (TheRock's torch: rocm[libraries]) is not
            # part of the chain: it comes from the wheel's own index, installed first.
            f"# then, the prebuilt {(w.wheel_name or '').split('-')[0]} and what it requires, from its index: pip install --index-url "
            f"{source['index_url']} {shlex.quote(requirement(w, extras.get(source['prebuilt'], ())))}"
        )
    return steps


@rule(desc="Writing and checking a rocm_wheel chain's install set")
async def install_set(request: InstallSetRequest) -> InstallSet:
    """`wheels/` (a find-links folder with every wheel of the chain) and a requirements file
    pinning each by version and sha256, so that
    `pip install --no-index --find-links <dir>/wheels -r <dir>/requirements.txt` installs
    exactly this chain, and nothing that merely has the same version."""
    closure = request.closure
    sources = [(w, json.loads(w.build_info)["source"]) for w in closure]
    extras = device_extras(source for _, source in sources)
    addresses = tuple(w.address for w in closure)
    runtime = await Get(RuntimeSet, RuntimeSetRequest(addresses[-1].spec, addresses))
    # The set's libraries, symbols and GPU code, as the box would load them (install/load_check.py),
    # checked while its wheels are gathered: wheels/ (the chain's and the run-time lock's).
    check = load_check_request(closure, await wheels_of(runtime.wheels), runtime.sdk_install)
    checked, wheels = await MultiGet(
        Get(CheckedInstallSet, InstallSetCheckRequest, check),
        Get(Digest, MergeDigests([*(w.wheel for w in closure), runtime.wheels])),
    )
    checked.raise_problems()
    for note in checked.notes:
        logger.warning(f"{checked.owner}: {note}")
    lines = [
        "# The rocm_wheel chain of one `pants package`: every wheel by version and sha256.",
        CHECK_STEP,
        *(
            f"{requirement(w, extras.get(source.get('prebuilt', ''), ()))} --hash=sha256:{w.wheel_sha256}"
            for w, source in sorted(sources, key=lambda pair: pair[0].wheel_name or "")
        ),
    ]
    # The steps in order: the box, the SDK (from the run-time set), prebuilt wheels that need their own index, the set.
    steps = prebuilt_steps(sources, extras, checked.outside)
    lines = with_runtime_lines(runtime, lines, (*steps, *INSTALL_STEP))
    files = await Get(
        Digest,
        CreateDigest(
            [
                FileContent(INSTALL_REQUIREMENTS, "\n".join([*lines, ""]).encode()),
                FileContent(ENV_SCRIPT, env_script(runtime.env).encode()),
                # check_box.py and what it checks the box against (install/box_check.py)
                *box_check_files(closure[-1].address.spec, chain_gpu_targets(closure)),
                # sbom.cdx.json and pylock.toml, for standard tools (install/supply_chain.py)
                *supply_chain_files(closure, runtime, chain_gpu_targets(closure), steps),
            ]
        ),
    )
    digest = await Get(Digest, MergeDigests([await Get(Digest, AddPrefix(wheels, "wheels")), files]))
    return InstallSet(digest, checked.summary())


def chain_gpu_targets(closure: Tuple[BuiltRocmWheel, ...]) -> Tuple[str, ...]:
    """Every gpu target of the chain's wheels, in chain order."""
    return tuple(dict.fromkeys(t for w in closure for t in json.loads(w.build_info).get("gpu_targets", ())))


def load_check_request(closure: Tuple[BuiltRocmWheel, ...], runtime_wheels: Sequence[BuiltWheel], sdk_install: str) -> InstallSetCheckRequest:
    chain = [SetWheel(BuiltWheel(w.wheel, w.wheel_name or ""), w.address.spec, audited=not is_prebuilt(w)) for w in closure]
    locked = [SetWheel(w, "the chain's run-time lock", audited=False) for w in runtime_wheels]
    gpu_targets = chain_gpu_targets(closure)
    addresses = tuple(w.address for w in closure)
    return InstallSetCheckRequest(closure[-1].address.spec, (*chain, *locked), gpu_targets, addresses, sdk_install)


@dataclass(frozen=True)
class DistFolder:
    """What `package` writes into one folder of dist/: a target's wheel and build log, a
    generator's prebuilt wheels (one folder for all), or the install set."""

    relpath: str  # under dist/
    digest: Digest  # its files, at the digest root
    entries: Tuple[FileEntry, ...]

    def files(self) -> Dict[str, Tuple[str, int]]:
        return {e.path: (e.file_digest.fingerprint, e.file_digest.serialized_bytes_length) for e in self.entries}


def file_entries(entries: DigestEntries) -> Tuple[FileEntry, ...]:
    return tuple(e for e in entries if isinstance(e, FileEntry))


async def dist_folders(closure: Tuple[BuiltRocmWheel, ...], install: InstallSet, install_relpath: str) -> Tuple[DistFolder, ...]:
    """The chain's folders of dist/, each once: the wheels of one folder (a generator's) merged."""
    with_provenance = await MultiGet(Get(Digest, WheelWithProvenance(w)) for w in closure)  # `<wheel>.intoto.jsonl` (provenance/)
    by_folder: Dict[str, List[Digest]] = {}
    for w, digest in zip(closure, with_provenance):
        by_folder.setdefault(dist_dir(w.address), []).append(digest)
    by_folder[install_relpath] = [install.digest]
    digests = await MultiGet(Get(Digest, MergeDigests(ds)) for ds in by_folder.values())
    entries = await MultiGet(Get(DigestEntries, Digest, d) for d in digests)
    return tuple(DistFolder(r, d, file_entries(e)) for r, d, e in zip(by_folder, digests, entries))


@dataclass(frozen=True)
class DistOutcomeRequest:
    owner: str  # the target packaged
    closure: Tuple[BuiltRocmWheel, ...]
    folders: Tuple[DistFolder, ...]  # the chain's folders, the install set's last
    loads: str  # what the install set's check found


@dataclass(frozen=True)
class DistOutcome(EngineAwareReturnType):
    changed: Tuple[str, ...]  # the folders whose files dist/ does not hold already
    summary: Tuple[str, ...]

    def cacheable(self) -> bool:
        # Made from dist/, which Pants does not watch: read again in each run. Its value is the
        # same in two runs that find dist/ the same, so `package` is not run again for it.
        return False


@rule
async def package_rocm_wheel(field_set: RocmWheelFieldSet, signing: ProvenanceSubsystem) -> BuiltPackage:
    # Toolchains, archives and locks of the whole chain are checked before any fetch or
    # build starts (each build of the chain awaits them too: ChainWheelRequest).
    await Get(CheckedChain, ChainRequest(field_set.address))
    await check_runtime_set(field_set.address)  # runtime_env conflicts, run-time locks
    built = await Get(BuiltRocmWheel, ChainWheelRequest(field_set.address, field_set.address))
    if built.error:
        raise RocmBuildError(built.error)
    # The whole chain, each wheel with its build log under its target's folder, and for the
    # target packaged the chain as one thing to install (see install_set). The package is all
    # of it whatever dist/ holds; dist/ only decides which folders are named and cleared first.
    install = await Get(InstallSet, InstallSetRequest(built.closure))
    folders = await dist_folders(built.closure, install, f"{dist_dir(field_set.address)}.install")
    outcome = await Get(DistOutcome, DistOutcomeRequest(field_set.address.spec, built.closure, folders, install.loads))
    outputs = await MultiGet(Get(Digest, AddPrefix(f.digest, f.relpath)) for f in folders)
    artifacts = [BuiltPackageArtifact(relpath) for relpath in outcome.changed]  # Pants clears each, then writes it
    artifacts.append(BuiltPackageArtifact(None, (*outcome.summary, provenance_line(signing))))
    return BuiltPackage(await Get(Digest, MergeDigests(outputs)), tuple(artifacts))


def provenance_line(signing: ProvenanceSubsystem) -> str:
    if signing.signing_key:
        return f"Provenance (<wheel>.intoto.jsonl) signed with {signing.signing_key} ([{signing.options_scope}] signing_key)."
    return f"Provenance (<wheel>.intoto.jsonl) unsigned: set [{signing.options_scope}] signing_key to sign it (docs/supply-chain.md)."


def dist_wheel(w: BuiltRocmWheel, folder: DistFolder, run_id: RunId) -> DistWheel:
    """A wheel of the chain as its folder of dist/ is to hold it."""
    entry = next(e for e in folder.entries if e.path == w.wheel_name)
    log = next((e for e in folder.entries if e.path == f"{w.wheel_name}.build.log"), None)
    return DistWheel(
        w.address.spec,
        folder.relpath,
        entry.path,
        entry.file_digest.fingerprint,
        entry.file_digest.serialized_bytes_length,
        prebuilt=is_prebuilt(w),
        ran_here=w.ran_in == run_id,
        build_info=json.loads(w.build_info),
        log=(log.path, log.file_digest.fingerprint, log.file_digest.serialized_bytes_length) if log else None,
    )


@rule
async def dist_hashes() -> DistHashes:
    """What is known of dist/'s files: one value for the life of pantsd (a rule with no inputs
    is run once and kept), handed to each comparison."""
    return DistHashes()


@rule(desc="Comparing a rocm_wheel chain with dist/", level=LogLevel.DEBUG)
async def compare_with_dist(
    request: DistOutcomeRequest, dist: DistDir, build_root: BuildRoot, run_id: RunId, known: DistHashes
) -> DistOutcome:
    """The folders dist/ does not hold already, and the summary. The run id tells a build that
    ran in this run from one a cache gave."""
    root = build_root.pathlib_path / dist.relpath
    by_relpath = {f.relpath: f for f in request.folders}
    wheels = [dist_wheel(w, by_relpath[dist_dir(w.address)], run_id) for w in request.closure]
    changed = changed_folders(root, {f.relpath: f.files() for f in request.folders}, known)
    outcomes = wheel_outcomes(root, wheels, held=[f.relpath for f in request.folders if f.relpath not in changed], known=known)
    blocked = unwritable(root, changed, [f.relpath for f in request.folders if f.relpath not in changed])
    if blocked:
        raise RocmBuildError(unwritable_message(root, blocked))
    for folder in request.folders:  # Pants writes every file of the package, changed or not
        for e in folder.entries:
            known.expect_written(root / folder.relpath / e.path, e.file_digest.fingerprint, e.file_digest.serialized_bytes_length)
    install = request.folders[-1].relpath
    install_written = install in changed
    # What the set's check found is said when the set is new in dist/.
    loads = request.loads if install_written else ""
    return DistOutcome(tuple(changed), summary_lines(request.owner, outcomes, f"{root.name}/{install}", install_written, loads))


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        UnionRule(PackageFieldSet, RocmWheelFieldSet),
        *distdir.rules(),  # compare_with_dist reads dist/
        *wheel_build.rules(),
        *chain_check.rules(),
        *load_check.rules(),
        *runtime_set.rules(),
        *chain_order.rules(),
        *provenance_signing.rules(),
    ])
