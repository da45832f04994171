import pytest

from rocm_build.pins import PinsError, parse_pins, set_commit_in_text

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
