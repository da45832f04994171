"""The build-requirements lock of one rocm_wheel, resolved (locks/lockfile.py has its format).

The patched tree at its pin is fetched (for the `-r` files its `build_requirements` name),
pip resolves the requirements against `[python-repos] indexes` for the build Python, and
the lock names the pin commit, the Python and the requirement files it was made from, with a
sha256 per distribution. `pants generate-lockfiles` and `pants lock-build-requirements` write
it (goals/lockfiles.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional

from pants.engine.addresses import Address
from pants.engine.fs import CreateDigest, Digest, FileContent, MergeDigests
from pants.engine.rules import Get, collect_rules, rule
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.errors import RocmBuildError
from rocm_build.toolchain.interpreters import BuildPython, BuildPythonRequest
from rocm_build.upstream.fetch import TREE_DIR
from rocm_build.upstream.source_tree import source_files
from rocm_build.upstream.upstream_repo import ResolvedUpstream, UpstreamRequest
from rocm_build.locks import lockfile
from rocm_build.locks.build_requirements import PipResolved, PipResolveRequest, regenerate_command, sha256_or_none
from rocm_build.wheel.build_spec import WheelBuildSpec, WheelRequest
from rocm_build.locks import build_requirements
from rocm_build.toolchain import interpreters
from rocm_build.upstream import source_tree, upstream_repo
from rocm_build.wheel import build_spec

REQUIREMENTS_IN = f"{TREE_DIR}/.rocm-build-requirements.in"


@dataclass(frozen=True)
class BuildLockRequest:
    address: Address  # a rocm_wheel with build_requirements


@rule(desc="Resolving a build-requirements lock")
async def resolve_build_lock(request: BuildLockRequest) -> lockfile.ResolvedLock:
    spec = await Get(WheelBuildSpec, WheelRequest(request.address))
    python = await Get(BuildPython, BuildPythonRequest(spec.python, spec.owner))
    pin = spec.upstream.pin
    # The tree is fetched only when a requirement names a file in it: the -r files, nested
    # ones too, read from the patched tree, which is what the build will see.
    source = None
    if any(line.split()[0] in lockfile.INCLUDE_OPTIONS for line in spec.requirements):
        upstream = await Get(ResolvedUpstream, UpstreamRequest(spec.upstream.address, f"the `source` field of {spec.owner}"))
        source = upstream.source
    texts: Dict[str, Optional[bytes]] = {}
    while True:
        try:
            files = lockfile.included_files(spec.requirements, lambda p: _text(texts[p]))
            break
        except KeyError as missing:
            texts.update(await source_files(source, (missing.args[0],), spec.owner))
        except lockfile.LockError as e:
            raise RocmBuildError(f"{spec.owner}: `build_requirements`: {e} (pin {spec.upstream.pin_name} at {pin.commit})") from None
    # pip reads the included files from the tree: only those are given to it.
    tree = await Get(Digest, CreateDigest([FileContent(f"{TREE_DIR}/{p}", texts[p] or b"") for p in files]))
    requirements_in = await Get(
        Digest, CreateDigest([FileContent(REQUIREMENTS_IN, "\n".join(spec.requirements).encode() + b"\n")])
    )
    resolved = await Get(
        PipResolved,
        PipResolveRequest(
            spec.owner, "", spec.requirements, python, REQUIREMENTS_IN,
            await Get(Digest, MergeDigests([tree, requirements_in])),
            f"Resolving the build requirements of {spec.owner}",
        ),
    )  # fmt: skip
    lock = lockfile.BuildLock(
        pin=spec.upstream.pin_name,
        commit=pin.commit,
        python=python.major_minor,
        requirements=spec.requirements,
        files=tuple((p, sha256_or_none(texts[p]) or "") for p in files),
        dists=resolved.dists,
        left_out=resolved.left_out,
        regenerate=regenerate_command(spec.owner),
    )
    return lockfile.ResolvedLock(spec.lock_path or "", lock)


def _text(data: Optional[bytes]) -> Optional[str]:
    return None if data is None else data.decode()


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        *build_requirements.rules(),
        *interpreters.rules(),
        *source_tree.rules(),
        *upstream_repo.rules(),
        *build_spec.rules(),
    ])
