"""The errors a pins file can get, with their exact texts. pins/BUILD runs this file in both
resolves (pydantic 1 inside Pants 2.17.1, pydantic 2 for Pants 2.32+): one table of texts, so a
user sees the same words on either."""

import pydantic
import pytest

from rocm_build.pins.archive_pins import parse_archive_pins
from rocm_build.pins.pin_model import PYDANTIC_MAJOR, with_values
from rocm_build.pins.tables import PinsError, parse_pins, parse_prebuilt_pins

SHA = "0123456789abcdef0123456789abcdef01234567"
GIT = f'[torch]\nurl = "https://github.com/pytorch/pytorch.git"\ntrack = "main"\ncommit = "{SHA}"\n'
ARCHIVE = '[llvm]\nurl = "https://example.org/llvm-{hash8}.tar.gz"\nsha256 = ""\n'
PREBUILT = '[prebuilt.torch]\nindex_url = "https://repo.amd.com/simple"\nproject = "torch"\npython = "3.12"\ntrack = "==2.13.0"\n'


def test_runs_on_the_resolves_pydantic() -> None:
    # Each resolve's own pydantic: a lock that lost pydantic 2 would make both runs the same.
    assert PYDANTIC_MAJOR == int(pydantic.VERSION.split(".")[0]) and PYDANTIC_MAJOR in (1, 2)


@pytest.mark.parametrize(
    "parse, text, message",
    [
        (parse_pins, GIT + 'submodules = "maybe"\n', "[torch] field `submodules`: value could not be parsed to a boolean"),
        (parse_pins, GIT.replace('"https://github.com/pytorch/pytorch.git"', '["x"]'), "[torch] field `url`: str type expected"),
        (parse_pins, GIT + "tags = {a = 1}\n", "[torch] field `tags`: str type expected"),
        (
            parse_pins,
            GIT + "submodule = true\n",
            "[torch] field `submodule`: unknown field (allowed: url, track, commit, submodules, derived_from). "
            "Did you mean `submodules`?",
        ),
        (parse_pins, GIT.replace('track = "main"\n', ""), "[torch] field `track`: missing (every pin needs url and track; `pants run rules:update-pins` fills its commit)"),
        (
            parse_pins,
            GIT.replace(SHA, "main"),
            "[torch] field `commit`: 'main' looks like a branch or tag name; `commit` must be a full 40-digit SHA "
            "(put the branch in `track` and run `pants run rules:update-pins`)",
        ),
        (
            parse_archive_pins,
            ARCHIVE + 'strip = "llvm"\n',
            "[llvm] field `strip`: extra fields not permitted",
        ),
        (
            parse_archive_pins,
            ARCHIVE.replace("{hash8}", "{hash9}"),
            "[llvm] field `url`: 'https://example.org/llvm-{hash9}.tar.gz' is not a template of {hash} and {hash8} "
            "(KeyError('hash9'))",
        ),
        (
            parse_archive_pins,
            ARCHIVE.replace('sha256 = ""', "sha256 = 12"),
            "[llvm] field `sha256`: '12' is not a sha256 (64 lowercase hex digits, 2 given); `sha256sum FILE` "
            'prints it, or leave it "" and run `pants run rules:update-pins`',
        ),
        (
            parse_prebuilt_pins,
            PREBUILT + 'extr = "device-gfx1151"\n',
            "[prebuilt.torch] field `extr`: unknown field (allowed: index_url, project, python, track, device_of, "
            "version, file, sha256, requires_rocm, extra, requires_devices, derived_from). Did you mean `extra`?",
        ),
        (
            parse_prebuilt_pins,
            PREBUILT.replace('index_url = "https://repo.amd.com/simple"\n', ""),
            "[prebuilt.torch] field `index_url`: missing (every prebuilt pin needs index_url, project and python, "
            "which [prebuilt] or a device pin's host may give; a host pin also track, a device pin device_of)",
        ),
    ],
)
def test_error_texts_are_the_same_on_both_pydantics(parse, text: str, message: str) -> None:
    with pytest.raises(PinsError) as e:
        parse("components/pins.toml", text)
    assert str(e.value) == f"components/pins.toml: {message}"


def test_numbers_read_as_strings_and_pins_hash() -> None:
    pins = parse_pins("p.toml", GIT + "version = 1.5\n")
    assert pins["torch"].version == "1.5"
    assert len({pins["torch"], parse_pins("p.toml", GIT + "version = 1.5\n")["torch"]}) == 1


def test_pins_are_frozen_and_copied_with_values() -> None:
    pin = parse_prebuilt_pins("p.toml", PREBUILT)["torch"]
    with pytest.raises((TypeError, ValueError)):
        pin.version = "2.13.0"
    moved = with_values(pin, {"version": "2.13.0", "file": "torch-2.13.0-cp312-cp312-linux_x86_64.whl"})
    assert (moved.version, moved.track, pin.version) == ("2.13.0", "==2.13.0", "")
    assert parse_prebuilt_pins("p.toml", PREBUILT)["torch"].index_url == "https://repo.amd.com/simple/"
