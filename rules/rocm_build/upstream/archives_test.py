"""upstream_archive against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import functools
import hashlib
import io
import tarfile
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from pants.engine.addresses import Address
from pants.engine.fs import Digest, DigestContents
from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import QueryRule, RuleRunner

from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner
from rocm_build.upstream import archives
from rocm_build.upstream.archives import ArchiveRequest, FetchedArchive
from rocm_build.upstream.target_types import PatchSetTarget, UpstreamArchiveTarget

ARCHIVE = Address("third_party", target_name="llvm")


def tarball(files: dict) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755 if name.endswith("/clang") else 0o644
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture
def server(tmp_path: Path):
    (tmp_path / "llvm-abc-ubuntu-x64.tar.gz").write_bytes(
        tarball({"llvm-abc-ubuntu-x64/bin/clang": b"#!/bin/sh\n", "llvm-abc-ubuntu-x64/lib/cmake/LLVMConfig.cmake": b"# llvm\n"})
    )
    evil = io.BytesIO()
    with tarfile.open(fileobj=evil, mode="w:gz") as tf:
        link = tarfile.TarInfo("llvm-abc-ubuntu-x64/lib")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc"
        tf.addfile(link)
    (tmp_path / "evil.tar.gz").write_bytes(evil.getvalue())
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(tmp_path))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", hashlib.sha256((tmp_path / "llvm-abc-ubuntu-x64.tar.gz").read_bytes()).hexdigest()
    httpd.shutdown()


@pytest.fixture
def rule_runner(tmp_path) -> RuleRunner:
    return isolated_rule_runner(
        rules=[*archives.rules(), QueryRule(FetchedArchive, [ArchiveRequest]), QueryRule(DigestContents, [Digest])],
        target_types=[UpstreamArchiveTarget, PatchSetTarget],
        named_caches=tmp_path / "named",
    )


def fetch(rule_runner: RuleRunner, url: str, sha256: str, mirrors: str = "[]") -> FetchedArchive:
    rule_runner.write_files(
        {
            "third_party/BUILD": f"upstream_archive(name='llvm', url='{url}', mirrors={mirrors}, sha256='{sha256}', "
            "strip_prefix='llvm-abc-ubuntu-x64')"
        }
    )
    return rule_runner.request(FetchedArchive, [ArchiveRequest(ARCHIVE, "test")])


def unpacked(rule_runner: RuleRunner, archive: FetchedArchive) -> dict:

    contents = rule_runner.request(DigestContents, [archive.tree])
    return {fc.path: (fc.content, fc.is_executable) for fc in contents}


def test_downloads_verifies_and_unpacks_with_strip_prefix(rule_runner, server) -> None:
    base, sha = server
    # The first URL is broken: the mirror serves the same bytes.
    archive = fetch(rule_runner, f"{base}/gone.tar.gz", sha, mirrors=f"['{base}/llvm-abc-ubuntu-x64.tar.gz']")
    assert archive.sha256 == sha
    assert unpacked(rule_runner, archive) == {
        "bin/clang": (b"#!/bin/sh\n", True),
        "lib/cmake/LLVMConfig.cmake": (b"# llvm\n", False),
    }


def test_wrong_sha256_names_both_digests_and_the_url(rule_runner, server) -> None:
    base, sha = server
    with pytest.raises(ExecutionError) as e:
        fetch(rule_runner, f"{base}/llvm-abc-ubuntu-x64.tar.gz", "0" * 64)
    assert (
        f"upstream_archive third_party:llvm: the file at {base}/llvm-abc-ubuntu-x64.tar.gz has sha256 {sha}, "
        f"but the target pins {'0' * 64}. Nothing was unpacked."
    ) in str(e.value)


def test_unresolved_archive_stops_before_any_download(rule_runner, server) -> None:
    base, _ = server
    with pytest.raises(ExecutionError) as e:
        fetch(rule_runner, f"{base}/llvm-abc-ubuntu-x64.tar.gz", "")
    assert "upstream_archive third_party:llvm is not resolved: it has no sha256" in str(e.value)


def test_archive_pin_reads_url_sha256_and_prefix_from_the_archive_pins_file(rule_runner, server) -> None:
    base, sha = server
    rule_runner.write_files(
        {
            "components/archives/llvm.toml": f'[llvm]\nurl = "{base}/llvm-abc-ubuntu-x64.tar.gz"\nsha256 = "{sha}"\n'
            'strip_prefix = "llvm-abc-ubuntu-x64"\n',
            "third_party/BUILD": "upstream_archive(name='llvm', pin='llvm')",
        }
    )
    archive = rule_runner.request(FetchedArchive, [ArchiveRequest(ARCHIVE, "test")])
    assert sorted(unpacked(rule_runner, archive)) == ["bin/clang", "lib/cmake/LLVMConfig.cmake"]
    rule_runner.write_files({"components/archives/llvm.toml": '[llvm]\nurl = ""\nsha256 = ""\n'})
    with pytest.raises(ExecutionError) as e:
        rule_runner.request(FetchedArchive, [ArchiveRequest(ARCHIVE, "test")])
    assert "upstream_archive third_party:llvm is not resolved: it has no sha256 ([llvm] in components/archives)" in str(e.value)


def test_a_hostile_archive_is_refused_naming_the_target_the_pin_the_url_and_the_member(rule_runner, server, tmp_path) -> None:
    # scripts/fetch_archive.py refuses each kind of hostile member (fetch_archive_test.py); here, what the rule says.
    base, _ = server
    sha = hashlib.sha256((tmp_path / "evil.tar.gz").read_bytes()).hexdigest()
    rule_runner.write_files(
        {
            "components/archives/llvm.toml": f'[llvm]\nurl = "{base}/evil.tar.gz"\nsha256 = "{sha}"\nstrip_prefix = "llvm-abc-ubuntu-x64"\n',
            "third_party/BUILD": "upstream_archive(name='llvm', pin='llvm')",
        }
    )
    with pytest.raises(ExecutionError) as e:
        rule_runner.request(FetchedArchive, [ArchiveRequest(ARCHIVE, "test")])
    assert (
        f"upstream_archive third_party:llvm: the archive at {base}/evil.tar.gz (pinned by [llvm] in "
        "components/archives) was not unpacked: refused member 'llvm-abc-ubuntu-x64/lib': it is a symbolic "
        f"link to the absolute path '/etc'. Nothing from it was used. These are the pinned bytes (sha256 {sha}): "
        "have its publisher fix the archive, or pin one whose members all stay inside it."
    ) in str(e.value)


def test_an_archive_comes_from_its_mirror_with_the_same_checks_and_key(rule_runner, server) -> None:
    base, sha = server
    # The upstream host does not exist; `[rocm-build] mirrors` sends its URLs to the local server.
    rule_runner.set_options([f'--rocm-build-mirrors={{"https://llvm.example.invalid/": "{base}/"}}'], env_inherit={"PATH"})
    archive = fetch(rule_runner, "https://llvm.example.invalid/llvm-abc-ubuntu-x64.tar.gz", sha)
    assert unpacked(rule_runner, archive)["bin/clang"] == (b"#!/bin/sh\n", True)
    # Still checked by sha256: the mirror cannot serve other bytes under the pinned name.
    with pytest.raises(ExecutionError) as e:
        fetch(rule_runner, "https://llvm.example.invalid/evil.tar.gz", sha)
    assert "sha256" in str(e.value)


EDIT = """[[edit]]
path = "lib/cmake/LLVMConfig.cmake"
pattern = '^# llvm$'
replace = '# llvm, patched'
applied = 'patched'
"""

DIFF = """--- a/bin/clang
+++ b/bin/clang
@@ -1 +1,2 @@
 #!/bin/sh
+echo clang
"""


def patched_archive(rule_runner: RuleRunner, base: str, sha: str, diff: str = DIFF) -> FetchedArchive:
    rule_runner.write_files(
        {
            "patches/llvm/BUILD": "patch_set(name='fixes')",
            "patches/llvm/0001-cmake.edit.toml": EDIT,
            "patches/llvm/0002-clang.diff": diff,
            "third_party/BUILD": f"upstream_archive(name='llvm', url='{base}/llvm-abc-ubuntu-x64.tar.gz', sha256='{sha}', "
            "strip_prefix='llvm-abc-ubuntu-x64', patches=['patches/llvm:fixes'])",
        }
    )
    return rule_runner.request(FetchedArchive, [ArchiveRequest(ARCHIVE, "test")])


def test_patches_apply_to_the_unpacked_tree_as_to_an_upstream_repo(rule_runner, server) -> None:
    base, sha = server
    archive = patched_archive(rule_runner, base, sha)
    # An edit and a diff, in file-name order; the executable bit of the patched file is kept.
    assert unpacked(rule_runner, archive) == {
        "bin/clang": (b"#!/bin/sh\necho clang\n", True),
        "lib/cmake/LLVMConfig.cmake": (b"# llvm, patched\n", False),
    }
    assert [p.path for p in archive.patches] == ["patches/llvm/0001-cmake.edit.toml", "patches/llvm/0002-clang.diff"]
    assert archive.patch_log.splitlines() == [
        "applied patches/llvm/0001-cmake.edit.toml edit 1 (lib/cmake/LLVMConfig.cmake)",
        "applied patches/llvm/0002-clang.diff",
    ]


def test_a_patch_that_does_not_apply_to_the_archive_names_the_target_the_patch_and_the_hunk(rule_runner, server) -> None:
    base, sha = server
    with pytest.raises(ExecutionError) as e:
        patched_archive(rule_runner, base, sha, DIFF.replace(" #!/bin/sh", " #!/bin/bash"))
    assert (
        "third_party:llvm: patches/llvm/0002-clang.diff: the hunk at bin/clang line 1 does not match the pinned source."
    ) in str(e.value)
