"""The run-time fields of rocm_wheel (what install sets hold besides the wheels):
`runtime_env` and `runtime_requirements`. rocm_wheel (wheel/target_types.py) registers them."""

from __future__ import annotations

import types

from pants.engine.target import DictStringToStringField, StringSequenceField
from pants.util.strutil import help_text


def _wheel() -> types.ModuleType:
    # The help texts name rocm_wheel's build fields; that module imports this one, so the
    # import waits until a help text is rendered.
    from rocm_build.wheel import target_types

    return target_types


class WheelRuntimeEnvField(DictStringToStringField):
    alias = "runtime_env"
    help = help_text(
        lambda: f"""
        Environment variables the installed wheel needs at run time, e.g. flash-attention's
        Triton backend switch `{{"FLASH_ATTENTION_TRITON_AMD_ENABLE": "TRUE"}}`. `package` writes
        the union over the chain to the install set's `env.sh` (`export VAR=value` lines, to
        source before running Python); two components of a chain that set one variable to
        different values stop `package` before any build, naming both targets. Unlike
        `{_wheel().WheelEnvField.alias}` (the build's environment) it is in no cache key: changing it
        rebuilds nothing.
        """
    )


class WheelRuntimeRequirementsField(StringSequenceField):
    alias = "runtime_requirements"
    help = help_text(
        lambda: f"""
        What the installed wheel needs at run time that its chain does not hold, as pip
        requirement lines (names with version specifiers), e.g. `["einops"]`: its upstream's
        Requires-Dist, which the preflight compares with them (same names and specifiers). They are
        locked like `{_wheel().WheelBuildRequirementsField.alias}`, together with those of every rocm_wheel
        below this one, in `3rdparty/run/py<3.X>/<pin>.lock` (`<pin>` the pin of
        `{_wheel().WheelSourceField.alias}`; `<pin>.<name>.lock` for a target not named `wheel`), written by
        `pants lock-runtime-requirements <this target>`; what the chain itself builds or pins (torch
        for a requirement that needs it) is left to the chain, never taken from the index. `package` puts the locked wheels in the install set's `wheels/` and pins them
        by sha256 in its requirements.txt, so `pip install --no-index --find-links wheels
        --require-hashes -r requirements.txt` installs them. A module that TheRock's SDK ships
        rather than an index (`amdsmi`, in rocm-sdk-core; see rules/rocm_build/install/sdk_modules.py)
        is not locked: requirements.txt says how to install it from the SDK. In no cache key.
        """
    )


class SystemLibrariesField(DictStringToStringField):
    alias = "system_libraries"
    help = help_text(
        """
        Shared libraries the installed wheel loads from the target machine rather than from a
        wheel of its install set, each with why the machine has it, e.g.
        `{"libdrm.so.2": "Debian's libdrm2 on every gfx1151 box we support"}`. Before `package`
        writes an install set it reads every ELF of every wheel in it (rules/rocm_build/install/closure.py):
        each library an ELF needs must be shipped by a wheel of the set where its RUNPATH
        looks, be one every manylinux system has (auditwheel's policy: libc, libstdc++, ...),
        or be named here; a library named here is also taken to define the unversioned symbols
        nothing in the set defines. In no cache key: changing it rebuilds nothing.
        """
    )
