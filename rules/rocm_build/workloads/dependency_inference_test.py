"""A workload test's inferred edges: its `source`, and the owner of each module its workload
imports (the kernel test whose `workload` it is, not a repository-wide `files` glob)."""

from __future__ import annotations

import logging
from typing import List

import pytest
from pants.core.target_types import FilesGeneratorTarget, FileTarget
from pants.engine.addresses import Address, Addresses
from pants.engine.target import DependenciesRequest, WrappedTarget, WrappedTargetRequest
from pants.testutil.rule_runner import QueryRule, RuleRunner

from rocm_build.testutil.workload_inputs import workload_rule_runner
from rocm_build.workloads.target_types import WorkloadDependenciesField

BUILD = """\
upstream_archive(name='sdist', url='https://archive.invalid/up-1.0.tar.gz', sha256='{zeros}')
triton_kernel_test(name='kernels', source=':sdist', workload='kernels_workload.py')
upstream_choices_test(
    name='choices', source=':sdist', workload='choices_workload.py', workload_modules=['kernels_workload.py'],
    expected_choices={{'first@*': 'TRITON_ATTN'}},
)
""".format(zeros="0" * 64)


@pytest.fixture
def rule_runner() -> RuleRunner:
    # Pants' `files` too: the repository's //:workspace globs every file below it.
    runner = workload_rule_runner(QueryRule(Addresses, [DependenciesRequest]), target_types=[FilesGeneratorTarget, FileTarget])
    runner.write_files({
        "BUILD": "files(name='workspace', sources=['up/**/*'])\n",
        "up/BUILD": BUILD,
        "up/kernels_workload.py": "def cases():\n    return []\n",
        "up/choices_workload.py": "import kernels_workload\n",
    })  # fmt: skip
    return runner


def dependencies(rule_runner: RuleRunner, name: str) -> List[str]:
    target = rule_runner.request(WrappedTarget, [WrappedTargetRequest(Address("up", target_name=name), "test")]).target
    return sorted(a.spec for a in rule_runner.request(Addresses, [DependenciesRequest(target[WorkloadDependenciesField])]))


def test_a_test_depends_on_its_source_and_on_the_owner_of_each_module_its_workload_imports(rule_runner) -> None:
    assert dependencies(rule_runner, "kernels") == ["up:sdist"]
    assert dependencies(rule_runner, "choices") == ["up:kernels", "up:sdist"]


def test_a_module_no_target_owns_is_no_edge_and_a_warning(rule_runner, caplog) -> None:
    rule_runner.write_files({"BUILD": "", "up/BUILD": BUILD.replace("workload='kernels_workload.py'", "workload='other.py'"),
                             "up/other.py": ""})  # fmt: skip
    with caplog.at_level(logging.WARNING):
        assert dependencies(rule_runner, "choices") == ["up:sdist"]
    assert "up:choices is built from up/kernels_workload.py, which no target owns" in caplog.text
