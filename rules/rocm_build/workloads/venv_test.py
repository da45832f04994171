"""The wheels of a test's venv, gathered one address a request: through `target` groups and
nested groups, a `prebuilt_wheels` generator's wheels, a built wheel with those below it; and
the errors, naming what named the target."""

from __future__ import annotations

from typing import List

import pytest
from pants.engine.addresses import Address
from pants.engine.fs import Digest, DigestContents
from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import QueryRule, RuleRunner

from rocm_build.testutil.workload_inputs import BROKEN, workload_rule_runner
from rocm_build.workloads.venv import VenvWheels, VenvWheelsRequest

PINS = """\
[prebuilt.kernels-triton]
index_url = "https://index.invalid/simple/"
project = "triton"
track = ">=3"
python = "3.11"
version = "3.7.1"
file = "triton-3.7.1-cp311-cp311-manylinux_2_28_x86_64.whl"
sha256 = "{a}"

[prebuilt.kernels-numpy]
index_url = "https://index.invalid/simple/"
project = "numpy"
track = ">=2"
python = "3.11"
version = "2.3.0"
file = "numpy-2.3.0-cp311-cp311-manylinux_2_28_x86_64.whl"
sha256 = "{a}"
""".format(a="a" * 64)


@pytest.fixture
def rule_runner() -> RuleRunner:
    runner = workload_rule_runner(QueryRule(VenvWheels, [VenvWheelsRequest]), QueryRule(DigestContents, [Digest]))
    runner.write_files({
        "k/pins.toml": PINS,
        "k/BUILD": "prebuilt_wheels(name='venv', pins_file='k/pins.toml', pins='kernels-*')\n"
                   "prebuilt_wheel(name='torch', pin='kernels-torch', pins_file='k/pins.toml')\n"
                   "rocm_wheel(name='vllm', source=':none', toolchain=':none')\n"
                   f"rocm_wheel(name='{BROKEN}', source=':none', toolchain=':none')\n"
                   f"upstream_archive(name='sdist', url='https://archive.invalid/x.tar.gz', sha256='{'0' * 64}')\n"
                   "target(name='inner', dependencies=[':venv', ':torch'])\n"
                   "target(name='outer', dependencies=[':inner', ':vllm', ':torch'])\n"
                   "target(name='wrong', dependencies=[':inner', ':sdist'])\n"
                   f"target(name='failed', dependencies=[':{BROKEN}'])\n",
    })  # fmt: skip
    return runner


def wheels(rule_runner: RuleRunner, name: str) -> List[str]:
    gathered = rule_runner.request(VenvWheels, [VenvWheelsRequest(Address("k", target_name=name), "the `dependencies` of k:test")])
    return [fc.path for fc in rule_runner.request(DigestContents, [gathered.digest])]


def test_groups_generators_and_built_wheels_are_gathered_down_to_their_files(rule_runner) -> None:
    # A generator stands for what it generates (one wheel a pin); a built wheel brings the wheels
    # below it; a wheel reached twice (torch, through both groups) is in the venv once.
    assert wheels(rule_runner, "venv") == ["kernels_numpy-1.0-py3-none-any.whl", "kernels_triton-1.0-py3-none-any.whl"]
    assert wheels(rule_runner, "outer") == [
        "kernels_numpy-1.0-py3-none-any.whl",
        "kernels_triton-1.0-py3-none-any.whl",
        "torch-1.0-py3-none-any.whl",
        "vllm-1.0-py3-none-any.whl",
        "vllm_below-1.0-py3-none-any.whl",
    ]


def test_a_target_that_is_no_wheel_is_named_with_the_group_that_names_it(rule_runner) -> None:
    with pytest.raises(ExecutionError) as error:
        wheels(rule_runner, "wrong")
    assert (
        "the `dependencies` of k:wrong names k:sdist, a `upstream_archive`; the test's venv takes wheels: "
        "`rocm_wheel` or `prebuilt_wheel` targets (or a `target` grouping them)"
    ) in str(error.value)


def test_a_wheel_that_did_not_build_is_named_with_why(rule_runner) -> None:
    with pytest.raises(ExecutionError) as error:
        wheels(rule_runner, "failed")
    assert f"the `dependencies` of k:failed names the wheel k:{BROKEN}, which did not build: its recipe failed (see the log)" in str(error.value)
