"""The edges Pants sees: every input of a build is a dependency, inferred from the fields users
already write (Pants' dependency inference), so `dependencies`, `dependents`, `peek`, `paths`
and `--changed-since --changed-dependents=transitive` know what a wheel is built from.

- a `rocm_wheel` depends on its `source`, `toolchain`, `archives`, its build and run-time lock
  files and its source's pin file, for every kind of source (upstream/sources.py);
- an `upstream_repo`, `prebuilt_wheel` and pinned `upstream_archive` on the file that holds their
  pin (and a prebuilt pin on its directory's shared `[prebuilt]` file), the patch sets of an
  `upstream_repo` or `upstream_archive` being edges already (`patches`);
- a `rocm_wheel` on what the plugin puts into each of its processes and keys: its sandbox
  scripts (one edge: the `target` that depends on the `resources` shipping
  rules/rocm_build/scripts/, so `peek` lists them once and not file by file) and the config files
  Pants read its options from (`pants.toml`, and `pants.offline.toml` for ./pants), when they
  are in the repository; the workload tests take the same edges (workloads/dependency_inference.py);
- a `rocm_wheel` built in a container on its `environment`'s `docker_environment` (the image it
  builds in), which depends on its `image_containerfile`.

(A workload test's edges, its `source` and the owners of its `workload_modules`, are inferred
beside it, in workloads/dependency_inference.py.)

A file edge points at the file's nearest owner (the `file` target of the BUILD file closest to
it: components/pins/BUILD's, not a repository-wide `files` target that also holds it). An input
file that exists and that no target owns is no edge, with a warning saying which BUILD file to
add (as Pants' own inference treats an import nothing owns).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional, Tuple

from pants.base.build_root import BuildRoot
from pants.base.specs import DirGlobSpec, RawSpecs
from pants.core.target_types import GenericTarget, ResourceSourceField
from pants.engine.addresses import Address, Addresses, UnparsedAddressInputs
from pants.engine.fs import DigestContents, PathGlobs, Snapshot
from pants.engine.internals.graph import Owners, OwnersRequest
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import (
    Dependencies,
    DependenciesRequest,
    ExplicitlyProvidedDependencies,
    FieldSet,
    InferDependenciesRequest,
    InferredDependencies,
    Targets,
)
from pants.engine.unions import UnionRule
from pants.option.global_options import GlobalOptions
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build import script_modules

from rocm_build.install.runtime_lock import runtime_lock_path
from rocm_build.pants_environments import EnvironmentField, EnvironmentsSubsystem
from rocm_build.pins.files import PinsFiles, glob_of, is_directory
from rocm_build.pins.tables import PREBUILT, PinsError
from rocm_build.subsystems.rocm_build import RocmBuildSubsystem
from rocm_build.toolchain.interpreters import parse_constraint
from rocm_build.toolchain.target_types import ImageContainerfileField
from rocm_build.upstream.sources import SourceDescription, SourceRequest
from rocm_build.upstream.target_types import (
    ArchivePinField,
    ArchivePinsFileField,
    PinField,
    PinsFileField,
    PrebuiltPinField,
)
from rocm_build.wheel.build_spec import default_lock
from rocm_build.wheel.target_types import (
    WheelArchivesField,
    WheelBuildRequirementsField,
    WheelLockField,
    WheelPythonField,
    WheelSourceField,
    WheelToolchainField,
)
from rocm_build.upstream import sources

logger = logging.getLogger(__name__)

# ----------------------------------------------------------------------------- pin files


@dataclass(frozen=True)
class PinFilesRequest:
    """The files a pin is read from: `table` (`vllm`, `prebuilt.therock-torch`) in `pins_file`."""

    pins_file: str
    table: str


@dataclass(frozen=True)
class PinFiles:
    paths: Tuple[str, ...]


@rule(desc="Finding the file of a pin")
async def find_pin_files(request: PinFilesRequest) -> PinFiles:
    if not is_directory(request.pins_file):
        return PinFiles((request.pins_file,))
    contents = await Get(DigestContents, PathGlobs([glob_of(request.pins_file)]))
    files = PinsFiles.of(request.pins_file, ((fc.path, fc.content) for fc in contents))
    try:
        tables = files.tables()
    except PinsError:  # the build reads the pins too, and says what is wrong and where
        return PinFiles(())
    if request.table not in tables:  # the same: it names the pins there are
        return PinFiles(())
    # A prebuilt pin also reads what the directory's [prebuilt] table gives every pin.
    shared = [tables[PREBUILT]] if request.table.startswith(f"{PREBUILT}.") and PREBUILT in tables else []
    return PinFiles(tuple(dict.fromkeys([tables[request.table], *shared])))


# ----------------------------------------------------------------------------- file owners


@dataclass(frozen=True)
class InputFilesRequest:
    """Files a target reads from the repository. One that does not exist is no edge: the build
    itself says what is missing (a lock not made yet) and how to make it."""

    owner: str  # who reads them, for the warning: a target's address
    paths: Tuple[str, ...]


@rule(desc="Finding the targets that own a build's input files")
async def find_input_file_owners(request: InputFilesRequest) -> Addresses:
    present = sorted(set((await Get(Snapshot, PathGlobs(request.paths))).files))
    owners_of = await MultiGet(Get(Owners, OwnersRequest((path,))) for path in present)
    edges = []
    for path, owners in zip(present, owners_of):
        nearest = nearest_owner(owners)
        if nearest is None:  # as Pants' own inference treats an unowned import: a warning
            directory = os.path.dirname(path)
            logger.warning(
                f"{request.owner} is built from {path}, which no target owns, so Pants cannot see it "
                f"change (`dependents`, `--changed-since`): add `files(name=\"{os.path.basename(directory) or 'inputs'}\", "
                f"sources=[\"*{os.path.splitext(path)[1]}\"])` to {directory or '.'}/BUILD"
            )
            continue
        edges.append(nearest)
    return Addresses(sorted(set(edges)))


def nearest_owner(owners: Iterable[Address]) -> Optional[Address]:
    """The owner whose BUILD file is deepest: the file's own directory's target wins over a
    `files` target higher up that globs it too."""
    return max(owners, key=lambda a: (len(a.spec_path.split("/")) if a.spec_path else 0, a.spec), default=None)


# ----------------------------------------------------------------------------- the plugin itself


@dataclass(frozen=True)
class PluginInputs:
    """What the plugin puts into every build's and test's process and key, as edges: the owner of
    its sandbox scripts and of each config file that sets its options. An edit of
    rules/rocm_build/scripts/build_wheel.sh or of `[rocm-build]` in pants.toml then selects every
    wheel and test (`--changed-since --changed-dependents=transitive`)."""

    addresses: Addresses


def inside(path: str, build_root: str) -> Optional[str]:
    """`path` relative to the build root, or None when it is outside (a plugin installed from a
    wheel, a config file in the home directory): Pants sees no change of what it does not own."""
    relative = os.path.relpath(os.path.abspath(os.path.join(build_root, path)), build_root)
    return None if relative == ".." or relative.startswith("../") else relative


def script_owners(owners_of: Iterable[Tuple[Address, ...]], resources: Iterable[Address]) -> Tuple[Address, ...]:
    """The targets that ship the scripts: the `resources` owning each (pkgutil.get_data reads
    them as the plugin package's resources), as their generator; else the nearest owner."""
    shipped = set(resources)
    chosen = set()
    for owners in owners_of:
        resource = [a.maybe_convert_to_target_generator() for a in owners if a in shipped]
        nearest = nearest_owner(owners)
        chosen.update(resource or ([nearest] if nearest else []))
    return tuple(sorted(chosen))


def one_edge_each(owners: Iterable[Address], gatherers: Mapping[Address, Iterable[Address]]) -> Tuple[Address, ...]:
    """Each owner as one edge: a `target` that depends on it (`gatherers`: such targets, with what
    they depend on), else the owner itself. Pants lists a dependency on a target generator as
    every target it generates (`peek` of a wheel: each script), a `target` as itself."""
    chosen = set()
    for owner in owners:
        gathering = sorted(g for g, deps in gatherers.items() if owner in set(deps))
        chosen.add(gathering[0] if gathering else owner)
    return tuple(sorted(chosen))


@rule(desc="Finding the plugin's own inputs of every build")
async def find_plugin_inputs(build_root: BuildRoot, global_options: GlobalOptions) -> PluginInputs:
    root = build_root.path
    scripts_dir = inside(os.path.join(os.path.dirname(script_modules.__file__), "scripts"), root)
    config = [c for c in (inside(path, root) for path in global_options.pants_config_files) if c]
    if scripts_dir is None:
        scripts: Tuple[str, ...] = ()
    else:  # what script_bytes() can read: the directory's files but its tests and BUILD file
        listed = await Get(Snapshot, PathGlobs([f"{scripts_dir}/*"]))
        scripts = tuple(p for p in listed.files if not p.endswith("_test.py") and os.path.basename(p) != "BUILD")
    owners_of = await MultiGet(Get(Owners, OwnersRequest((path,))) for path in scripts)
    owned = await Get(Targets, Addresses(sorted({a for owners in owners_of for a in owners})))
    resources = [t.address for t in owned if t.has_field(ResourceSourceField)]
    unowned = [path for path, owners in zip(scripts, owners_of) if not owners]
    if unowned:  # as find_input_file_owners: a warning naming the BUILD file to add
        logger.warning(
            f"Every build runs the plugin's scripts in {scripts_dir}/, and no target owns {', '.join(unowned)}, so "
            f"Pants cannot see them change (`dependents`, `--changed-since`): add `resources(name=\"scripts\", "
            f"sources=[\"*\", \"!*_test.py\", \"!BUILD\"])` to {scripts_dir}/BUILD"
        )
    shipping = script_owners((tuple(o) for o in owners_of), resources)
    # The `target`s beside the shipping resources, with what each depends on: one of them is the edge.
    beside = await Get(
        Addresses,
        RawSpecs(dir_globs=tuple(DirGlobSpec(d) for d in sorted({a.spec_path for a in shipping})), description_of_origin="the plugin's scripts"),
    )
    gatherers = [t for t in await Get(Targets, Addresses(beside)) if isinstance(t, GenericTarget)]
    explicit = await MultiGet(Get(ExplicitlyProvidedDependencies, DependenciesRequest(t[Dependencies])) for t in gatherers)
    gathering = {t.address: tuple(deps.includes) for t, deps in zip(gatherers, explicit)}
    files = await Get(Addresses, InputFilesRequest("Every rocm_wheel and test", tuple(config)))
    return PluginInputs(Addresses(sorted({*one_edge_each(shipping, gathering), *files})))


# ----------------------------------------------------------------------------- rocm_wheel


@dataclass(frozen=True)
class WheelInputsFieldSet(FieldSet):
    required_fields = (WheelSourceField, WheelToolchainField)

    source: WheelSourceField
    toolchain: WheelToolchainField
    archives: WheelArchivesField
    lock: WheelLockField
    build_requirements: WheelBuildRequirementsField
    python: WheelPythonField
    environment: EnvironmentField


class InferWheelInputs(InferDependenciesRequest):
    infer_from = WheelInputsFieldSet


@rule(desc="Inferring what a rocm_wheel is built from")
async def infer_wheel_inputs(
    request: InferWheelInputs, defaults: RocmBuildSubsystem, environments: EnvironmentsSubsystem, plugin: PluginInputs
) -> InferredDependencies:
    fs = request.field_set
    owner = fs.address.spec
    # The image of a build in a container: the docker_environment its `environment` names.
    image = [environments.names[fs.environment.value]] if fs.environment.value in environments.names else []
    source_address, named = await MultiGet(
        Get(Addresses, UnparsedAddressInputs([fs.source.value], owning_address=fs.address, description_of_origin=f"the `source` field of {owner}")),
        Get(
            Addresses,
            UnparsedAddressInputs(
                [fs.toolchain.value, *(fs.archives.value or {}).values(), *image],
                owning_address=fs.address,
                description_of_origin=f"the `toolchain`, `archives` and `environment` fields of {owner}",
            ),
        ),
    )
    named = Addresses([*source_address, *named, *plugin.addresses])
    source = await Get(SourceDescription, SourceRequest(source_address[0], f"the `source` field of {owner}"))
    if not source.tree:  # an error the build itself reports, naming the field
        return InferredDependencies(named)
    # The locks are named by the source's pin, whatever kind of source it is (sources.py).
    python = fs.python.value or defaults.python
    minor = parse_constraint(python, owner).minor
    build_lock = [fs.lock.value or default_lock(owner, source.pin, python)] if fs.build_requirements.value else []
    run_lock = [runtime_lock_path(source.pin, minor, fs.address.target_name)] if minor else []
    pin_files = await Get(PinFiles, PinFilesRequest(source.pins_file, source.pin_table)) if source.pins_file else PinFiles(())
    files = await Get(Addresses, InputFilesRequest(fs.address.spec, (*pin_files.paths, *build_lock, *run_lock)))
    return InferredDependencies([*named, *files])


# ----------------------------------------------------------------------------- pinned targets


@dataclass(frozen=True)
class UpstreamPinFieldSet(FieldSet):
    required_fields = (PinField, PinsFileField)

    pin: PinField
    pins_file: PinsFileField


@dataclass(frozen=True)
class PrebuiltPinFieldSet(FieldSet):
    required_fields = (PrebuiltPinField, PinsFileField)

    pin: PrebuiltPinField
    pins_file: PinsFileField


@dataclass(frozen=True)
class ArchivePinFieldSet(FieldSet):
    required_fields = (ArchivePinField, ArchivePinsFileField)

    pin: ArchivePinField
    pins_file: ArchivePinsFileField


class InferUpstreamPin(InferDependenciesRequest):
    infer_from = UpstreamPinFieldSet


class InferPrebuiltPin(InferDependenciesRequest):
    infer_from = PrebuiltPinFieldSet


class InferArchivePin(InferDependenciesRequest):
    infer_from = ArchivePinFieldSet


@dataclass(frozen=True)
class PinEdgesRequest:
    owner: Address
    pins_file: str
    table: str


@rule(desc="Finding the targets that own a pin's files")
async def find_pin_edges(request: PinEdgesRequest) -> InferredDependencies:
    files = await Get(PinFiles, PinFilesRequest(request.pins_file, request.table))
    return InferredDependencies(await Get(Addresses, InputFilesRequest(request.owner.spec, files.paths)))


@rule(desc="Inferring the pin file of an upstream_repo")
async def infer_upstream_pin(request: InferUpstreamPin) -> InferredDependencies:
    fs = request.field_set
    return await Get(InferredDependencies, PinEdgesRequest(fs.address, fs.pins_file.value, fs.pin.value))


@rule(desc="Inferring the pin file of a prebuilt_wheel")
async def infer_prebuilt_pin(request: InferPrebuiltPin) -> InferredDependencies:
    fs = request.field_set
    return await Get(InferredDependencies, PinEdgesRequest(fs.address, fs.pins_file.value, f"{PREBUILT}.{fs.pin.value}"))


@rule(desc="Inferring the pin file of an upstream_archive")
async def infer_archive_pin(request: InferArchivePin) -> InferredDependencies:
    fs = request.field_set
    if not fs.pin.value:  # url and sha256 in BUILD: the BUILD file is its own input
        return InferredDependencies([])
    return await Get(InferredDependencies, PinEdgesRequest(fs.address, fs.pins_file.value, fs.pin.value))


# ----------------------------------------------------------------------------- docker_environment


@dataclass(frozen=True)
class ContainerfileFieldSet(FieldSet):
    required_fields = (ImageContainerfileField,)

    containerfile: ImageContainerfileField


class InferContainerfile(InferDependenciesRequest):
    infer_from = ContainerfileFieldSet


@rule(desc="Inferring the Containerfile of a build image")
async def infer_containerfile(request: InferContainerfile) -> InferredDependencies:
    fs = request.field_set
    paths = (fs.containerfile.value,) if fs.containerfile.value else ()
    return InferredDependencies(await Get(Addresses, InputFilesRequest(fs.address.spec, paths)))


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        UnionRule(InferDependenciesRequest, InferWheelInputs),
        UnionRule(InferDependenciesRequest, InferUpstreamPin),
        UnionRule(InferDependenciesRequest, InferPrebuiltPin),
        UnionRule(InferDependenciesRequest, InferArchivePin),
        UnionRule(InferDependenciesRequest, InferContainerfile),
        *sources.rules(),
    ])
