import pytest

from rocm_build.errors import RocmBuildError
from rocm_build.toolchain.interpreters import parse_constraint


@pytest.mark.parametrize(
    "text, minor",
    [("3.12", "3.12"), ("CPython==3.12.*", "3.12"), ("==3.11.7", "3.11"), ("3.99", "3.99"),
     (">=3.11,<3.12", "3.11"), ("CPython>=3.11", None), ("==3.*", None)],
)  # fmt: skip
def test_the_minor_version_a_constraint_pins(text, minor) -> None:
    assert parse_constraint(text, "t").minor == minor


def test_short_and_long_forms_are_the_same_python() -> None:
    assert parse_constraint("3.12", "a") == parse_constraint("CPython==3.12.*", "b")
    assert parse_constraint("PyPy==3.10.*", "c").implementation == "PyPy"
    with pytest.raises(RocmBuildError, match="t: `python` 'three' is neither a version like"):
        parse_constraint("three", "t")
