"""The `source` of a workload test: the upstream's tree for PYTHONPATH, or a wheel for its venv.

Which kind of source it is comes from the kinds' union (upstream/sources.py): a tree (an
`upstream_repo` or `upstream_archive`, fetched and patched as a rocm_wheel's source is), or
a wheel for its venv (a `rocm_wheel` or a `prebuilt_wheel`; a group of wheels goes in `dependencies`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Tuple

from pants.engine.addresses import Address, Addresses, UnparsedAddressInputs
from pants.engine.fs import EMPTY_DIGEST, Digest, DigestEntries, FileEntry, RemovePrefix
from pants.engine.rules import Get, collect_rules, rule
from pants.engine.target import Targets
from pants.engine.unions import UnionMembership
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.errors import RocmBuildError
from rocm_build.prepare.inputs import BuiltRocmWheel
from rocm_build.upstream.fetch import TREE_DIR
from rocm_build.upstream.source_tree import MergedTree, MergedTreeRequest
from rocm_build.upstream.sources import BUILT_WHEEL, SourceDescription, SourceFieldSet, SourceRequest, as_dependency
from rocm_build.upstream.target_types import UpstreamArchiveTarget, UpstreamRepoTarget
from rocm_build.upstream.upstream_repo import ResolvedUpstream, UpstreamRequest
from rocm_build.wheel.build_spec import WheelRequest
from rocm_build.workloads.target_types import WorkloadSourceField
from rocm_build.workloads.venv import VenvWheels, VenvWheelsRequest
from rocm_build.upstream import source_tree, sources, upstream_repo
from rocm_build.wheel import source_kind
from rocm_build.workloads import venv


@dataclass(frozen=True)
class WorkloadSourceRequest:
    field: WorkloadSourceField


@dataclass(frozen=True)
class WorkloadSource:
    tree: Digest  # the patched tree, at the digest root (PYTHONPATH); empty without one
    patch_files: Tuple[str, ...]  # the tree's patches, in the order they applied
    wheels: Tuple[Address, ...]  # a wheel source: for the venv (venv.py says what it takes)
    # JSON: [under_test(...)] of what the test compiles, for its report and output
    under_test: str = "[]"


def under_test(target: str, source: Mapping[str, Any], wheel: str = "") -> Dict[str, Any]:
    """What a workload test tests, as its report and output name it: the target, the wheel (its
    version's `.k<digest>` names the build), and the source's pin with each patch's sha256 (a
    build info's `source`: what a built wheel records of its tree). torch and triton, which the
    reports named already, are the venv's; this is the upstream whose code is under test."""
    if "prebuilt" in source:
        origin = f"prebuilt {source['prebuilt']} (sha256 {str(source.get('sha256', ''))[:12]})"
    elif "pin" in source:
        ident = f"sha256 {source['sha256'][:12]}" if "sha256" in source else f"@ {str(source.get('commit', ''))[:12]}"
        patches = source.get("patches") or []
        listed = ", ".join(f"{p['path']} (sha256 {p['sha256'][:12]})" for p in patches)
        origin = f"{source['pin']} {ident} with {len(patches)} patch(es){': ' + listed if patches else ''}"
    else:
        origin = ""
    said = ", built from ".join(part for part in (wheel, origin) if part)
    return {"target": target, **({"wheel": wheel} if wheel else {}), "source": dict(source), "line": f"{target}: {said}"}


def tree_source(upstream: ResolvedUpstream) -> Dict[str, Any]:
    """A patched tree's pin and patches, as a build info's `source` records them (prepare/inputs.py)."""
    patches = [{"path": p.path, "sha256": p.sha256} for p in upstream.patches]
    return {"pin": upstream.pin_name, "url": upstream.pin.url, upstream.identity_key: upstream.pin.commit, "patches": patches}


async def wheels_under_test(address: Address, what: str, union_membership: UnionMembership) -> List[Dict[str, Any]]:
    """A wheel source's wheels: one the chain builds with the source its build info records;
    a prebuilt wheel (pinned by sha256) by its venv wheel's file name. Which it is, its kind of source says (upstream/sources.py)."""
    targets = await Get(Targets, Addresses([address]))
    if len(targets) == 1 and as_dependency(union_membership.get(SourceFieldSet), targets[0]) == BUILT_WHEEL:
        built = await Get(BuiltRocmWheel, WheelRequest(address))
        if built.wheel_name:  # else the venv's request names why it did not build
            return [under_test(address.spec, json.loads(built.build_info).get("source", {}), built.wheel_name)]
    # The request the test's venv makes (sandbox.py), so the engine gathers them once.
    wheels = await Get(VenvWheels, VenvWheelsRequest(address, what))
    entries = await Get(DigestEntries, Digest, wheels.digest)
    return [under_test(address.spec, {}, e.path) for e in entries if isinstance(e, FileEntry)]


# A rule, not a helper: the setup asks for it in one MultiGet with the Python, the declared
# dependencies and the workload files, so an upstream's fetch runs beside the others.
@rule(desc="Reading the source of a workload test", level=LogLevel.DEBUG)
async def workload_source(request: WorkloadSourceRequest, union_membership: UnionMembership) -> WorkloadSource:
    field = request.field
    if not field.value:  # the workload holds its kernels itself
        return WorkloadSource(EMPTY_DIGEST, (), ())
    owner = field.address.spec
    what = f"the `{field.alias}` field of {owner}"
    (address,) = await Get(
        Addresses, UnparsedAddressInputs([field.value], owning_address=field.address, description_of_origin=what)
    )
    source = await Get(SourceDescription, SourceRequest(address, what))  # its kind: upstream/sources.py
    if source.tree:
        upstream = await Get(ResolvedUpstream, UpstreamRequest(address, what))
        merged = await Get(MergedTree, MergedTreeRequest(upstream.source, owner))
        # The merged tree is under TREE_DIR/; PYTHONPATH is the tree's root.
        tree = await Get(Digest, RemovePrefix(merged.digest, TREE_DIR))
        entry = under_test(address.spec, tree_source(upstream))
        return WorkloadSource(tree, tuple(p.path for p in upstream.patches), (), json.dumps([entry], sort_keys=True))
    if field.wheel_refused:
        raise RocmBuildError(
            f"{what} names {address.spec}, a `{source.alias}`; it takes an `{UpstreamArchiveTarget.alias}` or "
            f"`{UpstreamRepoTarget.alias}` ({field.wheel_refused})"
        )
    # A `rocm_wheel` or `prebuilt_wheel`: the venv installs it.
    return WorkloadSource(EMPTY_DIGEST, (), (address,), json.dumps(await wheels_under_test(address, what, union_membership), sort_keys=True))


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        *upstream_repo.rules(),
        *source_tree.rules(),
        *sources.rules(),
        *source_kind.rules(),
        *venv.rules(),
    ])
