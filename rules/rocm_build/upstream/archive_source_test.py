"""upstream/archive_source.py: an upstream_archive's unpacked tree becomes a source pack, one
commit dated by the archive's newest member, by the real pack process (scripts/source_pack.py,
the host's git) in the engine; the download is the one Get answered here. A pack that fails
names the target and says git's last lines. That the commit is the same bytes anywhere is
scripts/source_pack_test.py's; tests/e2e/kernels_test.py and choices_test.py build and read
archives end to end."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from pants.engine.addresses import Address
from pants.engine.fs import AddPrefix, CreateDigest, Digest, DigestContents, DigestSubset, FileContent, MergeDigests
from pants.engine.process import FallibleProcessResult, Process
from pants.testutil.rule_runner import QueryRule, RuleRunner

from rocm_build.errors import RocmBuildError
from rocm_build.subsystems import host_tools
from rocm_build.subsystems.host_tools import HostTools
from rocm_build.testutil.engine import drive
from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner
from rocm_build.upstream.archive_source import ArchivePackRequest, pack_archive
from rocm_build.upstream.archives import UnpackedArchive
from rocm_build.upstream.fetch import PACK_DIR, FetchedTree

SDIST = Address("components/flash_attention", target_name="sdist")
NEWEST = 1760000000  # the newest member's mtime: the commit's date
SPEC = SimpleNamespace(url="https://files.example/flash_attn-2.8.3.tar.gz")  # the rule reads only its URL


@pytest.fixture(scope="module")
def rule_runner() -> RuleRunner:
    return isolated_rule_runner(
        rules=[
            *host_tools.rules(),
            QueryRule(HostTools, []),
            QueryRule(FallibleProcessResult, [Process]),
            QueryRule(DigestContents, [Digest]),
            QueryRule(DigestContents, [DigestSubset]),
            *(QueryRule(Digest, [t]) for t in (CreateDigest, AddPrefix, MergeDigests, DigestSubset)),
        ],
    )


def pack(rule_runner: RuleRunner, process_result: Any = None) -> FetchedTree:
    """pack_archive on a two-file tree; its process runs for real unless `process_result` stands in."""
    tree = rule_runner.request(Digest, [CreateDigest([FileContent("setup.py", b"# setup\n"), FileContent("flash_attn/__init__.py", b"")])])

    def answer(output_type: type, asked: Any) -> Any:
        if output_type is UnpackedArchive:
            return UnpackedArchive(SPEC, tree, NEWEST)
        if output_type is FallibleProcessResult and process_result is not None:
            return process_result
        return rule_runner.request(output_type, [asked])

    result, _ = drive(pack_archive(ArchivePackRequest(SDIST, "the `source` field of x"), rule_runner.request(HostTools, [])), answer)
    return result


def test_the_unpacked_tree_is_one_commit_dated_by_its_newest_member(rule_runner: RuleRunner) -> None:
    fetched = pack(rule_runner)
    assert fetched.commit_time == NEWEST
    files = [fc.path for fc in rule_runner.request(DigestContents, [fetched.pack])]
    # Only the pack: the unpacked tree and the date file are not part of it.
    assert files and all(p.startswith(f"{PACK_DIR}/") for p in files)
    assert any(p.endswith(".pack") for p in files)


def test_a_pack_that_fails_names_the_target_and_gits_last_lines(rule_runner: RuleRunner) -> None:
    said = "".join(f"line {i}\n" for i in range(12)) + "fatal: unable to write new index file\n"
    with pytest.raises(RocmBuildError) as raised:
        pack(rule_runner, SimpleNamespace(exit_code=128, stderr=said.encode()))
    assert str(raised.value) == (
        "components/flash_attention:sdist: packing the unpacked archive failed (exit 128); git said:\n"
        + "".join(f"    line {i}\n" for i in range(5, 12))
        + "    fatal: unable to write new index file"
    )
