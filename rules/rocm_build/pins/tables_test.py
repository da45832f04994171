import pytest

from rocm_build.pins.archive_pins import parse_archive_pins
from rocm_build.pins.tables import PinsError, lookup_pin, parse_pins, parse_prebuilt_pins
from rocm_build.pins.text_fields import set_commit_in_text, set_fields_in_text
from rocm_build.testutil.git_fixtures import pins_toml

SHA = "0123456789abcdef0123456789abcdef01234567"
GOOD = f"""
# a comment kept by rewrites
[vllm]
url = "https://github.com/vllm-project/vllm.git"
track = "main"   # followed by update-pins
commit = "{SHA}"
"""


def test_parses_a_good_pin() -> None:
    pins = parse_pins("components/pins.toml", GOOD)
    assert pins["vllm"].commit == SHA and pins["vllm"].submodules is False


@pytest.mark.parametrize(
    "commit, message",
    [
        ("main", "[vllm] field `commit`: 'main' looks like a branch or tag name"),
        ("0123abc", "[vllm] field `commit`: '0123abc' is a short SHA (7 hex digits)"),
    ],
)
def test_bad_commit_names_file_table_and_field(commit: str, message: str) -> None:
    with pytest.raises(PinsError) as e:
        parse_pins("components/pins.toml", GOOD.replace(SHA, commit))
    assert str(e.value).startswith("components/pins.toml: " + message)


def test_missing_field() -> None:
    with pytest.raises(PinsError, match=r"pins.toml: \[vllm\] field `track`: missing"):
        parse_pins("pins.toml", GOOD.replace('track = "main"', ""))


def test_toml_syntax_error_names_line() -> None:
    with pytest.raises(PinsError, match=r"pins.toml: TOML syntax error at line 3"):
        parse_pins("pins.toml", "[a]\nurl = 'x'\ncommit = \n")


def test_rewrite_keeps_comments_and_layout() -> None:
    new = "f" * 40
    out = set_commit_in_text(GOOD, "vllm", new)
    assert out == GOOD.replace(SHA, new)
    assert parse_pins("p", out)["vllm"].commit == new


TORCH = "2.13.0+rocm10.0.0"
PREBUILT_SET = pins_toml(
    prebuilt={"index_url": "https://stable.repo.amd.com/rocm/whl-next", "python": "3.12"},  # every table's defaults
    **{
        "prebuilt.therock-torch": {"project": "torch", "track": f"=={TORCH}", "version": TORCH},
        "prebuilt.therock-torch-gfx1151": {"device_of": "therock-torch", "project": "amd-torch-device-gfx1151", "version": TORCH},
        "prebuilt.mirror-torch": {"index_url": "file:///srv/mirror", "project": "torch", "track": ">=2.13"},
        "prebuilt.mirror-torch-gfx115x": {"device_of": "mirror-torch", "project": "amd-torch-device-gfx115x"},
    },
)  # fmt: skip


def test_prebuilt_device_pins_take_index_and_python_from_host_or_prebuilt_table() -> None:
    pins = parse_prebuilt_pins("components/pins.toml", PREBUILT_SET)
    device = pins["therock-torch-gfx1151"]
    assert (device.index_url, device.python, device.device_of, device.device_key) == (
        "https://stable.repo.amd.com/rocm/whl-next/", "3.12", "therock-torch", "gfx1151"
    )
    assert pins["mirror-torch-gfx115x"].index_url == "file:///srv/mirror/"  # its host's, not [prebuilt]'s
    assert pins["mirror-torch-gfx115x"].device_key == "gfx115x" and pins["therock-torch"].device_key == ""


@pytest.mark.parametrize(
    "old, new, message",
    [
        ('device_of = "therock-torch"', 'device_of = "torch"',
         "[prebuilt.therock-torch-gfx1151] field `device_of`: 'torch' is not a [prebuilt.*] table; name the host "
         "wheel's pin (host pins: mirror-torch, therock-torch)"),
        ('device_of = "mirror-torch"', 'device_of = "therock-torch-gfx1151"',
         "[prebuilt.mirror-torch-gfx115x] field `device_of`: 'therock-torch-gfx1151' is a device pin itself"),
        ('project = "amd-torch-device-gfx1151"\nversion = "2.13.0+rocm10.0.0"',
         'project = "amd-torch-device-gfx1151"\nversion = "2.13.0+rocm10.0.1"',
         "[prebuilt.therock-torch-gfx1151] field `version`: '2.13.0+rocm10.0.1' differs from its host "
         "[prebuilt.therock-torch]'s '2.13.0+rocm10.0.0'; a device wheel is built for exactly one host version: "
         "run `pants run rules:update-pins -- --only therock-torch`"),
        ('device_of = "therock-torch"', 'device_of = "therock-torch"\ntrack = ">=2"',
         "[prebuilt.therock-torch-gfx1151] field `track`: a device pin takes exactly its host's version "
         "(device_of = 'therock-torch'); remove `track`"),
        ('"amd-torch-device-gfx1151"', '"torch-gfx1151"',
         "[prebuilt.therock-torch-gfx1151] field `project`: 'torch-gfx1151' is not a device wheel's name; expected "
         "`<prefix>-device-<gfx>` as TheRock names them, e.g. \"amd-torch-device-gfx1151\""),
        ('track = ">=2.13"', "", "[prebuilt.mirror-torch] field `track`: missing (a host pin needs a version specifier"),
        ('track = ">=2.13"', 'track = ">=2.13"\nextra = "device-gfx1151"',
         "[prebuilt.mirror-torch] field `extra`: only a device pin (one with `device_of`) has it"),
        ('python = "3.12"', 'python = "3.12"\nstream = "stable"',
         "[prebuilt] key `stream`: only index_url and python may be set for every prebuilt pin"),
        ('device_of = "mirror-torch"', 'device_of = "mirror-torch"\npython = "3.13"',
         "[prebuilt.mirror-torch-gfx115x] field `python`: '3.13', but its host [prebuilt.mirror-torch] is for '3.12'"),
        ('device_of = "mirror-torch"', 'device_of = "mirror-torch"\ndevice = "gfx115x"',
         "[prebuilt.mirror-torch-gfx115x] field `device`: unknown field (allowed: index_url, project, python, track, "
         "device_of, version, file, sha256, requires_rocm, extra, requires_devices, derived_from). Did you mean `device_of`?"),
    ],
)  # fmt: skip
def test_prebuilt_pin_errors_name_file_table_key_and_form(old: str, new: str, message: str) -> None:
    assert old in PREBUILT_SET
    with pytest.raises(PinsError) as e:
        parse_prebuilt_pins("components/pins.toml", PREBUILT_SET.replace(old, new, 1))
    assert str(e.value).startswith("components/pins.toml: " + message), str(e.value)


def test_a_unicode_escape_toml_cannot_hold_is_a_syntax_error() -> None:
    # Found by tests/fuzz/fuzz_pins.py: toml 0.10 overflowed on `\\U` followed by many hex digits.
    text = '[prebuilt.torch]\nsha256 = "aaaa\\Uaaaaaaaaaaaaaaaaa=aaa"\n'
    with pytest.raises(PinsError, match=r"^p.toml: TOML syntax error the parser cannot place"):
        parse_pins("p.toml", text)


def test_a_pin_without_a_commit_parses_and_is_refused_for_a_build_with_the_command_that_fills_it() -> None:
    pins = parse_pins("tests/mini/pins/mini-new.toml", '[mini-new]\nurl = "file:///tmp/new"\ntrack = "main"\n')
    assert pins["mini-new"].commit == ""
    with pytest.raises(PinsError) as e:
        lookup_pin(pins, "mini-new", "tests/mini/pins", "tests/mini/new:src")
    assert str(e.value) == (
        "tests/mini/new:src: pin `mini-new` in tests/mini/pins has no `commit` yet; fill it from its url and track "
        "('main'): pants run rules:update-pins -- --pins-file tests/mini/pins --only mini-new"
    )


def test_a_layout_the_line_model_misreads_is_refused_not_written_wrong() -> None:
    # Found by tests/fuzz/fuzz_pins.py: toml 0.10 reads a multi-line string closed mid-line, and
    # the line model took a line inside it for the table's last field: sha256 went nowhere.
    text = (
        '[triton-llvm]\nurl = "https://example.org/llvm.tar.gz"\nsha265 = """triton:cmake/llvm-hash.txt"\n'
        'url_te """triton:cmake/llvm-ple.org/llvm-{hash8}-ubuntu-\x0064\ufffd\ufffdar.gz";strip_prefix_template = "ll[torch]\n'
        "urldules = t]ruton]\nqrvm-{hash8}-ubuate-xgit@github.c"
    )
    assert set(parse_archive_pins("components/archives.toml", text)) == {"triton-llvm"}
    with pytest.raises(PinsError) as e:
        set_fields_in_text(text, "triton-llvm", {"sha256": "b" * 64}, add_missing=True)
    assert str(e.value) == (
        "cannot rewrite table [triton-llvm] in place: its lines are not laid out one field per line; "
        'write each field on a line of its own (`key = "..."`) and run again'
    )


NAME_REFUSED = (
    "is not a pin name: letters, digits, `.`, `_` and `-`, starting with a letter or digit, at most 100 (it is a "
    "directory's name, work/<pin>/ and patches/<pin>/); rename the table"
)


@pytest.mark.parametrize("name", ["../../x", "..", ".hidden", "-rf", "a/b", "a b", "x" * 101])
def test_a_pin_name_is_one_path_part_in_every_kind_of_pin(name: str) -> None:
    # Names are paths' last parts (work/<pin>/, patches/<pin>/, update-pins' checkouts): refused
    # where the file is read, for git pins, prebuilt pins and archive pins alike.
    from rocm_build.pins.archive_pins import parse_archive_pins

    git_pin = f'["{name}"]\nurl = "https://example.invalid/x.git"\ntrack = "main"\n'
    prebuilt = f'[prebuilt."{name}"]\nindex_url = "https://example.invalid/simple/"\nproject = "x"\ntrack = "==1"\npython = "3.12"\n'
    archive = f'["{name}"]\nurl = "https://example.invalid/x.tar.gz"\n'
    for parse, text, table in [(parse_pins, git_pin, name), (parse_prebuilt_pins, prebuilt, f"prebuilt.{name}"),
                               (parse_archive_pins, archive, name)]:  # fmt: skip
        with pytest.raises(PinsError) as e:
            parse("p.toml", text)
        assert str(e.value) == f"p.toml: [{table}]: {name!r} {NAME_REFUSED}"


def test_the_names_of_the_repositorys_own_pins_are_pin_names() -> None:
    for name in ("mini-vllm", "flash_attention", "therock-torch-gfx1151", "vllm-triton-kernels", "x" * 100):
        assert list(parse_pins("p.toml", f'["{name}"]\nurl = "https://example.invalid/x.git"\ntrack = "main"\n')) == [name]


def test_a_path_made_of_a_pin_name_stays_inside_its_root(tmp_path) -> None:
    from rocm_build.pins.tables import pin_path

    root, outside = tmp_path / "patches", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    assert pin_path(str(root), "vllm", "pin 'vllm'") == str(root / "vllm")
    assert pin_path(str(root), "vllm", "pin 'vllm'", prefix="check-") == str(root / "check-vllm")
    (root / "linked").symlink_to(outside)
    with pytest.raises(PinsError) as e:
        pin_path(str(root), "linked", "pin 'linked'")
    assert str(e.value) == f"pin 'linked': {root / 'linked'} resolves outside {root} (a symbolic link there?); remove the link"
    with pytest.raises(PinsError) as e:
        pin_path(str(root), "..", "derived_from '..'")
    assert str(e.value) == f"derived_from '..': '..' {NAME_REFUSED}"
