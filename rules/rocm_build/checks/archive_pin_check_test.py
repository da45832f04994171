"""checks/archive_pin_check.py: each archive of `archives` is asked for by its address, named as the
rocm_wheel's field; an unresolved pin is a problem naming the fix, a failed read is reported, and
the archives after either are still checked (every problem in one report).
tests/e2e/hermetic_test.py's "is not resolved: it has no sha256" is this problem, at the rule."""

from __future__ import annotations

from pants.engine.addresses import Address

from rocm_build.checks.archive_pin_check import ArchivePinsCheck, check_archive_pins
from rocm_build.errors import RocmBuildError
from rocm_build.testutil.engine import drive
from rocm_build.testutil.specs import wheel_spec
from rocm_build.upstream.archives import ArchiveRequest, ArchiveSpec

DATA = Address("tests/mini/aotriton", target_name="data")
GONE = Address("tests/mini/aotriton", target_name="gone")
GOOD = Address("tests/mini/aotriton", target_name="good")
URL = "https://example.invalid/data-1.tar.gz"


def archive(address: Address, sha256: str) -> ArchiveSpec:
    return ArchiveSpec(address, URL, (), sha256, "", f"the `sha256` field of {address.spec}")


def test_unresolved_and_unreadable_archives_are_each_a_problem_and_all_are_checked() -> None:
    answers = {
        DATA: archive(DATA, ""),
        GONE: RocmBuildError("tests/mini/aotriton:gone is not an upstream_archive"),
        GOOD: archive(GOOD, "a" * 64),
    }
    spec = wheel_spec(archives=(("MINI_DATA", DATA), ("MINI_GONE", GONE), ("MINI_GOOD", GOOD)))
    found, asked = drive(check_archive_pins(ArchivePinsCheck(spec)), lambda _, request: answers[request.address])
    assert asked == [
        (ArchiveSpec, ArchiveRequest(a, "the `archives` field of tests/mini/torch:wheel")) for a in (DATA, GONE, GOOD)
    ]
    assert found.problems == (
        "upstream_archive tests/mini/aotriton:data is not resolved: it has no sha256 (the `sha256` field of "
        f"tests/mini/aotriton:data). Where {URL} is reachable, check the archive and put its `sha256sum` there "
        "(never guess one); for an archive pin, `pants run rules:update-pins` does it where the upstreams are reachable.",
        "tests/mini/aotriton:gone is not an upstream_archive",
    )


def test_a_sha256_that_is_not_one_is_named() -> None:
    spec = wheel_spec(archives=(("MINI_DATA", DATA),))
    found, _ = drive(check_archive_pins(ArchivePinsCheck(spec)), lambda _, r: archive(DATA, "ABC"))
    assert found.problems == (
        "upstream_archive tests/mini/aotriton:data: `sha256` 'ABC' (the `sha256` field of tests/mini/aotriton:data) "
        "is not 64 lowercase hex digits",
    )


def test_no_archives_asks_for_nothing() -> None:
    found, asked = drive(check_archive_pins(ArchivePinsCheck(wheel_spec())), lambda *_: None)
    assert (found.problems, asked) == ((), [])
