from __future__ import annotations

from pathlib import Path

import pytest

from rocm_build.pins.files import PinsFiles, glob_of, is_directory, read_pins_files
from rocm_build.pins.tables import PinsError, parse_pins, parse_prebuilt_pins
from rocm_build.pins.update.commits import Move
from rocm_build.pins.update.rewrite import moved_pin_files

SHA, NEW = "a" * 40, "b" * 40
VLLM = f'# the top pin\n[vllm]\nurl = "https://example.invalid/vllm.git"\ntrack = "main"\ncommit = "{SHA}"\n'
TORCH = f'[torch]\nurl = "https://example.invalid/torch.git"\ntrack = "main"\ncommit = "{SHA}"\n'
SHARED = '[prebuilt]\nindex_url = "https://example.invalid/simple/"\npython = "3.12"\n'
HOST = (
    '[prebuilt.tr-torch]\nproject = "torch"\ntrack = "==2.13.0"\n\n'
    '[prebuilt.tr-torch-gfx1151]\ndevice_of = "tr-torch"\nproject = "amd-torch-device-gfx1151"\n'
)


def pins_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "pins"
    directory.mkdir()
    for name, text in {"vllm.toml": VLLM, "torch.toml": TORCH, "prebuilt.toml": SHARED, "tr-torch.toml": HOST}.items():
        (directory / name).write_text(text)
    return directory


def test_a_directory_reads_as_one_file_holding_all_its_files(tmp_path: Path) -> None:
    files = read_pins_files(pins_dir(tmp_path))
    assert sorted(files.parse(parse_pins)) == ["torch", "vllm"]
    prebuilt = files.parse(parse_prebuilt_pins)
    # The shared [prebuilt] keys of prebuilt.toml reach the tables of another file.
    assert prebuilt["tr-torch-gfx1151"].index_url == "https://example.invalid/simple/"
    assert files.tables() == {
        "prebuilt": f"{files.path}/prebuilt.toml",
        "prebuilt.tr-torch": f"{files.path}/tr-torch.toml",
        "prebuilt.tr-torch-gfx1151": f"{files.path}/tr-torch.toml",
        "torch": f"{files.path}/torch.toml",
        "vllm": f"{files.path}/vllm.toml",
    }
    assert is_directory("components/pins") and not is_directory("tests/pins.toml")
    assert glob_of("components/pins") == "components/pins/*.toml" and glob_of("x/pins.toml") == "x/pins.toml"


def test_errors_name_the_file_that_holds_the_table(tmp_path: Path) -> None:
    directory = pins_dir(tmp_path)
    (directory / "torch.toml").write_text(TORCH.replace(SHA, "main"))
    with pytest.raises(PinsError) as e:
        read_pins_files(directory).parse(parse_pins)
    assert str(e.value).startswith(f"{directory}/torch.toml: [torch] field `commit`: 'main' looks like a branch or tag name")
    (directory / "torch.toml").write_text(TORCH.replace('track = "main"', 'track = "main'))
    with pytest.raises(PinsError) as e:
        read_pins_files(directory).parse(parse_pins)
    assert str(e.value) == f"{directory}/torch.toml: TOML syntax error at line 3, column 14: Unbalanced quotes"


def test_a_table_in_two_files_is_refused(tmp_path: Path) -> None:
    directory = pins_dir(tmp_path)
    (directory / "vllm-again.toml").write_text(VLLM)
    with pytest.raises(PinsError) as e:
        read_pins_files(directory).tables()
    assert str(e.value) == f"{directory}/vllm.toml: [vllm] is in {directory}/vllm-again.toml too; a pin is in one file of {directory}"


def test_update_pins_writes_each_move_into_the_file_of_its_table(tmp_path: Path) -> None:
    files = read_pins_files(pins_dir(tmp_path))
    changes = moved_pin_files(files, [Move("torch", SHA, NEW, "main moved")], [])
    changed = {path.name: after for path, (before, after) in changes.items() if before != after}
    assert changed == {"torch.toml": TORCH.replace(SHA, NEW)}


def test_a_single_file_is_a_pins_file_as_before(tmp_path: Path) -> None:
    single = tmp_path / "pins.toml"
    single.write_text(VLLM + "\n" + TORCH)
    files = read_pins_files(single)
    assert sorted(files.parse(parse_pins)) == ["torch", "vllm"]
    assert files.file_of("torch") == str(single) and PinsFiles(str(single), ()).file_of("x") == str(single)


def test_a_pins_file_that_is_not_utf8_is_named_in_one_line(tmp_path: Path) -> None:
    directory = pins_dir(tmp_path)
    (directory / "latin1.toml").write_bytes(b'# caf\xe9\n[latin1]\nurl = "https://example.invalid/x.git"\ntrack = "main"\n')
    said = f"{directory / 'latin1.toml'}: not UTF-8 (byte 0xe9 at offset 5); TOML files are UTF-8: save it as UTF-8 (`iconv -f latin1 -t utf-8`)"
    with pytest.raises(PinsError) as e:
        read_pins_files(directory)
    assert str(e.value) == said
    with pytest.raises(PinsError) as e:  # as the rules read it, through the engine's bytes
        PinsFiles.of(str(directory), [("pins/latin1.toml", (directory / "latin1.toml").read_bytes())])
    assert str(e.value) == said.replace(str(directory / "latin1.toml"), "pins/latin1.toml")
