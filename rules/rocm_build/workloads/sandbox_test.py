"""The Process of each kind of workload test, from its target: argv, env and every file of its
sandbox, on the stand-ins of testutil/workload_inputs.py (a tree, wheels, the Python). What runs
in it: scripts/*_test.py and tests/e2e/kernels_test.py, choices_test.py."""

from __future__ import annotations

import json
from typing import Dict, Tuple, Type

import pytest
from pants.engine.addresses import Address
from pants.engine.fs import Digest, DigestContents
from pants.engine.internals.scheduler import ExecutionError
from pants.engine.process import Process, ProcessCacheScope
from pants.engine.target import WrappedTarget, WrappedTargetRequest
from pants.testutil.rule_runner import QueryRule, RuleRunner

from rocm_build.sandbox_scripts import SCRIPTS_DIR
from rocm_build.testutil.workload_inputs import BASH, BUILT_SOURCE, PATCHES, PYTHON, SDIST_PIN, workload_rule_runner
from rocm_build.workloads.choices import UpstreamChoicesTestFieldSet
from rocm_build.workloads.kernels import TritonKernelTestFieldSet
from rocm_build.workloads.sandbox import WorkloadTest, WorkloadTestFieldSet

BUILD = """\
upstream_archive(name='sdist', url='https://archive.invalid/up-1.0.tar.gz', sha256='{zeros}', patches=['patches/up:set'])
upstream_repo(name='repo', pin='up', pins_file='up/pins.toml')
prebuilt_wheel(name='triton', pin='triton', pins_file='up/pins.toml')
rocm_wheel(name='torch', source=':repo', toolchain=':none')
target(name='venv', dependencies=[':triton', ':torch'])
triton_kernel_test(
    name='kernels', source=':sdist', workload='kernels_workload.py', gpu_targets=['gfx1151', 'gfx950'],
    dependencies=[':venv'], env={{'FLASH_ATTENTION_TRITON_AMD_ENABLE': 'TRUE'}},
    expected_failures={{'big@gfx1151': 'too much LDS'}}, timeout=600,
)
upstream_choices_test(
    name='choices', source=':sdist', workload='choices_workload.py', workload_modules=['kernels_workload.py'],
    gpu_targets=['gfx1151', 'gfx942'], dependencies=[':triton'], expected_choices={{'first@*': 'TRITON_ATTN'}},
)
""".format(zeros="0" * 64)

# The archive's tree: its pin's sha256 and both patches' (testutil/workload_inputs.py).
SDIST_UNDER_TEST = {
    "target": "up:sdist",
    "source": {
        "pin": "up", "url": SDIST_PIN.url, "sha256": "0" * 64,
        "patches": [{"path": p.path, "sha256": p.sha256} for p in PATCHES],
    },
    "line": f"up:sdist: up sha256 000000000000 with 2 patch(es): patches/up/0001-first.edit.toml (sha256 {'1' * 12}), "
    f"patches/up/0002-second.diff (sha256 {'2' * 12})",
}  # fmt: skip
# Each wheel of the venv installed once (installed.py, a stand-in here), linked in under site/.
WHEELS = ["site/torch-1.0-py3-none-any", "site/torch_below-1.0-py3-none-any", "site/triton-1.0-py3-none-any"]
DRIVER = [f"{SCRIPTS_DIR}/{s}" for s in ("amdgpu_elf.py", "kernel_shards.py", "kernel_venv.sh", "no_network.sh", "triton_kernels.py")]


@pytest.fixture
def rule_runner() -> RuleRunner:
    runner = workload_rule_runner(
        QueryRule(Process, [WorkloadTest]), QueryRule(DigestContents, [Digest]), QueryRule(WrappedTarget, [WrappedTargetRequest])
    )
    runner.write_files({
        "up/BUILD": BUILD,
        "up/pins.toml": "",
        "up/kernels_workload.py": "def cases():\n    return []\n",
        "up/choices_workload.py": "import kernels_workload\n",
        "patches/up/BUILD": "patch_set(name='set')\n",
    })  # fmt: skip
    return runner


def process(
    rule_runner: RuleRunner, name: str, kind: Type[WorkloadTestFieldSet], timeout=None, force=False
) -> Tuple[Process, Dict[str, bytes]]:
    """The test's Process and its sandbox's files, each installed wheel's under its link."""
    target = rule_runner.request(WrappedTarget, [WrappedTargetRequest(Address("up", target_name=name), "test")]).target
    made = rule_runner.request(Process, [WorkloadTest(kind.create(target), timeout, force)])
    files = {fc.path: fc.content for fc in rule_runner.request(DigestContents, [made.input_digest])}
    for link, digest in made.immutable_input_digests.items():
        assert link not in files, link  # a link, never also a file
        (installed,) = rule_runner.request(DigestContents, [digest])
        files[link] = installed.content
    return made, files


def env(targets: str, **extra: str) -> Dict[str, str]:
    return {
        **extra,
        "PATH": "/usr/bin:/bin",
        "ROCM_KERNEL_PYTHON": PYTHON.in_sandbox,
        "ROCM_KERNEL_PYTHON_VERSION": "CPython 3.11.2",
        "ROCM_KERNEL_TARGETS": targets,
        "ROCM_KERNEL_NETWORK": "none",
    }


def test_a_kernel_test_runs_its_script_on_the_venv_the_tree_and_its_expected_failures(rule_runner) -> None:
    made, files = process(rule_runner, "kernels", TritonKernelTestFieldSet, timeout=600)
    # Its cases over as many processes (up to 4) as Pants gives it cores, which Pants fills in
    # after the cache's key is made: the key holds the template, not the machine's number.
    assert made.argv == (BASH, f"{SCRIPTS_DIR}/kernel_test.sh", "{pants_concurrency}")
    assert made.concurrency_available == 4
    assert dict(made.env) == env("gfx1151 gfx950", ROCM_KERNEL_WORKLOAD="kernels_workload.py", FLASH_ATTENTION_TRITON_AMD_ENABLE="TRUE")
    assert made.output_files == ("report.json",)
    assert made.timeout_seconds == 600
    assert made.cache_scope == ProcessCacheScope.SUCCESSFUL  # a failure runs again, as pytest's do
    assert made.description == "Compiling the Triton kernels of up:kernels for gfx1151, gfx950"
    assert dict(made.append_only_caches) == {PYTHON.cache_name: ".python"}
    # The group's wheels, a built wheel with the one below it; the archive's tree at src/'s root.
    assert files["site/torch-1.0-py3-none-any"] == b"# torch-1.0-py3-none-any.whl\n"  # its install
    assert sorted(files) == sorted([
        *WHEELS, "src/up/__init__.py", "kernels_workload.py", "expected.json",
        f"{SCRIPTS_DIR}/kernel_test.sh", f"{SCRIPTS_DIR}/kernel_verdict.py", *DRIVER,
    ])  # fmt: skip
    assert json.loads(files["expected.json"]) == {
        "owner": "up:kernels",
        "workload": "up/kernels_workload.py",
        "under_test": [SDIST_UNDER_TEST],
        "expected_failures": {"big@gfx1151": "too much LDS"},
        "fail_on_spills": False,
    }


def test_a_choices_test_gets_the_modules_its_workload_imports_and_the_patches_of_its_tree(rule_runner) -> None:
    made, files = process(rule_runner, "choices", UpstreamChoicesTestFieldSet)
    assert made.argv == (BASH, f"{SCRIPTS_DIR}/choices_test.sh")
    assert made.concurrency_available == 0  # one process reads the choices
    # `pants test --force` runs it again whatever the caches hold, as it does pytest's.
    assert process(rule_runner, "choices", UpstreamChoicesTestFieldSet, force=True)[0].cache_scope == ProcessCacheScope.PER_SESSION
    assert dict(made.env) == env("gfx1151 gfx942", ROCM_KERNEL_WORKLOAD="choices_workload.py")
    assert made.output_files == ("choices.json",)
    assert made.description == "Reading the run-time choices of up:choices for gfx1151, gfx942"
    assert sorted(files) == sorted([
        "site/triton-1.0-py3-none-any", "src/up/__init__.py", "choices_workload.py", "kernels_workload.py",
        "expected.json", f"{SCRIPTS_DIR}/choices_test.sh", f"{SCRIPTS_DIR}/upstream_choices.py", *DRIVER,
    ])  # fmt: skip
    assert json.loads(files["expected.json"]) == {
        "owner": "up:choices",
        "workload": "up/choices_workload.py",
        "under_test": [SDIST_UNDER_TEST],
        "patches": ["patches/up/0001-first.edit.toml", "patches/up/0002-second.diff"],  # in the order they applied
        "expected_choices": {"first@*": "TRITON_ATTN"},
    }


def test_an_upstream_repos_tree_is_at_the_root_of_src_as_an_archives(rule_runner) -> None:
    rule_runner.write_files({"up/BUILD": BUILD.replace("source=':sdist'", "source=':repo'")})
    for name, kind in (("kernels", TritonKernelTestFieldSet), ("choices", UpstreamChoicesTestFieldSet)):
        _, files = process(rule_runner, name, kind)
        assert files["src/up/__init__.py"] == b"# from git\n", name
        (under_test,) = json.loads(files["expected.json"])["under_test"]
        assert under_test["line"] == f"up:repo: up @ aaaaaaaaaaaa with 1 patch(es): patches/up/0001-first.edit.toml (sha256 {'1' * 12})"
    assert json.loads(files["expected.json"])["patches"] == ["patches/up/0001-first.edit.toml"]


def test_a_rocm_wheel_source_is_named_by_its_wheel_and_the_source_its_build_info_records(rule_runner) -> None:
    rule_runner.write_files({"up/BUILD": BUILD.replace("source=':sdist'", "source=':torch'")})
    _, files = process(rule_runner, "kernels", TritonKernelTestFieldSet)
    assert json.loads(files["expected.json"])["under_test"] == [
        {
            "target": "up:torch",
            "wheel": "torch-1.0-py3-none-any.whl",
            "source": BUILT_SOURCE,
            "line": f"up:torch: torch-1.0-py3-none-any.whl, built from up @ aaaaaaaaaaaa with 1 patch(es): "
            f"patches/up/0001-first.edit.toml (sha256 {'1' * 12})",
        }
    ]


def test_a_wheel_source_goes_into_a_kernel_tests_venv_and_a_choices_test_refuses_it(rule_runner) -> None:
    rule_runner.write_files({"up/BUILD": BUILD.replace("source=':sdist'", "source=':triton'")})
    _, files = process(rule_runner, "kernels", TritonKernelTestFieldSet)
    assert sorted(f for f in files if f.startswith(("site/", "src/"))) == sorted(WHEELS)  # no tree; triton once
    # A prebuilt wheel is named by its file (pinned by sha256 in its pins file).
    assert json.loads(files["expected.json"])["under_test"] == [
        {"target": "up:triton", "wheel": "triton-1.0-py3-none-any.whl", "source": {}, "line": "up:triton: triton-1.0-py3-none-any.whl"}
    ]
    with pytest.raises(ExecutionError) as error:
        process(rule_runner, "choices", UpstreamChoicesTestFieldSet)
    assert (
        "the `source` field of up:choices names up:triton, a `prebuilt_wheel`; it takes an `upstream_archive` or "
        "`upstream_repo` (the choices are read from the upstream's Python, not a built wheel)"
    ) in str(error.value)


def test_without_a_source_the_workload_holds_its_kernels_itself(rule_runner) -> None:
    rule_runner.write_files({"up/BUILD": BUILD.replace("name='kernels', source=':sdist', ", "name='kernels', ")})
    _, files = process(rule_runner, "kernels", TritonKernelTestFieldSet)
    assert not [f for f in files if f.startswith("src/")]
