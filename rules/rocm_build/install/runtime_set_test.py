"""The run-time part of an install set: env.sh from the chain's runtime_env, locked run-time
requirements, and the SDK's modules as an install step."""

from __future__ import annotations

import subprocess

import pytest
from pants.engine.addresses import Address
from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import QueryRule, RuleRunner

from rocm_build.install import runtime_lock, runtime_set
from rocm_build.errors import RocmBuildError
from rocm_build.testutil.git_fixtures import pins_toml
from rocm_build.locks.lockfile import BuildLock, LockedDist, LockError
from rocm_build.install.runtime_lock import ChainRuntimeRequirements
from rocm_build.install.runtime_set import (
    SDK_FIRST,
    SDK_STEP,
    locks_to_use,
    RuntimeSet,
    RuntimeSetRequest,
    env_script,
    header_lines,
    merged_dists,
    merged_env,
)
from rocm_build.install.sdk_modules import index_requirements, sdk_requirements
from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner
from rocm_build.toolchain.target_types import RocmToolchainTarget
from rocm_build.upstream.target_types import UpstreamRepoTarget
from rocm_build.wheel.target_types import RocmWheelTarget

TORCH = Address("components/torch", target_name="wheel")
FA = Address("components/fa", target_name="wheel")
SIX = LockedDist("six", "1.16.0", "8" * 64, "six-1.16.0-py2.py3-none-any.whl")


def test_env_union_and_its_script() -> None:
    env = merged_env("v:wheel", [("a:wheel", {"B_VAR": "x y", "A_VAR": "TRUE"}), ("b:wheel", {"A_VAR": "TRUE"})])
    assert env == (("A_VAR", "TRUE", "a:wheel"), ("B_VAR", "x y", "a:wheel"))
    script = env_script(env)
    assert script.splitlines()[2:] == ["export A_VAR=TRUE  # a:wheel", "export B_VAR='x y'  # a:wheel"]
    # Sourced by a real shell, it sets exactly the values.
    out = subprocess.run(["bash", "-c", f"{script}\nprintf '%s|%s' \"$A_VAR\" \"$B_VAR\""], capture_output=True, text=True)
    assert out.stdout == "TRUE|x y"


def test_a_variable_set_two_ways_names_both_targets() -> None:
    with pytest.raises(RocmBuildError) as e:
        merged_env("v:wheel", [("a:wheel", {"FLASH": "TRUE"}), ("b:wheel", {"FLASH": "FALSE"})])
    assert str(e.value) == (
        "v:wheel: its chain sets the run-time variable FLASH two ways: a:wheel has `runtime_env` FLASH='TRUE', "
        "b:wheel has FLASH='FALSE'. The install set's env.sh holds one value: make the two targets agree."
    )
    with pytest.raises(RocmBuildError, match="a:wheel: `runtime_env` key 'NOT-A-NAME' is not an environment variable name"):
        merged_env("v:wheel", [("a:wheel", {"NOT-A-NAME": "1"})])


def test_run_time_dists_merge_and_one_project_at_two_versions_is_refused() -> None:
    other = LockedDist("Six", "1.17.0", "9" * 64, "six-1.17.0-py2.py3-none-any.whl")
    assert merged_dists("v:wheel", [("a:wheel", "a.lock", [SIX]), ("b:wheel", "b.lock", [SIX])]) == (SIX,)
    with pytest.raises(RocmBuildError) as e:
        merged_dists("v:wheel", [("a:wheel", "a.lock", [SIX]), ("b:wheel", "b.lock", [other])])
    assert str(e.value).startswith(
        "v:wheel: its chain needs Six at run time in two versions: a:wheel locks six==1.16.0 (a.lock), "
        "b:wheel locks Six==1.17.0 (b.lock)."
    )


def test_sdk_modules_are_an_install_step_not_a_lock() -> None:
    assert index_requirements("v:wheel", ["amdsmi", "einops>=0.8"]) == ("einops>=0.8",)
    assert sdk_requirements("v:wheel", ["amdsmi", "einops>=0.8"]) == ("amdsmi",)
    with pytest.raises(RocmBuildError, match=r"'amdsmi==7.0.2': amdsmi comes with TheRock's rocm-sdk-core"):
        sdk_requirements("v:wheel", ["amdsmi==7.0.2"])
    with pytest.raises(RocmBuildError, match=r"entry '-r runtime.txt' is not a requirement"):
        index_requirements("v:wheel", ["-r runtime.txt"])
    sdk_install = "pip install --index-url https://stable.repo.amd.com/rocm/whl-next/ 'rocm[libraries]==10.0.0'"
    lines = header_lines(RuntimeSet((("FLASH", "TRUE", "fa:wheel"),), (), (("amdsmi", "v:wheel", sdk_install),), None))
    assert lines[0] == (
        "# amdsmi, a run-time requirement of v:wheel, is on no index: TheRock's rocm-sdk-core ships it as a source tree "
        "(ROCm/rocm-systems#11452, ROCm/TheRock#3054). With the SDK in this venv (pip install --index-url "
        "https://stable.repo.amd.com/rocm/whl-next/ 'rocm[libraries]==10.0.0'), install it:"
    )
    assert lines[1].startswith(SDK_STEP)
    # What a shell runs: pip installs the tree in the venv's site-packages (`python` faked).
    fake_python = 'python() { if [ "$1" = -c ]; then echo /venv/site; else echo "$@"; fi; }'
    out = subprocess.run(["bash", "-c", f"{fake_python}\n{lines[1][len(SDK_STEP):]}"], capture_output=True, text=True)
    assert out.stdout == "-m pip install /venv/site/_rocm_sdk_core/share/amd_smi\n"
    assert lines[2] == "# then, before running Python: . ./env.sh  (the run-time environment: FLASH)"


def test_run_time_lock_format_and_staleness() -> None:
    lock = BuildLock("fa", runtime_lock.ANY_COMMIT, "3.12", ("einops",), (), (SIX,), regenerate="pants lock-runtime-requirements fa:wheel")
    text = runtime_lock.render(lock)
    assert text.splitlines()[:5] == [
        "# rocm-pants run-time requirements lock. Generated: do not edit.",
        "# regenerate: pants lock-runtime-requirements fa:wheel",
        "# pin: fa (run time: any commit)",
        "# python: 3.12",
        "# requirement: einops",
    ]
    assert runtime_lock.parse(text, "x.lock") == lock
    with pytest.raises(LockError, match="x.lock is not a rocm-pants run-time requirements lock"):
        runtime_lock.parse(text.replace("run-time requirements", "build-requirements", 1), "x.lock")
    assert runtime_lock.stale_reasons(lock, "3.12", ["einops"]) == []
    assert runtime_lock.stale_reasons(lock, "3.11", ["einops", "six"]) == [
        "it was resolved for Python 3.12, the target builds for Python 3.11",
        "it was made from ['einops'], the `runtime_requirements` of the target and its chain now say ['einops', 'six']",
    ]


@pytest.fixture
def rule_runner() -> RuleRunner:
    runner = isolated_rule_runner(
        rules=[*runtime_set.rules(), QueryRule(RuntimeSet, [RuntimeSetRequest])],
        target_types=[RocmWheelTarget, UpstreamRepoTarget, RocmToolchainTarget],
    )
    commit = {"url": "file:///nowhere", "track": "main", "commit": "a" * 40}
    runner.write_files(
        {
            "components/pins/all.toml": pins_toml(torch=commit, fa=commit),
            "components/BUILD": "rocm_toolchain(name='llvm', provider='llvm', path='/usr/lib/llvm-19')\n",
        }
    )
    return runner


def chain(rule_runner: RuleRunner, torch_fields: str, fa_fields: str) -> None:
    wheel = "rocm_wheel(name='wheel', source=':src', toolchain='components:llvm', python='3.11', {})\n"
    rule_runner.write_files(
        {
            "components/torch/BUILD": "upstream_repo(name='src', pin='torch')\n" + wheel.format(torch_fields),
            "components/fa/BUILD": "upstream_repo(name='src', pin='fa')\n"
            + wheel.format(f"dependencies=['components/torch:wheel'], {fa_fields}"),
        }
    )


def runtime_error(rule_runner: RuleRunner) -> str:
    with pytest.raises(ExecutionError) as e:
        rule_runner.request(RuntimeSet, [RuntimeSetRequest(FA.spec, (TORCH, FA))])
    return str(e.value)


def test_conflicting_runtime_env_in_a_chain_stops_naming_both(rule_runner: RuleRunner) -> None:
    chain(rule_runner, "runtime_env={'FLASH': 'FALSE'}", "runtime_env={'FLASH': 'TRUE'}")
    assert (
        "components/fa:wheel: its chain sets the run-time variable FLASH two ways: components/torch:wheel has "
        "`runtime_env` FLASH='FALSE', components/fa:wheel has FLASH='TRUE'."
    ) in runtime_error(rule_runner)


def test_sdk_module_alone_needs_no_lock(rule_runner: RuleRunner) -> None:
    chain(
        rule_runner,
        "runtime_env={'FLASH': 'TRUE'}, gpu_targets=['gfx1100', 'gfx1151']",
        "runtime_env={'FLASH': 'TRUE'}, runtime_requirements=['amdsmi']",
    )
    runtime = rule_runner.request(RuntimeSet, [RuntimeSetRequest(FA.spec, (TORCH, FA))])
    # An llvm toolchain has no SDK to install: the step says only where the module is.
    assert (runtime.env, runtime.dists, runtime.sdk) == (
        (("FLASH", "TRUE", "components/torch:wheel"),), (), (("amdsmi", "components/fa:wheel", ""),)
    )
    # With TheRock's toolchain, the SDK's own install line (its index and version).
    rule_runner.write_files(
        {
            "components/BUILD": "rocm_toolchain(name='llvm', provider='therock', version='10.0.0', "
            "index_url='https://stable.repo.amd.com/rocm/whl-next/')\n"
        }
    )
    runtime = rule_runner.request(RuntimeSet, [RuntimeSetRequest(FA.spec, (TORCH, FA))])
    # The chain's SDK, always, with the device wheel of every gpu target of the chain.
    sdk_install = "pip install --index-url https://stable.repo.amd.com/rocm/whl-next/ 'rocm[libraries,device-gfx1100,device-gfx1151]==10.0.0'"
    assert runtime.sdk_install == sdk_install
    assert runtime.sdk == (("amdsmi", "components/fa:wheel", sdk_install),)
    assert header_lines(runtime)[0] == f"{SDK_FIRST}{sdk_install}"
    # In the order they run: the SDK from its index, the set's install command, then the SDK's
    # modules and env.sh.
    lines = header_lines(runtime, ("# install: pip install ...",))
    assert lines[1] == "# install: pip install ..." and lines[3].startswith(SDK_STEP) and lines[4].startswith("# then, before running Python")
    # Two releases of the SDK in one chain cannot be one install set.
    rule_runner.write_files(
        {
            "components/BUILD": "rocm_toolchain(name='llvm', provider='therock', version='10.0.0', "
            "index_url='https://stable.repo.amd.com/rocm/whl-next/')\n"
            "rocm_toolchain(name='older', provider='therock', version='7.14.0', "
            "index_url='https://repo.amd.com/rocm/whl-multi-arch/')\n",
            "components/torch/BUILD": "upstream_repo(name='src', pin='torch')\n"
            "rocm_wheel(name='wheel', source=':src', toolchain='components:older', python='3.11')\n",
        }
    )
    assert (
        "components/fa:wheel: its chain is built with 2 releases of TheRock's SDK (components/torch:wheel: 7.14.0 from "
        "https://repo.amd.com/rocm/whl-multi-arch/; components/fa:wheel: 10.0.0 from https://stable.repo.amd.com/rocm/whl-next/). "
        "An install set holds one SDK: make their `toolchain`s name one index and version."
    ) in runtime_error(rule_runner)


def test_a_missing_or_stale_lock_says_how_to_make_it(rule_runner: RuleRunner) -> None:
    # The lock's path names the build Python's minor version: found as builds find it.
    rule_runner.set_options(["--python-bootstrap-search-path=['<PYENV>', '<PATH>']"], env_inherit={"PATH", "PYENV_ROOT", "HOME"})
    chain(rule_runner, "", "runtime_requirements=['six']")
    assert (
        "rocm_wheel components/fa:wheel has `runtime_requirements` ['six'] (with those of its chain) but no lock at 3rdparty/run/py3.11/fa.lock. "
        "Make it (it resolves them against the index once and pins every file by sha256): "
        "pants lock-runtime-requirements components/fa:wheel"
    ) in runtime_error(rule_runner)
    lock = BuildLock("fa", runtime_lock.ANY_COMMIT, "3.11", ("tomli",), (), (SIX,))
    rule_runner.write_files({"3rdparty/run/py3.11/fa.lock": runtime_lock.render(lock)})
    assert (
        "rocm_wheel components/fa:wheel: the lock 3rdparty/run/py3.11/fa.lock no longer matches its `runtime_requirements`: "
        "it was made from ['tomli'], the `runtime_requirements` of the target and its chain now say ['six']. Regenerate it: "
        "pants lock-runtime-requirements components/fa:wheel"
    ) in runtime_error(rule_runner)
    # torch's run-time requirements are fa's lock's too (one venv holds both), and torch's own
    # lock is not asked for: fa's covers it.
    chain(rule_runner, "runtime_requirements=['tomli']", "runtime_requirements=['six', 'tomli']")
    assert (
        "rocm_wheel components/fa:wheel: the lock 3rdparty/run/py3.11/fa.lock no longer matches its `runtime_requirements`: "
        "it was made from ['tomli'], the `runtime_requirements` of the target and its chain now say ['tomli', 'six']."
    ) in runtime_error(rule_runner)
    assert "torch.lock" not in runtime_error(rule_runner)


def test_an_install_set_takes_the_locks_no_other_lock_covers() -> None:
    vision, vllm, aiter = (Address(f"components/{n}", target_name="wheel") for n in ("vision", "vllm", "aiter"))
    chains = [
        ChainRuntimeRequirements(("numpy",), ("numpy",), (TORCH, vision)),
        ChainRuntimeRequirements((), (), (TORCH, FA)),
        ChainRuntimeRequirements(("six",), ("numpy", "six"), (TORCH, vision, FA, vllm)),
        ChainRuntimeRequirements(("tomli",), ("tomli",), (aiter,)),
    ]
    assert locks_to_use(chains) == [(vllm, ("numpy", "six")), (aiter, ("tomli",))]
