import importlib.resources
import json
from pathlib import Path

import pytest
import toml

from pants.backend.python.pip_requirement import PipRequirement
from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.backend.python.util_rules.lockfile_metadata import PythonLockfileMetadata
from pants.backend.python.util_rules.pex_requirements import strip_comments_from_pex_json_lockfile
from pants.engine.fs import EMPTY_DIGEST
from pants.backend.python.util_rules.pex import PexRequest, VenvPex, VenvPexProcess
from pants.engine.process import Process, ProcessResult
from pants.testutil.rule_runner import MockGet, run_rule_with_mocks

from rocm_build.wheel.built_wheel import BuiltWheel
from rocm_build.audits.portable import Auditwheel, check_platform_policy, policy_tag

# What auditwheel 6.8.2 printed for the mini aotriton wheel (it wraps lines), and the ending
# of its report for a wheel that needs a library outside every policy.
MANYLINUX = """
mini_aotriton-1.0.0+llvm19gfx1151-cp311-cp311-linux_x86_64.whl is
consistent with the following platform tag: "manylinux_2_5_x86_64".

The wheel references no external versioned symbols from
system-provided shared libraries.
"""
LINUX = """
torch-2.13.0+rocm7.14gfx1151-cp312-cp312-linux_x86_64.whl is consistent
with the following platform tag: "linux_x86_64".

The wheel requires additional external shared libraries: libamdhip64.so.7
"""


def test_the_policy_is_read_from_auditwheels_report() -> None:
    assert policy_tag(MANYLINUX) == "manylinux_2_5_x86_64"
    assert policy_tag(LINUX) == "linux_x86_64"
    with pytest.raises(ValueError, match="auditwheel said no platform tag"):
        policy_tag("usage: auditwheel show [-h] WHEEL_FILE\n")


def test_a_pure_wheel_is_not_given_to_auditwheel() -> None:
    # auditwheel exits 1 on a wheel without ELF files; no process may run for one.
    def refuse(*_):
        raise AssertionError("auditwheel was asked about a pure wheel")

    request = BuiltWheel(EMPTY_DIGEST, "big_torch-1.0.0+llvm19gfx1151-py3-none-any.whl")
    policy = run_rule_with_mocks(check_platform_policy, rule_args=[request, None], mock_gets=[
        MockGet(VenvPex, (PexRequest,), refuse), MockGet(Process, (VenvPexProcess,), refuse),
        MockGet(ProcessResult, (Process,), refuse)])  # fmt: skip
    assert (policy.tag, policy.manylinux) == ("any", False)
    assert policy.to_json()["by"].startswith("wheel file name")


def test_the_built_in_lock_the_tool_names_ships_in_the_plugin_package() -> None:
    # Pants 2.17-2.31 refuse a tool without `default_lockfile_resource`; 2.22+ read the file while
    # registering options, so a name without its file fails every command. It must be Pants' lock
    # for exactly the tool's default version, extras and interpreter constraints (what 2.17 checks when it
    # installs from it) and lock auditwheel at that version (what 2.22+'s help prints).
    package, name = Auditwheel.default_lockfile_resource
    lock = importlib.resources.read_binary(package, name)
    metadata = PythonLockfileMetadata.from_lockfile(lock, name, "auditwheel", delimeter="//")
    assert metadata.requirements == {PipRequirement.parse(r) for r in (Auditwheel.default_version, *Auditwheel.default_extra_requirements)}
    assert metadata.valid_for_interpreter_constraints == InterpreterConstraints(Auditwheel.default_interpreter_constraints)
    locked = json.loads(strip_comments_from_pex_json_lockfile(lock))["locked_resolves"][0]["locked_requirements"]
    assert [r["version"] for r in locked if r["project_name"] == "auditwheel"] == [Auditwheel.default_version.split("==")[1]]


def test_the_repository_installs_auditwheel_from_the_lock_it_ships() -> None:
    config = toml.loads(Path("pants.toml").read_text())
    resolve = config["auditwheel"]["install_from_resolve"]
    package, name = Auditwheel.default_lockfile_resource
    assert config["python"]["resolves"][resolve] == f"rules/{package.replace('.', '/')}/{name}"
    assert config["python"]["resolves_to_interpreter_constraints"][resolve] == Auditwheel.default_interpreter_constraints
