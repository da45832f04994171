"""`<wheel>.intoto.jsonl` beside each wheel we built in dist/: its provenance (statement.py),
signed with the user's key when `[rocm-provenance] signing_key` names one.

The signature is openssl's (`pkeyutl -sign -rawin`, Ed25519), run on this machine with the key's
path as an argument: the key never is a process input, so it reaches neither Pants' store nor a
cache, and the signature is made again in each session (the key file may have changed; Pants
does not watch it). Neither the plugin's Python (Pants' own) nor its resolve holds a crypto
library, and openssl is on every box that builds.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass
from typing import Dict, Tuple

from pants.base.build_root import BuildRoot
from pants.core.util_rules.system_binaries import BinaryPathRequest, BinaryPaths, BinaryPathTest
from pants.engine.fs import CreateDigest, Digest, FileContent, MergeDigests
from pants.engine.process import FallibleProcessResult, Process, ProcessCacheScope
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet
from pants.version import VERSION

from rocm_build.errors import RocmBuildError
from rocm_build.prepare.inputs import BuiltRocmWheel, is_prebuilt
from rocm_build.provenance.statement import PAYLOAD_TYPE, SUFFIX, envelope, pae, payload, statement
from rocm_build.subsystems.host_tools import SYSTEM_DIRS
from rocm_build.subsystems.provenance import ProvenanceSubsystem


@dataclass(frozen=True)
class WheelWithProvenance:
    """A wheel's folder in dist/: the wheel, its build log and, for one built here, its provenance."""

    wheel: BuiltRocmWheel


@dataclass(frozen=True)
class SignRequest:
    body: bytes  # the DSSE payload
    key: str  # the key's path on this machine


@dataclass(frozen=True)
class Signatures:
    signatures: Tuple[Dict[str, str], ...]


def key_path(option: str, build_root: str) -> str:
    path = os.path.expanduser(option)
    return path if os.path.isabs(path) else os.path.join(build_root, path)


@rule(desc="Signing a wheel's provenance", level=LogLevel.DEBUG)
async def sign_provenance(request: SignRequest) -> Signatures:
    found = await Get(BinaryPaths, BinaryPathRequest(binary_name="openssl", search_path=SYSTEM_DIRS, test=BinaryPathTest(["version"])))
    if not found.first_path:
        raise RocmBuildError(f"`[{ProvenanceSubsystem.options_scope}] signing_key` is set, but openssl, which signs, was not found in {', '.join(SYSTEM_DIRS)}: apt-get install openssl")
    openssl = found.first_path.path
    message = await Get(Digest, CreateDigest([FileContent("pae.bin", pae(PAYLOAD_TYPE, request.body))]))
    # PER_SESSION: never kept in a cache, so a key replaced at the same path signs the next run.
    signed, public = await MultiGet(
        Get(FallibleProcessResult, Process(
            [openssl, "pkeyutl", "-sign", "-rawin", "-inkey", request.key, "-in", "pae.bin"], input_digest=message,
            description="Signing a wheel's provenance", level=LogLevel.DEBUG, cache_scope=ProcessCacheScope.PER_SESSION,
        )),
        Get(FallibleProcessResult, Process(
            [openssl, "pkey", "-in", request.key, "-pubout", "-outform", "DER"],
            description="Reading the provenance key's public half", level=LogLevel.DEBUG, cache_scope=ProcessCacheScope.PER_SESSION,
        )),
    )  # fmt: skip
    for result in (signed, public):
        if result.exit_code != 0:
            said = result.stderr.decode(errors="replace").strip().splitlines()[:3]
            raise RocmBuildError(
                f"`[{ProvenanceSubsystem.options_scope}] signing_key`: openssl could not sign with {request.key}: {' '.join(said)}. "
                "It must be an Ed25519 private key in PEM (openssl genpkey -algorithm ed25519 -out KEY)."
            )
    keyid = hashlib.sha256(public.stdout).hexdigest()
    return Signatures(({"keyid": keyid, "sig": base64.b64encode(signed.stdout).decode()},))


@rule(desc="Writing a wheel's provenance", level=LogLevel.DEBUG)
async def wheel_with_provenance(request: WheelWithProvenance, settings: ProvenanceSubsystem, build_root: BuildRoot) -> Digest:
    wheel = request.wheel
    if is_prebuilt(wheel) or not wheel.wheel_name:
        # Someone else's wheel: we say nothing of how it was made (the set's SBOM says what it is).
        return await Get(Digest, MergeDigests([wheel.wheel, wheel.log]))
    body = payload(statement(json.loads(wheel.build_info), wheel.wheel_name, wheel.wheel_sha256, VERSION))
    signatures: Tuple[Dict[str, str], ...] = ()
    if settings.signing_key:
        signatures = (await Get(Signatures, SignRequest(body, key_path(settings.signing_key, build_root.path)))).signatures
    provenance = await Get(Digest, CreateDigest([FileContent(f"{wheel.wheel_name}{SUFFIX}", envelope(body, signatures))]))
    return await Get(Digest, MergeDigests([wheel.wheel, wheel.log, provenance]))


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *ProvenanceSubsystem.rules()])
