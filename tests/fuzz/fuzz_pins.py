"""Fuzz target: the pins files (pins.toml with its [prebuilt.*] tables, archives.toml), from
their bytes (pins/files.py), and the in-place rewrites update-pins makes. Intended errors:
PinsError only, whose message names the file; every pin read has a name of the one pattern
(PIN_NAME: a path's last part); and a rewrite must keep the file parsing to the same pins with
the new value."""

from __future__ import annotations

import sys

import toml.decoder

from rocm_build.pins import archive_pins, files as pins_dir, tables as pins, text_fields as pins_text
from rocm_build.pins.archive_pins import parse_archive_pins
from rocm_build.pins.files import PinsFiles
from rocm_build.pins.tables import PIN_NAME, PinsError, parse_pins, parse_prebuilt_pins
from rocm_build.pins.text_fields import set_commit_in_text, set_fields_in_text

INSTRUMENTED = [pins, pins_dir, pins_text, archive_pins, pins.GIT_URLS, toml.decoder]  # toml's: to reach valid TOML sooner
# Inputs in the suite's run (~12 s here; coverage still grows to the end of it).
RUNS = 12_000

PATH = "components/pins.toml"
NEW_SHA = "1" * 40

SEEDS = [
    b'[torch]\nurl = "https://github.com/pytorch/pytorch.git"\ntrack = "nightly"\n'
    b'commit = "cac8bcf1ca69bff4364b793b570f850cf9e1faa1"\nsubmodules = true\n\n'
    b'[aotriton]\nurl = "git@github.com:ROCm/aotriton.git"\ntrack = "main"\n'
    b'commit = "6e00ef3e335b45dfb49065259533b59c68995bfe"\nderived_from = "torch:cmake/External/aotriton.cmake"\n',
    b'[prebuilt.torch]\nindex_url = "https://download.pytorch.org/whl/nightly/rocm7.1/"\nproject = "torch"\n'
    b'track = ">=2.13.0a0,<2.14"\npython = "3.12"\nversion = "2.13.0"\nfile = "torch-2.13.0-cp312-cp312-linux_x86_64.whl"\n'
    b'sha256 = "' + b"a" * 64 + b'"\n',
    b'[triton-llvm]\nurl = "https://example.org/llvm-3c709802-ubuntu-x64.tar.gz"\nsha256 = ""\n'
    b'strip_prefix = "llvm-3c709802-ubuntu-x64"\nderived_from = "triton:cmake/llvm-hash.txt"\n'
    b'url_template = "https://example.org/llvm-{hash8}-ubuntu-x64.tar.gz"\nstrip_prefix_template = "llvm-{hash8}-ubuntu-x64"\n',
    b'[torch]\ncomit = "cac8bcf"\nurl = "file:///x y"\n',
    b'["../../x"]\nurl = "https://example.org/x.git"\ntrack = "main"\n# caf\xe9\n',
]


def check_pins(text: str) -> None:
    try:
        pins = parse_pins(PATH, text)
        prebuilt = parse_prebuilt_pins(PATH, text)
    except PinsError as e:
        assert str(e).startswith(f"{PATH}: "), str(e)
        return
    assert all(PIN_NAME.match(name) for name in [*pins, *prebuilt]), [*pins, *prebuilt]
    for name in pins:
        try:
            rewritten = set_commit_in_text(text, name, NEW_SHA)
        except PinsError:
            continue  # a commit update-pins cannot find to rewrite: it says so
        try:
            after = parse_pins(PATH, rewritten)
        except PinsError as e:
            raise AssertionError(f"rewriting [{name}] commit broke the file: {e}") from None
        # The table's commit changed, and only that (other tables may not move).
        assert after[name].commit == NEW_SHA, (name, after[name])
        assert {k: v for k, v in after.items() if k != name} == {k: v for k, v in pins.items() if k != name}


def check_archives(text: str) -> None:
    try:
        archives = parse_archive_pins("components/archives.toml", text)
    except PinsError as e:
        assert str(e).startswith("components/archives.toml: "), str(e)
        return
    assert all(PIN_NAME.match(name) for name in archives), list(archives)
    for name in archives:
        try:
            rewritten = set_fields_in_text(text, name, {"sha256": "b" * 64}, add_missing=True)
        except PinsError:
            continue
        try:
            after = parse_archive_pins("components/archives.toml", rewritten)
        except PinsError as e:
            raise AssertionError(f"rewriting [{name}] sha256 broke the file: {e}") from None
        assert after[name].sha256 == "b" * 64, (name, after[name])


def test_one_input(data: bytes) -> None:
    try:  # as the rules and update-pins read a file: its bytes; refused exactly when not UTF-8
        PinsFiles.of("components/pins", [(PATH, data)])
        refused = ""
    except PinsError as e:
        refused = str(e)
    try:
        data.decode("utf-8")
        assert not refused, refused
    except UnicodeDecodeError:
        assert refused.startswith(f"{PATH}: not UTF-8 (byte ") and "\n" not in refused, refused
    text = data.decode("utf-8", errors="replace")
    check_pins(text)
    check_archives(text)


if __name__ == "__main__":
    from fuzz.harness import main

    main(sys.modules[__name__], sys.argv)
