"""The table of component kinds is what `kind` accepts and what a build's environment gets: its
shape is tested, not its names, so a new kind is one entry and no test changes."""

from __future__ import annotations

import re

import pytest

from rocm_build.wheel import kinds
from rocm_build.wheel.env import build_env
from rocm_build.wheel.kinds import COMMON_ENV, KINDS, ComponentKind, by_project, by_version_var, kind_help
from rocm_build.wheel.target_types import WheelKindField

ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


def test_the_field_accepts_exactly_the_kinds_of_the_table() -> None:
    assert WheelKindField.valid_choices == tuple(KINDS)
    assert WheelKindField.default in KINDS
    help_text = kind_help()
    assert all(f"`{name}`: {k.what}" in help_text for name, k in KINDS.items())
    assert all(f"its version is `{k.version_var}`" in help_text for k in KINDS.values() if k.version_var)
    assert all(f"its wheel is `{k.dist}`" in help_text for k in KINDS.values() if k.dist)


@pytest.mark.parametrize("name", list(KINDS))
def test_each_entry_is_named_by_its_key_and_sets_only_environment_variables(name: str) -> None:
    kind = KINDS[name]
    assert kind.name == name and re.fullmatch(r"[a-z][a-z0-9_]*", name) and kind.what
    assert all(ENV_NAME.fullmatch(var) for var in kind.env)
    assert all(ENV_NAME.fullmatch(var) for var in (kind.version_var, kind.sdk_requirements_var) if var)
    assert all(re.fullmatch(r"[a-z0-9_]+", p) for p in (kind.dist, *kind.projects) if p)  # module names
    # Its values take the gpu targets and nothing else.
    env = build_env(name, ["gfx1151", "gfx1100"], {}, "c:w")
    assert set(env) == {*COMMON_ENV, *kind.env}
    assert not any("{" in value for value in env.values())


def test_a_kind_adds_its_table_to_every_builds_and_the_targets_env_wins() -> None:
    name, kind = next((n, k) for n, k in KINDS.items() if k.env)
    var = next(iter(kind.env))
    env = build_env(name, ["gfx1151", "gfx1100"], {var: "mine"}, "c:w")
    assert env["PYTORCH_ROCM_ARCH"] == "gfx1100;gfx1151"
    assert env[var] == "mine"


def test_a_new_entry_is_all_a_new_kind_needs(monkeypatch) -> None:
    # The worked example of docs/layout.md ("Add a component kind").
    foo = ComponentKind("foo", "Foo", {"HIP_PLATFORM": "amd", "FOO_ARCHS": "{archs_comma}"}, dist="amd_foo", version_var="FOO_VERSION", projects=("foo_rocm",))
    monkeypatch.setitem(kinds.KINDS, "foo", foo)
    env = build_env("foo", ["gfx1151", "gfx1100"], {}, "c:foo")
    assert env["HIP_PLATFORM"] == "amd" and env["FOO_ARCHS"] == "gfx1100,gfx1151" and env["AMDGPU_TARGETS"] == "gfx1100;gfx1151"
    assert "`foo`: Foo (FOO_ARCHS, HIP_PLATFORM; its wheel is `amd_foo`; its version is `FOO_VERSION`)" in kind_help()
    assert by_version_var()["foo"] == "FOO_VERSION" and by_project()["foo_rocm"] == "foo"


def test_an_unknown_kind_is_refused_naming_the_table() -> None:
    with pytest.raises(ValueError) as error:
        build_env("nope", ["gfx1151"], {}, "c:w")
    assert str(error.value) == f"c:w: unknown `kind` 'nope'; use one of {', '.join(KINDS)}"
