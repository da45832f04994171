"""The inferred edges, on targets written here: what `pants dependencies` shows, and that the
wheels a build installs are still only the declared ones."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pants.core.target_types import FilesGeneratorTarget, FileTarget
from pants.engine.addresses import Address, Addresses
from pants.engine.internals.parametrize import Parametrize
from pants.engine.internals.scheduler import ExecutionError
from pants.engine.rules import QueryRule
from pants.engine.target import DependenciesRequest, Targets, WrappedTarget, WrappedTargetRequest
from pants.testutil.rule_runner import RuleRunner

from rocm_build import declared
from rocm_build.declared import DeclaredDependencies, DeclaredDependenciesRequest
from rocm_build.graph import edges
from rocm_build.graph.edges import inside, nearest_owner, one_edge_each, script_owners
from rocm_build.prebuilt import target_generator
from rocm_build.prebuilt.target_generator import PrebuiltWheelsTarget
from rocm_build.testutil.git_fixtures import pins_toml
from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner
from rocm_build.toolchain.target_types import RocmToolchainTarget
from rocm_build.upstream.target_types import PrebuiltWheelTarget, UpstreamRepoTarget
from rocm_build.wheel.target_types import RocmWheelTarget, WheelDependenciesField

GIT = {"url": "file:///nowhere", "track": "main", "commit": "a" * 40}


@pytest.fixture
def rule_runner() -> RuleRunner:
    # The graph's rules, the generator of `prebuilt_wheels`, and Pants' `files`, which own the input files.
    runner = isolated_rule_runner(
        rules=[
            *edges.rules(),
            *declared.rules(),
            *target_generator.rules(),
            QueryRule(Addresses, [DependenciesRequest]),
            QueryRule(Targets, [DependenciesRequest]),
            QueryRule(DeclaredDependencies, [DeclaredDependenciesRequest]),
        ],
        target_types=[
            RocmWheelTarget, UpstreamRepoTarget, RocmToolchainTarget, PrebuiltWheelsTarget, PrebuiltWheelTarget,
            FilesGeneratorTarget, FileTarget,
        ],
        objects={"parametrize": Parametrize},
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


KIT_PINS = pins_toml(
    prebuilt={"index_url": "https://pypi.org/simple/", "python": "3.11"},
    **{f"prebuilt.kit-{name}": {"project": name, "track": "==1.0", "version": "1.0", "file": f"{name}-1.0-py3-none-any.whl",
                                "sha256": "b" * 64, "requires_rocm": ""} for name in ("six", "setuptools")},
)  # fmt: skip


def wheel_c(rule_runner: RuleRunner, kit: str, dependencies: str) -> WrappedTarget:
    rule_runner.write_files(
        {
            "wheels/pins.toml": KIT_PINS,
            "wheels/BUILD": kit,
            "BUILD": Path(rule_runner.build_root, "BUILD").read_text()
            + f"rocm_wheel(name='c', source=':a-src', toolchain=':llvm', python='3.11', dependencies={dependencies})\n",
        }
    )
    return rule_runner.request(WrappedTarget, [WrappedTargetRequest(Address("", target_name="c"), "test")]).target


def test_a_generator_of_all_but_some_pins_is_what_pants_lists_and_the_build_installs(rule_runner: RuleRunner) -> None:
    kit = "prebuilt_wheels(name='build-kit', pins_file='wheels/pins.toml', pins=['kit-*', '!kit-setuptools'])\n"
    target = wheel_c(rule_runner, kit, "['wheels:build-kit']")
    declared = rule_runner.request(DeclaredDependencies, [DeclaredDependenciesRequest(target[WheelDependenciesField])])
    assert [t.address.spec for t in declared] == ["wheels:build-kit#kit-six"]
    # What `pants dependencies` lists: the generator stands for what it generates, the one wheel.
    listed = rule_runner.request(Targets, [DependenciesRequest(target[WheelDependenciesField])])
    assert [t.address.spec for t in listed if t.address.spec_path == "wheels"] == ["wheels:build-kit#kit-six"]


def test_leaving_out_a_generated_target_of_a_named_generator_is_refused_naming_the_fix(rule_runner: RuleRunner) -> None:
    kit = "prebuilt_wheels(name='kit', pins_file='wheels/pins.toml', pins='kit-*')\n"
    target = wheel_c(rule_runner, kit, "['wheels:kit', '!wheels:kit#kit-setuptools']")
    with pytest.raises(ExecutionError) as raised:
        rule_runner.request(DeclaredDependencies, [DeclaredDependenciesRequest(target[WheelDependenciesField])])
    assert (
        "//:c: `dependencies` names wheels:kit and leaves out `!wheels:kit#kit-setuptools`, which wheels:kit generates: "
        "Pants still lists it as a dependency (`pants dependencies`, `peek`, `--changed-dependents`). Depend on a "
        'generator of just the wanted targets instead, e.g. beside wheels:kit: `prebuilt_wheels(name="...", '
        'pins=["<glob>", "!kit-setuptools"])` (components/kernels:build-venv).'
    ) in str(raised.value)


def test_the_plugins_inputs_are_edges_only_inside_the_repository() -> None:
    assert inside("/repo/pants.toml", "/repo") == "pants.toml" and inside("pants.toml", "/repo") == "pants.toml"
    # A plugin installed from a wheel, a config file in the home directory: nothing to own.
    assert inside("/usr/lib/python3/site-packages/rocm_build/scripts", "/repo") is None
    assert inside("/repo/../home/.pants.rc", "/repo") is None


def test_the_scripts_are_owned_by_the_resources_that_ship_them() -> None:
    def generated(name: str, file: str) -> Address:
        return Address("rules/rocm_build/scripts", target_name=name, relative_file_path=file)

    shipped = [generated("scripts", "build_wheel.sh"), generated("scripts", "ccache_remote.py")]
    owners = [(shipped[0], generated("files", "build_wheel.sh")), (shipped[1], generated("modules-py311", "ccache_remote.py"))]
    assert script_owners(owners, shipped) == (Address("rules/rocm_build/scripts", target_name="scripts"),)
    # Without a `resources` target, each script's nearest owner.
    assert script_owners([(generated("files", "build_wheel.sh"),)], []) == (generated("files", "build_wheel.sh"),)


def test_the_scripts_are_one_edge_through_the_target_that_gathers_them() -> None:
    resources = Address("rules/rocm_build/scripts", target_name="scripts")
    gatherer = Address("rules/rocm_build/scripts", target_name="sandbox-scripts")
    bystander = Address("rules/rocm_build/scripts", target_name="other")
    assert one_edge_each([resources], {bystander: (), gatherer: (resources,)}) == (gatherer,)
    # Nothing gathers them: the resources themselves (listed file by file, still every edge).
    assert one_edge_each([resources], {bystander: ()}) == (resources,)
