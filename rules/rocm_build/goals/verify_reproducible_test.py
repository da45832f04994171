"""goals/verify_reproducible.py's rule: the rebuild is the build's own Process with no kept build
directory, no compiler cache and no Pants cache beyond the session; the rebuild is compared with
the cached build's payload (or, with --against, the finished wheel with that file), and the
report names both sha256s and the differing members.
tests/e2e/reproducible_test.py's test_verify_reproducible_passes_and_names_an_injected_difference
("ok ... byte-identical to the cached build", "Rebuilding rocm_wheel ... to verify it", the
DIFFERENT line and the two sha256 lines), at the rule; the comparison script is compare_wheels'."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from types import SimpleNamespace
from typing import Any, List

import pytest
from pants.base.build_root import BuildRoot
from pants.core.target_types import FileTarget
from pants.engine.addresses import Address, Addresses
from pants.engine.fs import EMPTY_DIGEST, AddPrefix, CreateDigest, Digest, FileContent
from pants.engine.process import FallibleProcessResult, Process, ProcessCacheScope
from pants.engine.target import Targets
from pants.testutil.option_util import create_goal_subsystem

from rocm_build.build.build_output import BuiltPayload, FinishedWheel
from rocm_build.errors import RocmBuildError
from rocm_build.goals.verify_reproducible import (
    AgainstWheel, RebuildCheck, RebuildCheckRequest, VerifyReproducibleSubsystem, rebuild_and_compare, verify_reproducible,
)  # fmt: skip
from rocm_build.prepare.inputs import BuiltRocmWheel, PreparedWheelBuild
from rocm_build.testutil.engine import drive
from rocm_build.testutil.specs import wheel_spec
from rocm_build.toolchain.interpreters import BuildPython
from rocm_build.toolchain.rocm_sdk import ResolvedToolchain
from rocm_build.wheel.build_process import WheelBuildRequest
from rocm_build.wheel.target_types import RocmWheelTarget

AOT = Address("tests/mini/aotriton", target_name="wheel")
WHEEL = "mini_aotriton-1.0.0+llvm19gfx1151-cp311-cp311-linux_x86_64.whl"
TOOLS = SimpleNamespace(bash=SimpleNamespace(path="/usr/bin/bash"), python=SimpleNamespace(path="/usr/bin/python3"))
CACHED, REBUILT, FINISHED, AGAINST = (Digest(c * 64, i) for i, c in enumerate("abcd"))
DIFF = "differs: actual/mini_aotriton/stamp.py (byte 9: expected/ 0x31, actual/ 0x32)"


# The build's request with a kept build directory; the rule passes it on, with none.
REQUEST = WheelBuildRequest(
    wheel_spec(address=AOT), ResolvedToolchain(Address("tests/mini", target_name="llvm"), "llvm", "clang 19", "llvm19", ""),
    BuildPython("/usr/bin/python3.11", "CPython", "3.11.2"), True, None, "llvm19gfx1151", 0, EMPTY_DIGEST,
    kept_key="build-dir-of-aotriton",
)  # fmt: skip


def run(rebuild_exit: int = 0, compare_exit: int = 0, against: Any = None):
    build = Process(argv=("build_wheel.sh",), description="Building rocm_wheel", env={"CCACHE_DIR": "/cache"})
    processes: List[Process] = []

    def answer(output_type: type, request: Any) -> Any:
        if output_type is BuiltRocmWheel:
            return SimpleNamespace(payload=CACHED, payload_sha256="1" * 64)
        if output_type is PreparedWheelBuild:
            return SimpleNamespace(request=REQUEST, build_info="{}")
        if output_type is Process:
            assert request == replace(REQUEST, kept_key="")  # from an empty build directory
            return build
        if output_type is FallibleProcessResult:
            processes.append(request)
            code = rebuild_exit if len(processes) == 1 else compare_exit
            return SimpleNamespace(exit_code=code, output_digest=REBUILT, stdout=(DIFF + "\n").encode())
        if output_type is BuiltPayload:
            return BuiltPayload(WHEEL, REBUILT, "2" * 64, REBUILT)
        if output_type is FinishedWheel:
            return FinishedWheel(FINISHED, WHEEL, "3" * 64, "{}")
        if isinstance(request, AddPrefix):
            compared.append(request)
        return Digest("e" * 64, 9)

    compared: List[AddPrefix] = []
    result, _ = drive(rebuild_and_compare(RebuildCheckRequest(AOT, against), TOOLS), answer)
    return result, processes, compared


def test_the_rebuild_uses_no_cache_and_an_identical_one_is_ok() -> None:
    result, processes, compared = run()
    assert result == RebuildCheck(True, f"ok {AOT.spec}: the rebuild is byte-identical to the cached build of {AOT.spec} ({WHEEL})")
    rebuild = processes[0]
    assert rebuild.description == f"Rebuilding rocm_wheel {AOT.spec} to verify it"
    assert dict(rebuild.env) == {"CCACHE_DIR": "/cache", "CCACHE_DISABLE": "1"}
    assert rebuild.cache_scope == ProcessCacheScope.PER_SESSION
    # The cached build's payload (no build info) against the rebuild's.
    assert compared == [AddPrefix(CACHED, "expected"), AddPrefix(REBUILT, "actual")]


def test_a_difference_names_both_sha256s_and_the_members() -> None:
    result, _, _ = run(compare_exit=1)
    assert result == RebuildCheck(False, "\n".join([
        f"DIFFERENT {AOT.spec}: the rebuild differs from the cached build of {AOT.spec}:",
        f"  sha256 {'1' * 64} (the cached build of {AOT.spec})",
        f"  sha256 {'2' * 64} (the rebuild)",
        "  differs: rebuilt mini_aotriton/stamp.py (byte 9: expected  0x31, rebuilt  0x32)",
    ]))  # fmt: skip


def test_against_a_wheel_the_finished_rebuild_is_compared_with_it() -> None:
    against = AgainstWheel("downloads/" + WHEEL, AGAINST, "4" * 64)
    result, _, compared = run(compare_exit=1, against=against)
    assert compared == [AddPrefix(AGAINST, "expected"), AddPrefix(FINISHED, "actual")]
    assert result.report.splitlines()[:3] == [
        f"DIFFERENT {AOT.spec}: the rebuild differs from downloads/{WHEEL}:",
        f"  sha256 {'4' * 64} (downloads/{WHEEL})",
        f"  sha256 {'3' * 64} (the rebuild)",
    ]


def test_a_failed_rebuild_is_an_error() -> None:
    with pytest.raises(RocmBuildError, match=r"^verify-reproducible: the rebuild of tests/mini/aotriton:wheel failed \(exit 2\)$"):
        run(rebuild_exit=2)


# The goal: which targets it takes, the --against file it reads, the reports in the order given.
TORCH = Address("tests/mini/torch", target_name="wheel")
SRC = Address("tests/mini/torch", target_name="src")  # not a rocm_wheel: the goal leaves it out


def target(address: Address) -> Any:
    if address == SRC:
        return FileTarget({"source": "x"}, address)
    return RocmWheelTarget({"source": ":src", "toolchain": "tests/mini:llvm"}, address)


def goal(addresses, against=None, reports=None):
    printed: List[str] = []
    console = SimpleNamespace(print_stdout=printed.append)  # the goal only prints to stdout
    options = create_goal_subsystem(VerifyReproducibleSubsystem, against=against)
    targets = Targets([target(a) for a in addresses])

    def answer(output_type: type, request: Any) -> Any:
        if output_type is Targets:
            return targets
        if output_type is Digest:
            created.append(request)
            return AGAINST
        return (reports or {})[request.address]

    created: List[Any] = []
    result, asked = drive(verify_reproducible(console, Addresses(addresses), options), answer)
    return result, printed, [r for t, r in asked if t is RebuildCheck], created


def test_every_target_is_rebuilt_and_reported_in_order_and_one_difference_fails() -> None:
    reports = {AOT: RebuildCheck(True, "ok aotriton"), TORCH: RebuildCheck(False, "DIFFERENT torch")}
    result, printed, asked, _ = goal([AOT, SRC, TORCH], reports=reports)
    assert asked == [RebuildCheckRequest(AOT, None), RebuildCheckRequest(TORCH, None)]  # only the rocm_wheels
    assert (printed, result.exit_code) == (["ok aotriton", "DIFFERENT torch"], 1)
    result, _, _, _ = goal([AOT], reports=reports)
    assert result.exit_code == 0


def test_no_rocm_wheel_or_two_with_against_is_refused() -> None:
    for addresses, against in (([SRC], None), ([AOT, TORCH], "other.whl")):
        with pytest.raises(RocmBuildError) as e:
            goal(addresses, against)
        assert str(e.value) == "verify-reproducible: give it rocm_wheel targets (exactly one with --against)"


def test_against_reads_the_file_from_the_build_root(tmp_path) -> None:
    (tmp_path / "downloads").mkdir()
    (tmp_path / "downloads" / WHEEL).write_bytes(b"wheel bytes")
    with BuildRoot().temporary(str(tmp_path)):
        _, _, asked, created = goal([AOT], f"downloads/{WHEEL}", {AOT: RebuildCheck(True, "ok")})
        with pytest.raises(RocmBuildError, match=r"^verify-reproducible: cannot read --against gone\.whl: "):
            goal([AOT], "gone.whl")
    assert asked == [RebuildCheckRequest(AOT, AgainstWheel(f"downloads/{WHEEL}", AGAINST, hashlib.sha256(b"wheel bytes").hexdigest()))]
    assert created == [CreateDigest([FileContent(WHEEL, b"wheel bytes")])]
