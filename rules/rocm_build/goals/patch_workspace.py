"""`pants patch-workspace <upstream target>`: edit an upstream's patched tree with git, save the
commits as patches of the target's patch set.

    ./pants patch-workspace tests/mini/vllm:src          # work/mini-vllm: the pinned tree, then one
                                                         # commit per patch file of the target
    (edit; `git commit` with Why:, Upstream:, Drop when: in the message)
    ./pants patch-workspace --save tests/mini/vllm:src   # new commits -> tests/mini/patches/vllm/NNNN-*.patch

Everything comes from the target, as the build reads it: the pin (or archive) and the patch
files in the order the build applies them (the same `UpstreamSpec`), the tree from the same
fetch (its pack, which Pants has cached), and on `--save` the directory of the target's patch set.
So a workspace never holds other patches than the build, and a save never writes where no
patch_set reads.

A goal rule in Pants' own process (no pex, no nested Pants): the engine resolves the target and
fetches; the goal then writes `work/<pin>/` (the pack with `Workspace.write_digest`, the
repository with the host's git, upstream/workspace_repo.py) and the saved patches
(`Workspace.write_digest`). `work/` is in `pants_ignore`: the workspace is never a source.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

from pants.base.build_root import BuildRoot
from pants.engine.addresses import Address, Addresses, UnparsedAddressInputs
from pants.engine.console import Console
from pants.engine.fs import CreateDigest, Digest, DigestContents, DigestEntries, DigestSubset, FileContent, FileEntry, PathGlobs, Workspace
from pants.engine.goal import Goal, GoalSubsystem
from pants.build_graph.address import AddressInput
from pants.engine.rules import Get, MultiGet, collect_rules, goal_rule, rule
from pants.engine.target import HydratedSources, HydrateSourcesRequest, Targets, WrappedTarget, WrappedTargetRequest
from pants.option.option_types import BoolOption, StrOption
from pants.util.strutil import softwrap
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.errors import RocmBuildError
from rocm_build.subsystems.host_tools import HostTools
from rocm_build.upstream import workspace_repo
from rocm_build.upstream.fetch import PACK_DIR, FetchedTree
from rocm_build.upstream.target_types import PatchSetsField, PatchSourcesField
from rocm_build.upstream.upstream_repo import UnpatchedUpstream, UpstreamRequest, UpstreamSpec
from rocm_build.upstream.workspace_repo import PACK_NAME, PatchToApply, WorkspaceError
from rocm_build.wheel.target_types import WheelSourceField
from rocm_build.upstream import upstream_repo
from rocm_build.subsystems import host_tools

WORK_DIR = "work"
ORIGIN = "the `patch-workspace` goal"


class PatchWorkspaceSubsystem(GoalSubsystem):
    name = "patch-workspace"
    help = softwrap(
        """
        Check out an upstream_repo or upstream_archive as a git repository in work/<pin>/: the
        pinned tree, then one commit per patch file of the target's patch sets (in build
        order, each with the patch's header as its message). Commit your changes there with
        `Why:`, `Upstream:` and `Drop when:` in the message; `--save` writes them into the
        target's patch set as numbered patch files.
        """
    )

    save = BoolOption(
        default=False,
        help=softwrap(
            """
            Write the commits made in work/<pin>/ since the checkout (or the last save) into the
            target's patch set directory, as NNNN-<subject>.patch files after its last number;
            a commit whose message lacks Why:, Upstream: or Drop when: refuses them all.
            """
        ),
    )
    patch_set = StrOption(
        default=None,
        help="With --save, for a target with several patch sets: the address of the one to write to.",
    )


class PatchWorkspace(Goal):
    subsystem_cls = PatchWorkspaceSubsystem
    environment_behavior = Goal.EnvironmentBehavior.LOCAL_ONLY


@dataclass(frozen=True)
class WorkspaceRequest:
    address: Address


@dataclass(frozen=True)
class PatchSetInfo:
    address: Address
    globs: Tuple[str, ...]  # its `sources`, relative to its directory
    files: Tuple[str, ...]  # its files now, from the build root

    @property
    def directory(self) -> str:
        return self.address.spec_path


@dataclass(frozen=True)
class WorkspaceSource:
    """What the goal needs of an upstream target, resolved as its build resolves it."""

    owner: str
    pin_name: str
    pinned: str  # for messages: "mini-vllm @ e8b61258139e", an archive's URL and sha256
    patch_files: Tuple[str, ...]  # in the order the build applies them
    patch_sets: Tuple[PatchSetInfo, ...]
    python: str  # the host's, that applies patches as builds do (scripts/apply_patches.py)


@rule(desc="Reading an upstream target for its patch workspace")
async def workspace_source(request: WorkspaceRequest, tools: HostTools) -> WorkspaceSource:
    wrapped = await Get(WrappedTarget, WrappedTargetRequest(request.address, ORIGIN))
    target = wrapped.target
    if target.has_field(WheelSourceField):  # the usual slip: the wheel, not its source
        source = await Get(
            Address,
            AddressInput,
            AddressInput.parse(target[WheelSourceField].value, relative_to=target.address.spec_path,
                               description_of_origin=f"the `source` field of {target.address.spec}"),
        )  # fmt: skip
        raise RocmBuildError(
            f"patch-workspace: {target.address.spec} is a `{target.alias}`; patches belong to its source: "
            f"./pants patch-workspace {source.spec}"
        )
    spec = await Get(UpstreamSpec, UpstreamRequest(request.address, ORIGIN))
    addresses = await Get(
        Addresses,
        UnparsedAddressInputs(target[PatchSetsField].value or (), owning_address=target.address,
                              description_of_origin=f"the `patches` field of {target.address.spec}"),
    )  # fmt: skip
    sets = await Get(Targets, Addresses, addresses)
    hydrated = await MultiGet(Get(HydratedSources, HydrateSourcesRequest(t[PatchSourcesField])) for t in sets)
    return WorkspaceSource(
        owner=spec.address.spec,
        pin_name=spec.pin_name,
        pinned=spec.pinned,
        patch_files=tuple(p.path for p in spec.patches),
        patch_sets=tuple(
            PatchSetInfo(t.address, tuple(t[PatchSourcesField].globs), tuple(h.snapshot.files)) for t, h in zip(sets, hydrated)
        ),
        python=tools.python.path,
    )


@dataclass(frozen=True)
class WorkspacePack:
    digest: Digest  # the fetched pack's files as git finds a pack in .git/objects/pack/
    repos: Tuple[Tuple[str, str], ...]  # (path, commit), the top one first


@dataclass(frozen=True)
class WorkspacePackRequest:
    fetched: FetchedTree


@rule(desc="Preparing the fetched source for a patch workspace")
async def workspace_pack(request: WorkspacePackRequest) -> WorkspacePack:
    fetched = request.fetched
    entries, repos = await MultiGet(
        Get(DigestEntries, Digest, fetched.pack),
        Get(DigestContents, DigestSubset(fetched.pack, PathGlobs([f"{PACK_DIR}/repos"]))),
    )
    named = {e.path: e for e in entries if isinstance(e, FileEntry)}
    pack = [FileEntry(f"{PACK_NAME}.{ext}", named[f"{PACK_DIR}/objects.{ext}"].file_digest) for ext in ("pack", "idx")]
    listed = tuple(
        (path, commit) for commit, _, path in (line.partition(" ") for line in repos[0].content.decode().splitlines() if line)
    )
    return WorkspacePack(await Get(Digest, CreateDigest(pack)), listed)


def chosen_patch_set(source: WorkspaceSource, named: Optional[Address]) -> PatchSetInfo:
    """The patch set `--save` writes to: the target's only one, or the one `--patch-set` names."""
    listed = ", ".join(s.address.spec for s in source.patch_sets)
    if named is not None:
        for patch_set in source.patch_sets:
            if patch_set.address == named:
                return patch_set
        raise WorkspaceError(
            f"--patch-set={named.spec} is not one of {source.owner}'s patch sets ({listed or 'it has none'}); "
            "name one of them, or add it to the target's `patches`"
        )
    if len(source.patch_sets) == 1:
        return source.patch_sets[0]
    if not source.patch_sets:
        raise WorkspaceError(
            f"{source.owner} has no patch set to save into: add a directory with a BUILD file holding "
            f"`patch_set(name=\"...\")` and list it in the `patches` field of {source.owner}, then save again"
        )
    raise WorkspaceError(f"{source.owner} has {len(source.patch_sets)} patch sets ({listed}); name the one to write with --patch-set=<address>")


def refuse_unread(patch_set: PatchSetInfo, names: Tuple[str, ...]) -> None:
    """A file the patch set's `sources` would not pick up would be written for nothing."""
    globs = [g for g in patch_set.globs if not g.startswith("!")]
    excluded = [g[1:] for g in patch_set.globs if g.startswith("!")]
    for name in names:
        if not any(fnmatch.fnmatch(name, g) for g in globs) or any(fnmatch.fnmatch(name, g) for g in excluded):
            raise WorkspaceError(
                f"{patch_set.address.spec} reads {', '.join(patch_set.globs)}, which does not include {name}; nothing was written. "
                "Let its `sources` include *.patch"
            )


def before_checkout(source: WorkspaceSource, dest: Path, dest_rel: str, root: str) -> Optional[str]:
    """Before the fetch: a link at work/ or work/<pin> refused before anything is read or removed
    there, a workspace with work not saved refused, one whose commits are all saved removed (what
    to say of that, or None)."""
    workspace_repo.refuse_links(Path(root), dest_rel)
    if workspace_repo.clear_saved(dest, source.owner, f"./pants patch-workspace --save {source.owner}"):
        return f"{dest_rel}: every commit of it was saved as a patch file; checking it out afresh"
    return None


def failure(source: WorkspaceSource, error: WorkspaceError, dest: Path, dest_rel: str) -> str:
    """The goal's message for a refusal, the workspace named as the user knows it (from the build root)."""
    return f"patch-workspace {source.owner}: {str(error).replace(str(dest), dest_rel)}"


def checkout(source: WorkspaceSource, pack: WorkspacePack, dest: Path, dest_rel: str, root: str, workspace: Workspace) -> str:
    workspace_repo.init(dest, source.owner)
    workspace.write_digest(pack.digest, path_prefix=f"{dest_rel}/.git/objects/pack")
    workspace_repo.base_from_pack(dest, pack.repos, source.pin_name)
    fix = (
        "Apply it by hand there (`git apply --reject` keeps the hunks that do not apply as .rej files; an edit's "
        "pattern is in its file), commit it with its header as the message, remove the old file from the patch set, "
        f"then `./pants patch-workspace --save {source.owner}`."
    )
    patches = [PatchToApply(str(Path(root, p)), p) for p in source.patch_files]
    workspace_repo.commit_patches(dest, source.python, patches, fix)
    sets = ", ".join(s.address.spec for s in source.patch_sets) or "no patch set"
    return (
        f"{dest_rel}: {source.owner} at {source.pinned} (tag {workspace_repo.BASE_TAG}), then {len(patches)} patch file(s) "
        f"of {sets} as commits (branch {workspace_repo.BRANCH}).\n"
        f"Commit your changes there, each message with Why:, Upstream: and Drop when:, then: "
        f"./pants patch-workspace --save {source.owner}"
    )


def save(source: WorkspaceSource, patch_set: PatchSetInfo, dest: Path, dest_rel: str, root: str) -> workspace_repo.NewPatches:
    """The new commits as patch files of `patch_set`, checked out again with the target's other
    patches (the saved set gives the tree committed) before anything is written."""
    workspace_repo.refuse_links(Path(root), dest_rel)
    if not (dest / ".git").is_dir():
        raise WorkspaceError(f"there is no workspace at {dest_rel}; make it first: ./pants patch-workspace {source.owner}")
    made = workspace_repo.made_for(dest)
    if made != source.owner:
        raise WorkspaceError(f"{dest_rel} is the workspace of {made or 'no target'}, not of {source.owner}; nothing was written")
    first = workspace_repo.next_number(patch_set.files, patch_set.address.spec)
    new = workspace_repo.new_patches(dest, first)
    refuse_unread(patch_set, tuple(name for name, _ in new.files))
    if new.files:
        # The new files sort after the set's own (their numbers follow), before later sets'.
        in_set = set(patch_set.files)
        last = max((i for i, p in enumerate(source.patch_files) if p in in_set), default=len(source.patch_files) - 1)
        shown = [PatchToApply(str(Path(root, p)), p) for p in source.patch_files]
        workspace_repo.check_saved_set(dest, source.python, shown[: last + 1], shown[last + 1 :], new, patch_set.directory)
    directory = patch_set.directory
    return dataclasses.replace(new, files=tuple((f"{directory}/{name}" if directory else name, data) for name, data in new.files))


@goal_rule
async def patch_workspace(
    console: Console, addresses: Addresses, options: PatchWorkspaceSubsystem, workspace: Workspace, build_root: BuildRoot
) -> PatchWorkspace:
    if len(addresses) != 1:
        raise RocmBuildError(
            f"patch-workspace: give it one upstream_repo or upstream_archive target ({len(addresses)} given), "
            "e.g. ./pants patch-workspace tests/mini/vllm:src"
        )
    source = await Get(WorkspaceSource, WorkspaceRequest(addresses[0]))
    dest_rel = f"{WORK_DIR}/{source.pin_name}"
    dest = Path(build_root.path, dest_rel)
    try:
        if not options.save:
            cleared = before_checkout(source, dest, dest_rel, build_root.path)
            if cleared:
                console.print_stdout(cleared)
            # The same fetch as the build's (cached).
            unpatched = await Get(UnpatchedUpstream, UpstreamRequest(addresses[0], ORIGIN))
            pack = await Get(WorkspacePack, WorkspacePackRequest(unpatched.fetched))
            console.print_stdout(checkout(source, pack, dest, dest_rel, build_root.path, workspace))
            return PatchWorkspace(exit_code=0)
        named = None
        if options.patch_set:
            named = await Get(Address, AddressInput, AddressInput.parse(options.patch_set, description_of_origin="--patch-set"))
        patch_set = chosen_patch_set(source, named)
        new = save(source, patch_set, dest, dest_rel, build_root.path)
        if not new.files:
            console.print_stdout(f"no new commits in {dest_rel} since the last save; nothing written")
            return PatchWorkspace(exit_code=0)
        # The bytes git gave (a CRLF file's `\r` too), then the marker moved to the last commit written.
        workspace.write_digest(await Get(Digest, CreateDigest([FileContent(path, data) for path, data in new.files])))
        workspace_repo.mark_saved(dest, new)
    except WorkspaceError as e:
        console.print_stderr(failure(source, e, dest, dest_rel))
        return PatchWorkspace(exit_code=1)
    for path, _ in new.files:
        console.print_stdout(f"wrote {path}")
    return PatchWorkspace(exit_code=0)


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *upstream_repo.rules(), *host_tools.rules()])
