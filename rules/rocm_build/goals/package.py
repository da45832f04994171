"""`pants package <rocm_wheel>`: the wheel's whole chain to dist/, each wheel with its build
log under its target's directory, and the chain as one install set beside it."""

from __future__ import annotations

import json
import logging
import shlex
from dataclasses import dataclass
from typing import Dict, Iterable, Sequence, Tuple

from pants.core.goals.package import BuiltPackage, BuiltPackageArtifact, PackageFieldSet
from pants.engine.fs import AddPrefix, CreateDigest, Digest, FileContent, MergeDigests
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.unions import UnionRule
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.errors import RocmBuildError
from rocm_build.install.box_check import CHECK_STEP, box_check_files
from rocm_build.install.load_check import CheckedInstallSet, InstallSetCheckRequest, SetWheel, wheels_of
from rocm_build.install.runtime_set import ENV_SCRIPT, RuntimeSet, RuntimeSetRequest, check_runtime_set, env_script, with_runtime_lines
from rocm_build.wheel.built_wheel import BuiltWheel
from rocm_build.wheel.target_types import WheelSourceField
from rocm_build.build.build import BuiltRocmWheel, is_prebuilt
from rocm_build.wheel.build_spec import WheelRequest, dist_dir
from rocm_build.checks.chain import ChainRequest, CheckedChain
from rocm_build.build import build as wheel_build
from rocm_build.checks import chain as chain_check
from rocm_build.install import load_check, runtime_set
from rocm_build.wheel import chain_order

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


@rule(desc="Writing and checking a rocm_wheel chain's install set")
async def install_set(request: InstallSetRequest) -> InstallSet:
    """`wheels/` (a find-links folder with every wheel of the chain) and a requirements file
    pinning each by version and sha256, so that
    `pip install --no-index --find-links <dir>/wheels -r <dir>/requirements.txt` installs
    exactly this chain, and nothing that merely has the same version."""
    closure = request.closure
    sources = [(w, json.loads(w.build_info)["source"]) for w in closure]
    extras = device_extras(source for _, source in sources)
    hosts = [(w, source) for w, source in sources if "prebuilt" in source and "device_of" not in source]
    lines = [
        "# The rocm_wheel chain of one `pants package`: every wheel by version and sha256.",
        CHECK_STEP,
        "# pip install --no-index --find-links wheels --require-hashes -r requirements.txt  (from this directory)",
        *(
            # What a prebuilt wheel itself requires (TheRock's torch: rocm[libraries]) is not
            # part of the chain: it comes from the wheel's own index, installed first.
            f"# first, the prebuilt {w.wheel_name.split('-')[0]} and what it requires: pip install --index-url "
            f"{source['index_url']} {shlex.quote(requirement(w, extras.get(source['prebuilt'], ())))}"
            for w, source in hosts
        ),
        *(
            f"{requirement(w, extras.get(source.get('prebuilt', ''), ()))} --hash=sha256:{w.wheel_sha256}"
            for w, source in sorted(sources, key=lambda pair: pair[0].wheel_name or "")
        ),
    ]
    addresses = tuple(w.address for w in closure)
    runtime = await Get(RuntimeSet, RuntimeSetRequest(addresses[-1].spec, addresses))
    lines = with_runtime_lines(runtime, lines)
    # The set's libraries, symbols and GPU code, as the box would load them (install/load_check.py),
    # checked while the set is written: wheels/ (the chain's and the run-time lock's), the
    # requirements and env.sh (the run-time environment).
    check = load_check_request(closure, await wheels_of(runtime.wheels), runtime.sdk_install)
    checked, wheels, files = await MultiGet(
        Get(CheckedInstallSet, InstallSetCheckRequest, check),
        Get(Digest, MergeDigests([*(w.wheel for w in closure), runtime.wheels])),
        Get(
            Digest,
            CreateDigest(
                [
                    FileContent(INSTALL_REQUIREMENTS, "\n".join([*lines, ""]).encode()),
                    FileContent(ENV_SCRIPT, env_script(runtime.env).encode()),
                    # check_box.py and what it checks the box against (install/box_check.py)
                    *box_check_files(closure[-1].address.spec, chain_gpu_targets(closure)),
                ]
            ),
        ),
    )
    checked.raise_problems()
    logger.info(f"{checked.owner}: the install set loads: {checked.summary()}")
    for note in checked.notes:
        logger.warning(f"{checked.owner}: {note}")
    return InstallSet(await Get(Digest, MergeDigests([await Get(Digest, AddPrefix(wheels, "wheels")), files])))


def chain_gpu_targets(closure: Tuple[BuiltRocmWheel, ...]) -> Tuple[str, ...]:
    """Every gpu target of the chain's wheels, in chain order."""
    return tuple(dict.fromkeys(t for w in closure for t in json.loads(w.build_info).get("gpu_targets", ())))


def load_check_request(closure: Tuple[BuiltRocmWheel, ...], runtime_wheels: Sequence[BuiltWheel], sdk_install: str) -> InstallSetCheckRequest:
    chain = [SetWheel(BuiltWheel(w.wheel, w.wheel_name or ""), w.address.spec, audited=not is_prebuilt(w)) for w in closure]
    locked = [SetWheel(w, "the chain's run-time lock", audited=False) for w in runtime_wheels]
    gpu_targets = chain_gpu_targets(closure)
    addresses = tuple(w.address for w in closure)
    return InstallSetCheckRequest(closure[-1].address.spec, (*chain, *locked), gpu_targets, addresses, sdk_install)


@rule
async def package_rocm_wheel(field_set: RocmWheelFieldSet) -> BuiltPackage:
    # Toolchains, archives and locks of the whole chain are checked before any fetch or
    # build starts.
    await Get(CheckedChain, ChainRequest(field_set.address))
    await check_runtime_set(field_set.address)  # runtime_env conflicts, run-time locks
    built = await Get(BuiltRocmWheel, WheelRequest(field_set.address))
    if built.error:
        raise RocmBuildError(built.error)
    # The whole chain goes to dist/, each wheel with its build log, under its target's dir;
    # and, for the target packaged, the chain as one thing to install (see install_set),
    # checked while the others are written.
    install = f"{dist_dir(field_set.address)}.install"
    *merged, install_digest = await MultiGet(
        [
            *(Get(Digest, MergeDigests([w.wheel, w.log])) for w in built.closure),
            Get(InstallSet, InstallSetRequest(built.closure)),
        ]
    )
    outputs = await MultiGet(
        [
            *(Get(Digest, AddPrefix(m, dist_dir(w.address))) for m, w in zip(merged, built.closure)),
            Get(Digest, AddPrefix(install_digest.digest, install)),
        ]
    )
    artifacts = [BuiltPackageArtifact(f"{dist_dir(w.address)}/{w.wheel_name}") for w in built.closure]
    artifacts.append(BuiltPackageArtifact(f"{install}/{INSTALL_REQUIREMENTS}"))
    return BuiltPackage(await Get(Digest, MergeDigests(outputs)), tuple(artifacts))


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        UnionRule(PackageFieldSet, RocmWheelFieldSet),
        *wheel_build.rules(),
        *chain_check.rules(),
        *load_check.rules(),
        *runtime_set.rules(),
        *chain_order.rules(),
    ])
