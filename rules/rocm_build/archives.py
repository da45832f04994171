"""upstream_archive: a pinned archive, downloaded once, verified by sha256, unpacked.

The download is the only step that touches the network. Its result is a tree digest, so
whatever uses it is keyed by the archive's content, never by the URL it came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from pants.engine.addresses import Address
from pants.engine.fs import Digest, RemovePrefix
from pants.engine.process import FallibleProcessResult, Process
from pants.engine.rules import Get, collect_rules, rule
from pants.option.global_options import GlobalOptions
from pants.util.logging import LogLevel

from rocm_build.errors import RocmBuildError, indent, tail
from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_digest
from rocm_build.target_types import (
    ArchiveMirrorsField,
    ArchiveSha256Field,
    ArchiveStripPrefixField,
    ArchiveUrlField,
    UpstreamArchiveTarget,
)
from rocm_build.targets import expect_target
from rocm_build.tools import HostTools

ARCHIVE_DIR = "archive"
SHA256 = re.compile(r"^[0-9a-f]{64}$")
EXIT_MISMATCH, EXIT_DOWNLOAD, EXIT_UNPACK = 20, 21, 22


@dataclass(frozen=True)
class ArchiveRequest:
    address: Address
    description_of_origin: str


@dataclass(frozen=True)
class FetchedArchive:
    address: Address
    url: str
    sha256: str
    tree: Digest  # the unpacked archive, at the digest root


def pin_problem(target: UpstreamArchiveTarget) -> Optional[str]:
    """Why the archive cannot be fetched as pinned, without downloading anything."""
    owner, url, sha256 = target.address.spec, target[ArchiveUrlField].value, target[ArchiveSha256Field].value.strip()
    if not sha256:
        return (
            f"upstream_archive {owner} is not resolved: it has no sha256. Where {url} is "
            f"reachable, check the archive and put its `sha256sum` into the target (never guess one)."
        )
    if not SHA256.match(sha256):
        return f"upstream_archive {owner}: `sha256` {sha256!r} is not 64 lowercase hex digits"
    return None


@rule(desc="Fetching an upstream_archive")
async def fetch_archive(request: ArchiveRequest, tools: HostTools, global_options: GlobalOptions) -> FetchedArchive:
    target = await expect_target(request.address, UpstreamArchiveTarget, request.description_of_origin)
    owner = target.address.spec
    problem = pin_problem(target)
    if problem:
        raise RocmBuildError(problem)
    url, sha256 = target[ArchiveUrlField].value, target[ArchiveSha256Field].value.strip()
    urls = (url, *(target[ArchiveMirrorsField].value or ()))
    result = await Get(
        FallibleProcessResult,
        Process(
            argv=(
                tools.python.path, f"{SCRIPTS_DIR}/fetch_archive.py",
                sha256, target[ArchiveStripPrefixField].value or "", *urls,
            ),
            env={"PATH": "/usr/bin:/bin", "ROCM_BUILD_CA_CERTS": global_options.ca_certs_path or ""},
            input_digest=await script_digest("fetch_archive.py"),
            output_directories=(ARCHIVE_DIR,),
            description=f"Fetching upstream_archive {owner} ({url})",
            level=LogLevel.INFO,
            timeout_seconds=3600,
        ),
    )  # fmt: skip
    if result.exit_code != 0:
        said = result.stderr.decode(errors="replace")
        if result.exit_code == EXIT_MISMATCH:
            got = re.search(r"got sha256:(\w+) from (\S+)", said)
            raise RocmBuildError(
                f"upstream_archive {owner}: the file at {got.group(2) if got else url} has sha256 "
                f"{got.group(1) if got else '?'}, but the target pins {sha256}. Nothing was "
                f"unpacked. If the new bytes are expected, check them and update `sha256`."
            )
        what = "could not be downloaded" if result.exit_code == EXIT_DOWNLOAD else "could not be unpacked"
        raise RocmBuildError(f"upstream_archive {owner}: {url} {what}.\n{indent(tail(said, 8))}")
    tree = await Get(Digest, RemovePrefix(result.output_digest, ARCHIVE_DIR))
    return FetchedArchive(target.address, url, sha256, tree)


def rules():
    return collect_rules()
