"""The `source` of a workload test: the upstream's tree for PYTHONPATH, or a wheel for its venv.

Which kind of source it is comes from the kinds' union (upstream/sources.py): a tree (an
`upstream_repo` or `upstream_archive`, fetched and patched as a rocm_wheel's source is), or
wheels for the venv (a `rocm_wheel`, a `prebuilt_wheel`, or a `target` grouping them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from pants.engine.addresses import Address, Addresses, UnparsedAddressInputs
from pants.engine.fs import EMPTY_DIGEST, Digest, RemovePrefix
from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.errors import RocmBuildError
from rocm_build.upstream.fetch import TREE_DIR
from rocm_build.upstream.source_tree import MergedTree, MergedTreeRequest
from rocm_build.upstream.sources import SourceDescription, SourceRequest
from rocm_build.upstream.target_types import UpstreamArchiveTarget, UpstreamRepoTarget
from rocm_build.upstream.upstream_repo import ResolvedUpstream, UpstreamRequest
from rocm_build.workloads.target_types import WorkloadSourceField
from rocm_build.upstream import source_tree, sources, upstream_repo
from rocm_build.wheel import source_kind


@dataclass(frozen=True)
class WorkloadSourceRequest:
    field: WorkloadSourceField


@dataclass(frozen=True)
class WorkloadSource:
    tree: Digest  # the patched tree, at the digest root (PYTHONPATH); empty without one
    patch_files: Tuple[str, ...]  # the tree's patches, in the order they applied
    wheels: Tuple[Address, ...]  # a wheel source: for the venv (venv.py says what it takes)


# A rule, not a helper: the setup asks for it in one MultiGet with the Python, the declared
# dependencies and the workload files, so an upstream's fetch runs beside the others.
@rule(desc="Reading the source of a workload test", level=LogLevel.DEBUG)
async def workload_source(request: WorkloadSourceRequest) -> WorkloadSource:
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
        return WorkloadSource(tree, tuple(p.path for p in upstream.patches), ())
    if field.wheel_refused:
        raise RocmBuildError(
            f"{what} names {address.spec}, a `{source.alias}`; it takes an `{UpstreamArchiveTarget.alias}` or "
            f"`{UpstreamRepoTarget.alias}` ({field.wheel_refused})"
        )
    # A `rocm_wheel` or `prebuilt_wheel` (or what groups them): the venv installs it.
    return WorkloadSource(EMPTY_DIGEST, (), (address,))


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        *upstream_repo.rules(),
        *source_tree.rules(),
        *sources.rules(),
        *source_kind.rules(),
    ])
