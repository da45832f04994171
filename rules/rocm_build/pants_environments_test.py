"""The environment types come from the modules the running Pants has (pants_environments.py)."""

from __future__ import annotations

import importlib
import sys
import types

from pants.core.util_rules import environments

from rocm_build import pants_environments

# Where Pants 2.28 to 2.31 define each name (read in Pants' source at release_2.31.0;
# EnvironmentsSubsystem in src/python/pants/core/environments/subsystems.py).
NEW_MODULES = {
    "pants.core.environments.rules": ["EnvironmentNameRequest"],
    "pants.core.environments.subsystems": ["EnvironmentsSubsystem"],
    "pants.core.environments.target_types": [
        "DockerEnvironmentTarget", "DockerImageField", "EnvironmentField", "EnvironmentTarget"
    ],
}  # fmt: skip


def test_before_pants_2_28_the_names_come_from_util_rules_environments() -> None:
    names = [n for names in NEW_MODULES.values() for n in names]
    assert sorted(pants_environments.__all__) == sorted([*names, "environment_rules"])
    for name in names:
        assert getattr(pants_environments, name) is getattr(environments, name)
    assert pants_environments.environment_rules is environments  # the module whose rules() resolve them


def test_from_pants_2_28_the_names_come_from_the_new_modules(monkeypatch) -> None:
    # A stand-in for Pants 2.28+'s modules (no Pants past 2.17 is on PyPI, so none runs here):
    # modules at the new paths holding classes of their own, so the test sees which were taken.
    stand_ins = {}
    package = types.ModuleType("pants.core.environments")
    monkeypatch.setitem(sys.modules, "pants.core.environments", package)
    for module_name, names in NEW_MODULES.items():
        module = types.ModuleType(module_name)
        for name in names:
            stand_ins[name] = type(name, (), {})
            setattr(module, name, stand_ins[name])
        setattr(package, module_name.rsplit(".", 1)[1], module)
        monkeypatch.setitem(sys.modules, module_name, module)
    try:
        reloaded = importlib.reload(pants_environments)
        assert {name: getattr(reloaded, name) for name in reloaded.__all__ if name != "environment_rules"} == stand_ins
        assert reloaded.environment_rules is sys.modules["pants.core.environments.rules"]
    finally:
        monkeypatch.undo()
        importlib.reload(pants_environments)
    assert pants_environments.EnvironmentTarget is environments.EnvironmentTarget
