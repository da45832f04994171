"""The inferred edges, on targets written here: what `pants dependencies` shows, and that the
wheels a build installs are still only the declared ones."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pants.core.target_types import FilesGeneratorTarget, FileTarget
from pants.engine.addresses import Address, Addresses
from pants.engine.internals.parametrize import Parametrize
from pants.engine.rules import QueryRule
from pants.engine.target import DependenciesRequest, WrappedTarget, WrappedTargetRequest
from pants.testutil.rule_runner import RuleRunner

from rocm_build import declared
from rocm_build.declared import DeclaredDependencies, DeclaredDependenciesRequest
from rocm_build.graph import edges
from rocm_build.graph.edges import nearest_owner
from rocm_build.testutil.git_fixtures import pins_toml
from rocm_build.toolchain.target_types import RocmToolchainTarget
from rocm_build.upstream import prebuilt_wheels
from rocm_build.upstream.prebuilt_wheels import PrebuiltWheelsTarget
from rocm_build.upstream.target_types import PrebuiltWheelTarget, UpstreamRepoTarget
from rocm_build.wheel.target_types import RocmWheelTarget, WheelDependenciesField

GIT = {"url": "file:///nowhere", "track": "main", "commit": "a" * 40}


@pytest.fixture
def rule_runner() -> RuleRunner:
    # The graph's rules, the generator of `prebuilt_wheels`, and Pants' `files`, which own the input files.
    runner = RuleRunner(
        rules=[
            *edges.rules(),
            *declared.rules(),
            *prebuilt_wheels.rules(),
            QueryRule(Addresses, [DependenciesRequest]),
            QueryRule(DeclaredDependencies, [DeclaredDependenciesRequest]),
        ],
        target_types=[
            RocmWheelTarget, UpstreamRepoTarget, RocmToolchainTarget, PrebuiltWheelsTarget, PrebuiltWheelTarget,
            FilesGeneratorTarget, FileTarget,
        ],
        objects={"parametrize": Parametrize},
        isolated_local_store=True,
    )  # fmt: skip
    runner.write_files(
        {
            "pins/BUILD": "files(name='pins', sources=['*.toml'])\n",
            "pins/a.toml": pins_toml(a=GIT),
            "pins/b.toml": pins_toml(b=GIT),
            "locks/py3.11/BUILD": "files(name='locks', sources=['*.lock'])\n",
            "locks/py3.11/b.lock": "# a lock\n",
            "BUILD": "rocm_toolchain(name='llvm', provider='llvm', path='/usr/lib/llvm-19')\n"
            "upstream_repo(name='a-src', pin='a', pins_file='pins')\n"
            "upstream_repo(name='b-src', pin='b', pins_file='pins')\n"
            "rocm_wheel(name='a', source=':a-src', toolchain=':llvm', python='3.11')\n"
            "rocm_wheel(name='b', source=':b-src', toolchain=':llvm', python='3.11', dependencies=[':a'],\n"
            "           build_requirements=['six'], lock='locks/py3.11/b.lock')\n",
        }
    )
    return runner


def dependencies(rule_runner: RuleRunner, name: str) -> list:
    target = rule_runner.request(WrappedTarget, [WrappedTargetRequest(Address("", target_name=name), "test")]).target
    return sorted(a.spec for a in rule_runner.request(Addresses, [DependenciesRequest(target.get(WheelDependenciesField))]))


def test_a_wheel_depends_on_its_source_toolchain_lock_and_pin_file(rule_runner: RuleRunner) -> None:
    assert dependencies(rule_runner, "b") == ["//:a", "//:b-src", "//:llvm", "locks/py3.11/b.lock:locks", "pins/b.toml"]
    # The pin file of each upstream is its own: a moved pin `a` reaches nothing built from `b`.
    assert dependencies(rule_runner, "a-src") == ["pins/a.toml"]


def test_the_wheels_a_build_installs_are_the_declared_dependencies(rule_runner: RuleRunner) -> None:
    target = rule_runner.request(WrappedTarget, [WrappedTargetRequest(Address("", target_name="b"), "test")]).target
    declared = rule_runner.request(DeclaredDependencies, [DeclaredDependenciesRequest(target[WheelDependenciesField])])
    assert [t.address.spec for t in declared] == ["//:a"]


def test_an_input_no_target_owns_is_a_warning_naming_the_build_file(rule_runner: RuleRunner, caplog) -> None:
    rule_runner.write_files({"pins/BUILD": ""})
    with caplog.at_level(logging.WARNING):
        assert dependencies(rule_runner, "a-src") == []
    assert (
        "//:a-src is built from pins/a.toml, which no target owns, so Pants cannot see it change (`dependents`, "
        '`--changed-since`): add `files(name="pins", sources=["*.toml"])` to pins/BUILD'
    ) in caplog.text


def test_the_nearest_owner_is_the_deepest_build_file() -> None:
    root = Address("", target_name="workspace", relative_file_path="pins/a.toml")
    own = Address("pins", target_name="pins", relative_file_path="a.toml")
    assert nearest_owner([root, own]) == own and nearest_owner([]) is None


def test_a_parametrized_dependency_is_its_variant_and_inferred_edges_are_not_declared(rule_runner: RuleRunner) -> None:
    rule_runner.write_files(
        {
            "BUILD": Path(rule_runner.build_root, "BUILD").read_text().replace("python='3.11')\n", "python=parametrize('3.11', '3.12'))\n", 1)
            .replace("rocm_wheel(name='b', source=':b-src', toolchain=':llvm', python='3.11',", "rocm_wheel(name='b', source=':b-src', toolchain=':llvm', python=parametrize('3.11', '3.12'),")
        }
    )
    address = Address("", target_name="b", parameters={"python": "3.12"})
    target = rule_runner.request(WrappedTarget, [WrappedTargetRequest(address, "test")]).target
    declared = rule_runner.request(DeclaredDependencies, [DeclaredDependenciesRequest(target[WheelDependenciesField])])
    assert [t.address.spec for t in declared] == ["//:a@python=3.12"]


def test_an_excluded_generated_wheel_is_left_out_of_its_generator(rule_runner: RuleRunner) -> None:
    rule_runner.write_files(
        {
            "wheels/pins.toml": pins_toml(
                prebuilt={"index_url": "https://pypi.org/simple/", "python": "3.11"},
                **{f"prebuilt.kit-{name}": {"project": name, "track": "==1.0", "version": "1.0", "file": f"{name}-1.0-py3-none-any.whl",
                                            "sha256": "b" * 64, "requires_rocm": ""} for name in ("six", "setuptools")},
            ),
            "wheels/BUILD": "prebuilt_wheels(name='kit', pins_file='wheels/pins.toml', pins='kit-*')\n",
            "BUILD": Path(rule_runner.build_root, "BUILD").read_text()
            + "rocm_wheel(name='c', source=':a-src', toolchain=':llvm', python='3.11',\n"
            "           dependencies=['wheels:kit', '!wheels:kit#kit-setuptools'])\n",
        }
    )  # fmt: skip
    target = rule_runner.request(WrappedTarget, [WrappedTargetRequest(Address("", target_name="c"), "test")]).target
    declared = rule_runner.request(DeclaredDependencies, [DeclaredDependenciesRequest(target[WheelDependenciesField])])
    assert [t.address.spec for t in declared] == ["wheels:kit#kit-six"]
