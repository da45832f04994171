"""A short fuzz run of each plugin parser (pins files, the package index client), and the
inputs earlier runs found, as regression tests."""

from __future__ import annotations

import pytest

from fuzz import fuzz_index, fuzz_patch_headers, fuzz_pins
from fuzz.harness import fuzz_for
from rocm_build.pins.archive_pins import parse_archive_pins
from rocm_build.pins.tables import PinsError, parse_pins
from rocm_build.pins.text_fields import set_commit_in_text, set_fields_in_text
from rocm_build.pins.update.prebuilt_index import IndexFile, newest, requires_rocm



def test_fuzz_pins_files(tmp_path) -> None:
    outcome = fuzz_for(fuzz_pins, tmp_path)
    assert outcome.exit_code == 0 and not outcome.crashes, outcome.output[-6000:]
    assert "Done" in outcome.output, outcome.output[-2000:]  # it ran all its inputs


def test_fuzz_patch_headers(tmp_path) -> None:
    outcome = fuzz_for(fuzz_patch_headers, tmp_path)
    assert outcome.exit_code == 0 and not outcome.crashes, outcome.output[-6000:]
    assert "Done" in outcome.output, outcome.output[-2000:]


def test_the_patch_header_seeds_hold() -> None:
    # Each seed through the checks the fuzzer makes (a CRLF header after a BOM among them).
    for seed in fuzz_patch_headers.SEEDS:
        fuzz_patch_headers.test_one_input(seed)


def test_fuzz_package_index_client(tmp_path) -> None:
    outcome = fuzz_for(fuzz_index, tmp_path)
    assert outcome.exit_code == 0 and not outcome.crashes, outcome.output[-6000:]
    assert "Done" in outcome.output, outcome.output[-2000:]


# Found by fuzz_pins: the in-place rewrites update-pins makes edited the first matching line,
# even one inside a multi-line string, and reported success.
MULTILINE_ARCHIVE = '[llvm]\nurl = "https://example.org/llvm.tar.gz"\nstrip_prefix = """\nsha256 = ""\n"""\n'
MULTILINE_PIN = '[x]\nurl = "https://example.org/x.git"\ntrack = """\ncommit = "%s"\n"""\ncommit = "%s"\n' % ("0" * 40, "a" * 40)


def test_a_rewrite_lands_in_the_field_not_inside_a_multiline_string() -> None:
    archive = set_fields_in_text(MULTILINE_ARCHIVE, "llvm", {"sha256": "b" * 64}, add_missing=True)
    assert parse_archive_pins("components/archives.toml", archive)["llvm"].sha256 == "b" * 64
    pin = set_commit_in_text(MULTILINE_PIN, "x", "1" * 40)
    assert parse_pins("components/pins.toml", pin)["x"].commit == "1" * 40


# Found by fuzz_index: what an index serves is not ours, yet these pages ended in a traceback
# in fetch (exit 1) and update-pins instead of an OSError naming the page.
JSON = "application/vnd.pypi.simple.v1+json"
HOSTILE_PAGES = [
    pytest.param(b"<a href='x.whl'>\xff</a>", "text/html", id="not utf-8"),
    pytest.param(b"<!DOCTYPE html>", JSON, id="not json"),
    pytest.param(b'{"name": "torch"}', JSON, id="no files"),
    pytest.param(b"[1]", JSON, id="not an object"),
    pytest.param(b'{"files": [{"url": "x.whl"}]}', JSON, id="no filename"),
    pytest.param(b'{"files": [{"filename": "x.whl", "url": true}]}', JSON, id="url not a string"),
    pytest.param(b'<a href="//[bad/torch-1.0-py3-none-any.whl">', "text/html", id="bad ipv6 href"),
    # 3.9's html.parser raises NotImplementedError here, 3.11's AssertionError.
    pytest.param(b"<![DOCTY html>", "text/html", id="html marked section"),
]


@pytest.mark.parametrize("body, kind", HOSTILE_PAGES)
def test_a_malformed_index_page_is_an_os_error(body, kind) -> None:
    fuzz_index.INDEX._open = lambda url, accept=None: fuzz_index.Response(body, kind)
    with pytest.raises(OSError):
        fuzz_index.INDEX.project_files(fuzz_index.INDEX_URL, "torch")


def test_a_wheel_name_with_a_bad_version_does_not_fit() -> None:
    name = "torch-2.a12.0-cp312-cp312-linux_x86_64.whl"
    assert newest(fuzz_index.PIN, [IndexFile(name, f"https://index.example/{name}", None, None)]) is None


def test_metadata_with_a_nul_byte_requires_no_rocm() -> None:
    assert requires_rocm("Metadata-Version: 2.1\nRequires-Dist: rocm[libraries]==7.14.0; extra == 'rocm\x00'\n") == ""


@pytest.mark.parametrize("text", ['[torc\r]\ncomit = url/x y"\r', "/b\t.", '/b\t."/" '], ids=["stray cr", "slash tab dot", "slash tab quote"])
def test_a_file_the_toml_parser_chokes_on_is_a_pins_error(text) -> None:
    # Found by fuzz_pins: toml 0.10 raised IndexError on these, a traceback for the build.
    with pytest.raises(PinsError) as e:
        parse_pins("components/pins.toml", text)
    assert str(e.value).startswith("components/pins.toml: TOML syntax error the parser cannot place; ")


# Found by fuzz_pins (CI, 2026-11-25): a field whose value opens a multi-line string that never
# closes was taken for a missing field, and `add_missing` wrote it a second time.
UNCLOSED_SHA256 = '[triton-llvm]\nurl = "https://example.org/llvm.tar.gz"\nsha256 ="""\nstrip_prefix = "llvm"\n'


# And, with that fixed: a field added after the last one landed inside a string that never
# closes (the TOML reader takes the rest of the file as its value).
UNCLOSED_OTHER = '[triton-llvm]\nurl = "https://example.org/llvm.tar.gz"\nsha512 = """llvm-hash.txt"\nurl_template = "x"\n'


# And: a vertical tab inside a string split the line there (str.splitlines), so a field added
# after the last line landed inside that string.
VERTICAL_TAB = '[torch]\nurl = "https://github.com/pytorch/pytorch.git"\nderived_from = "torch:cmake/a.c\x0bmake"\n'


def test_a_field_is_added_after_the_last_line_as_toml_counts_lines() -> None:
    added = set_fields_in_text(VERTICAL_TAB, "torch", {"sha256": "b" * 64}, add_missing=True)
    assert added == VERTICAL_TAB + 'sha256 = "' + "b" * 64 + '"\n'
    fuzz_pins.test_one_input(VERTICAL_TAB.encode())


def test_a_field_that_is_not_a_one_line_string_is_refused_not_added_again() -> None:
    for text in (UNCLOSED_SHA256, UNCLOSED_OTHER):
        with pytest.raises(PinsError, match=r"cannot rewrite table \[triton-llvm\]: a multi-line string \(\"\"\"\) never closes"):
            set_fields_in_text(text, "triton-llvm", {"sha256": "b" * 64}, add_missing=True)
        fuzz_pins.test_one_input(text.encode())  # what the fuzzer checks: refused, not broken
    closed = UNCLOSED_SHA256.replace('strip_prefix = "llvm"\n', 'strip_prefix = "llvm"\n"""\n')
    with pytest.raises(PinsError, match=r"cannot rewrite `sha256` of table \[triton-llvm\]: not a one-line string"):
        set_fields_in_text(closed, "triton-llvm", {"sha256": "b" * 64}, add_missing=True)
    # A field the table lacks is still added, once.
    added = set_fields_in_text('[a]\nurl = "x"\n', "a", {"sha256": "b" * 64}, add_missing=True)
    assert added == '[a]\nurl = "x"\nsha256 = "' + "b" * 64 + '"\n'
