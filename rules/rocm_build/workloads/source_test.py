"""workloads/source.py: what a workload test names as under test (`under_test`, its dict and its
`line` for each kind of source), and the `workload_source` rule in the engine on the stand-ins of
testutil/workload_inputs.py: no source, a tree (TREE_DIR removed, its patches in order, its pin), a
wheel (its address for the venv; one that did not build named with why), and a field that
refuses wheels. sandbox_test.py checks the Process these go into; end to end,
tests/e2e/kernels_test.py's test_an_upstream_repo_source_..., ..._archive_..., ..._rocm_wheel_...
and ..._prebuilt_wheel_source_... compile from each kind, and choices_test.py from a patched sdist."""

from __future__ import annotations

import json
from typing import Any, Dict, Tuple

import pytest
from pants.engine.addresses import Address
from pants.engine.fs import EMPTY_DIGEST, Digest, DigestContents
from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import QueryRule, RuleRunner

from rocm_build.errors import RocmBuildError
from rocm_build.testutil.workload_inputs import BROKEN, PATCHES, REPO_PIN, SDIST_PIN, workload_rule_runner
from rocm_build.upstream.patching import PatchFile
from rocm_build.workloads.source import WorkloadSource, WorkloadSourceRequest, under_test
from rocm_build.workloads.target_types import ChoicesSourceField, WorkloadSourceField

BUILD = f"""\
upstream_archive(name='sdist', url='{SDIST_PIN.url}', sha256='{SDIST_PIN.sha256}', patches=['patches/up:set'])
upstream_repo(name='repo', pin='up', pins_file='up/pins.toml')
prebuilt_wheel(name='triton', pin='triton', pins_file='up/pins.toml')
rocm_wheel(name='torch', source=':repo', toolchain=':none')
rocm_wheel(name='{BROKEN}', source=':repo', toolchain=':none')
"""
OWNER = Address("up", target_name="kernels")  # the workload test whose field it is; its BUILD need not hold it
PATCH = {"path": "p/0001.diff", "sha256": "3" * 64}


@pytest.fixture
def rule_runner() -> RuleRunner:
    runner = workload_rule_runner(QueryRule(WorkloadSource, [WorkloadSourceRequest]), QueryRule(DigestContents, [Digest]))
    runner.write_files({"up/BUILD": BUILD, "up/pins.toml": "", "patches/up/BUILD": "patch_set(name='set')\n"})
    return runner


def source_of(rule_runner: RuleRunner, value: Any, field: type = WorkloadSourceField) -> WorkloadSource:
    return rule_runner.request(WorkloadSource, [WorkloadSourceRequest(field(value, OWNER))])


def files(rule_runner: RuleRunner, digest: Digest) -> Dict[str, bytes]:
    return {fc.path: fc.content for fc in rule_runner.request(DigestContents, [digest])}


@pytest.mark.parametrize(
    "source, wheel, line",
    [
        # A tree pinned by sha256 without patches: no list after the count.
        ({"pin": "up", "sha256": "0123456789abcdef" * 4, "patches": []}, "", "up sha256 0123456789ab with 0 patch(es)"),
        # By commit, with a patch: each named with its sha256's first 12; a build info without `patches` has none.
        (
            {"pin": "up", "commit": "f" * 40, "patches": [PATCH]},
            "",
            f"up @ ffffffffffff with 1 patch(es): p/0001.diff (sha256 {'3' * 12})",
        ),
        ({"pin": "up", "commit": "f" * 40}, "w-1.whl", "w-1.whl, built from up @ ffffffffffff with 0 patch(es)"),
        # A built wheel whose build info records a prebuilt source (prepare/inputs.py's prebuilt_wheel).
        (
            {"prebuilt": "therock-torch", "sha256": "2" * 64},
            "t-1.whl",
            f"t-1.whl, built from prebuilt therock-torch (sha256 {'2' * 12})",
        ),
        # A wheel known only by its file (a prebuilt_wheel), and nothing known at all.
        ({}, "t-1.whl", "t-1.whl"),
        ({}, "", ""),
    ],
)
def test_under_test_names_the_wheel_and_the_pin_and_patches_it_was_built_from(
    source: Dict[str, Any], wheel: str, line: str
) -> None:
    said = under_test("up:x", source, wheel)
    assert said == {"target": "up:x", **({"wheel": wheel} if wheel else {}), "source": source, "line": f"up:x: {line}"}
    assert said["source"] is not source  # a copy: the build info's dict is not shared into the JSON


def test_without_a_source_the_workload_has_no_tree_patches_wheels_or_anything_under_test(rule_runner: RuleRunner) -> None:
    assert source_of(rule_runner, None) == WorkloadSource(EMPTY_DIGEST, (), (), "[]")


@pytest.mark.parametrize(
    "name, patches, identity",
    [("sdist", PATCHES, {"sha256": SDIST_PIN.sha256}), ("repo", PATCHES[:1], {"commit": REPO_PIN.commit})],
)
def test_a_tree_source_is_its_merged_tree_at_the_root_with_its_patches_in_order(
    rule_runner: RuleRunner, name: str, patches: Tuple[PatchFile, ...], identity: Dict[str, str]
) -> None:
    got = source_of(rule_runner, f":{name}")
    # The stand-in's merged tree is TREE_DIR/up/__init__.py; PYTHONPATH needs up/ at the root.
    assert files(rule_runner, got.tree) == {"up/__init__.py": b"# from git\n"}
    assert (got.patch_files, got.wheels) == (tuple(p.path for p in patches), ())
    url = SDIST_PIN.url if name == "sdist" else REPO_PIN.url
    source = {"pin": "up", "url": url, **identity, "patches": [{"path": p.path, "sha256": p.sha256} for p in patches]}
    assert got.under_test == json.dumps([under_test(f"up:{name}", source)], sort_keys=True)


def test_a_wheel_source_goes_to_the_venv_by_its_address_with_no_tree_or_patches(rule_runner: RuleRunner) -> None:
    # What each names as under test, sandbox_test.py checks in expected.json.
    for name in ("triton", "torch"):
        got = source_of(rule_runner, f":{name}")
        assert (got.tree, got.patch_files, got.wheels) == (EMPTY_DIGEST, (), (Address("up", target_name=name),)), name


def test_a_wheel_source_that_did_not_build_is_named_with_why(rule_runner: RuleRunner) -> None:
    # No wheel name: the venv's request is made and says why, naming the field.
    with pytest.raises(ExecutionError) as e:
        source_of(rule_runner, f":{BROKEN}")
    (error,) = e.value.wrapped_exceptions
    assert isinstance(error, RocmBuildError)
    assert str(error) == (
        f"the `source` field of up:kernels names the wheel up:{BROKEN}, which did not build: its recipe failed (see the log)"
    )


@pytest.mark.parametrize("name, alias", [("triton", "prebuilt_wheel"), (BROKEN, "rocm_wheel")])
def test_a_field_that_refuses_wheels_names_the_target_its_kind_and_why(rule_runner: RuleRunner, name: str, alias: str) -> None:
    # The choices test's field: refused before any wheel is built (the broken wheel would else say it did not build).
    with pytest.raises(ExecutionError) as e:
        source_of(rule_runner, f":{name}", ChoicesSourceField)
    (error,) = e.value.wrapped_exceptions
    assert isinstance(error, RocmBuildError)
    assert str(error) == (
        f"the `source` field of up:kernels names up:{name}, a `{alias}`; it takes an `upstream_archive` or `upstream_repo` "
        "(the choices are read from the upstream's Python, not a built wheel)"
    )
