"""`pants test` of a triton_kernel_test: its process, made from the target, and its result.

The process (scripts/kernel_test.sh) gets the dependency wheels, the upstream's tree or
wheel, the workload, the driver and the verdict scripts, and nothing else; it runs without
network. Its key is those contents, the Python's identity and the gpu targets, so the test
runs again only when one of them changes. The report (report.json) goes to dist/test/.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from pants.core.goals.test import TestFieldSet, TestRequest, TestResult, TestSubsystem, TestTimeoutField
from pants.core.util_rules.source_files import SourceFiles, SourceFilesRequest
from pants.engine.addresses import Address, Addresses, UnparsedAddressInputs
from pants.engine.fs import AddPrefix, CreateDigest, Digest, FileContent, MergeDigests, RemovePrefix, Snapshot
from pants.engine.process import FallibleProcessResult, Process
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.core.target_types import GenericTarget
from pants.engine.target import Dependencies, DependenciesRequest, SingleSourceField, Targets, WrappedTarget, WrappedTargetRequest
from pants.option.option_types import SkipOption
from pants.option.subsystem import Subsystem
from pants.util.logging import LogLevel
from pants.core.util_rules import source_files
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.declared import DeclaredDependencies, DeclaredDependenciesRequest
from rocm_build.errors import RocmBuildError
from rocm_build.kernels.target_types import (
    KernelDependenciesField,
    KernelEnvField,
    KernelExpectedFailuresField,
    KernelFailOnSpillsField,
    KernelGpuTargetsField,
    KernelPythonField,
    KernelSourceField,
    KernelWorkloadField,
)
from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_files
from rocm_build.subsystems.host_tools import HostTools
from rocm_build.toolchain.interpreters import PYTHON_LINK, BuildPython, BuildPythonRequest
from rocm_build.toolchain.isolation import NetworkIsolation
from rocm_build.upstream.archives import ArchiveRequest, FetchedArchive
from rocm_build.upstream.prebuilt import FetchedPrebuilt, PrebuiltRequest
from rocm_build.upstream.fetch import TREE_DIR
from rocm_build.upstream.source_tree import MergedTree, MergedTreeRequest
from rocm_build.upstream.target_types import PrebuiltWheelTarget, UpstreamArchiveTarget, UpstreamRepoTarget
from rocm_build.upstream.upstream_repo import ResolvedUpstream, UpstreamRequest
from rocm_build.build.build import BuiltRocmWheel
from rocm_build.wheel.build_spec import WheelRequest
from rocm_build.wheel.env import check_gpu_targets
from rocm_build.wheel.target_types import RocmWheelTarget
from rocm_build.build import build as wheel_build
from rocm_build import declared
from rocm_build.subsystems import host_tools
from rocm_build.toolchain import interpreters
from rocm_build.toolchain import isolation as toolchain_isolation
from rocm_build.upstream import archives as upstream_archives
from rocm_build.upstream import prebuilt as upstream_prebuilt
from rocm_build.upstream import source_tree, upstream_repo

REPORT = "report.json"
EXPECTED = "expected.json"
WORKLOAD = "workload.py"


class TritonKernelTestSubsystem(Subsystem):
    options_scope = "triton-kernels"
    name = "triton-kernels"
    help = "Compiling upstream Triton kernels for each gpu target without a GPU (`triton_kernel_test` targets)."

    skip = SkipOption("test")


@dataclass(frozen=True)
class TritonKernelTestFieldSet(TestFieldSet):
    required_fields = (KernelWorkloadField,)

    source: KernelSourceField
    workload: KernelWorkloadField
    gpu_targets: KernelGpuTargetsField
    dependencies: KernelDependenciesField
    expected_failures: KernelExpectedFailuresField
    fail_on_spills: KernelFailOnSpillsField
    python: KernelPythonField
    env: KernelEnvField
    timeout: TestTimeoutField


class TritonKernelTestRequest(TestRequest):
    tool_subsystem = TritonKernelTestSubsystem
    field_set_type = TritonKernelTestFieldSet


@dataclass(frozen=True)
class KernelTestRequest:
    field_set: TritonKernelTestFieldSet
    timeout_seconds: Optional[int] = None  # the target's `timeout`, with [test]'s defaults applied


@dataclass(frozen=True)
class KernelInputs:
    """What a kernel test's venv and PYTHONPATH get: wheels (at the root) and a tree (or empty)."""

    wheels: Digest
    tree: Digest


@dataclass(frozen=True)
class VenvWheelsRequest:
    """The wheel files of `rocm_wheel` (with the wheels below it) and `prebuilt_wheel` targets,
    through `target`s that group them and `prebuilt_wheels` that generate them (components/kernels:venv):
    what a kernel or choices test's venv installs."""

    addresses: Tuple[Address, ...]
    owner: str  # the test target


@dataclass(frozen=True)
class VenvWheels:
    digest: Digest  # the wheel files, at the root


@rule(desc="Gathering the wheels of a test's venv", level=LogLevel.DEBUG)
async def gather_venv_wheels(request: VenvWheelsRequest) -> VenvWheels:
    owner = request.owner
    what = f"the `dependencies` or `source` of {owner}"
    digests: List[Digest] = []
    queue = list(request.addresses)
    while queue:  # a queue, not recursion: each engine call stays in this rule
        # `Targets` stands a generator (prebuilt_wheels) in for what it generates.
        expanded = await Get(Targets, Addresses([queue.pop(0)]))
        queue = [t.address for t in expanded[1:]] + queue
        target = expanded[0]
        if isinstance(target, GenericTarget):
            queue += [t.address for t in await Get(Targets, DependenciesRequest(target[Dependencies]))]
        elif isinstance(target, PrebuiltWheelTarget):
            digests.append((await Get(FetchedPrebuilt, PrebuiltRequest(target.address, what))).wheel)
        elif isinstance(target, RocmWheelTarget):
            built = await Get(BuiltRocmWheel, WheelRequest(target.address))
            if built.error:
                raise RocmBuildError(f"{owner}: its wheel {target.address.spec} did not build: {built.error}")
            digests += [w.wheel for w in built.closure]
        else:
            raise RocmBuildError(
                f"{what} names {target.address.spec}, a `{target.alias}`; the test's venv takes wheels: "
                f"`{RocmWheelTarget.alias}` or `{PrebuiltWheelTarget.alias}` targets (or a `target` grouping them)"
            )
    return VenvWheels(await Get(Digest, MergeDigests(digests)))


@rule(desc="Gathering what a triton_kernel_test runs on", level=LogLevel.DEBUG)
async def kernel_inputs(request: KernelTestRequest) -> KernelInputs:
    field_set = request.field_set
    owner = field_set.address.spec
    what = f"the `{KernelSourceField.alias}` field of {owner}"
    source = None
    if field_set.source.value:
        (address,) = await Get(
            Addresses, UnparsedAddressInputs([field_set.source.value], owning_address=field_set.address, description_of_origin=what)
        )
        source = (await Get(WrappedTarget, WrappedTargetRequest(address, what))).target
    tree = None
    if isinstance(source, UpstreamArchiveTarget):
        tree = (await Get(FetchedArchive, ArchiveRequest(source.address, what))).tree
    elif isinstance(source, UpstreamRepoTarget):
        upstream = await Get(ResolvedUpstream, UpstreamRequest(source.address, what))
        merged = await Get(MergedTree, MergedTreeRequest(upstream.source, owner))
        # The merged tree is under TREE_DIR/; PYTHONPATH is the tree's root, as an archive's.
        tree = await Get(Digest, RemovePrefix(merged.digest, TREE_DIR))
    deps = await Get(DeclaredDependencies, DeclaredDependenciesRequest(field_set.dependencies))
    wheel_targets = (*((source.address,) if source is not None and tree is None else ()), *(t.address for t in deps))
    wheels = await Get(VenvWheels, VenvWheelsRequest(wheel_targets, owner))
    return KernelInputs(wheels.digest, tree if tree is not None else await Get(Digest, CreateDigest([])))


@rule(desc="Setting up a triton_kernel_test", level=LogLevel.DEBUG)
async def setup_kernel_test(request: KernelTestRequest, tools: HostTools, isolation: NetworkIsolation) -> Process:
    field_set = request.field_set
    owner = field_set.address.spec
    targets = tuple(field_set.gpu_targets.value or ())
    check_gpu_targets(targets, owner, KernelGpuTargetsField.alias)
    python = await Get(BuildPython, BuildPythonRequest(field_set.python.value or "3.11", owner))
    inputs = await Get(KernelInputs, KernelTestRequest, request)
    workload = await Get(SourceFiles, SourceFilesRequest([field_set.workload]))
    workload_file = await Get(Digest, RemovePrefix(workload.snapshot.digest, field_set.address.spec_path or "."))
    expected = {
        "owner": owner,
        "expected_failures": dict(field_set.expected_failures.value or {}),
        "fail_on_spills": field_set.fail_on_spills.value,
        "workload": field_set.workload.file_path,
    }
    digest = await Get(
        Digest,
        MergeDigests(
            [
                await Get(Digest, AddPrefix(inputs.wheels, "wheels")),
                await Get(Digest, AddPrefix(inputs.tree, "src")),
                workload_file,
                await Get(Digest, CreateDigest([FileContent(EXPECTED, json.dumps(expected, sort_keys=True).encode())])),
                await Get(Digest, script_files("kernel_test.sh", "kernel_venv.sh", "triton_kernels.py", "gpu_code.py", "wheel_zip.py", "kernel_verdict.py")),
            ]
        ),
    )
    env = workload_env(field_set.env, field_set.workload, python, targets, isolation)
    return Process(
        argv=(tools.bash.path, f"{SCRIPTS_DIR}/kernel_test.sh"),
        env=env,
        input_digest=digest,
        output_files=(REPORT,),
        append_only_caches={python.cache_name: PYTHON_LINK},
        description=f"Compiling the Triton kernels of {owner} for {', '.join(targets)}",
        level=LogLevel.INFO,
        timeout_seconds=request.timeout_seconds,
    )


def workload_env(
    env: KernelEnvField, workload: SingleSourceField, python: BuildPython, targets: Tuple[str, ...], isolation: NetworkIsolation
) -> Dict[str, str]:
    """The environment of a process that runs a workload under the compile-only driver: the
    target's `env`, the venv's Python, the gpu targets and the workload (kernel_test.sh and the
    upstream_choices_test's choices_test.sh read the same variables)."""
    return {
        **dict(env.value or {}),
        "PATH": "/usr/bin:/bin",
        "ROCM_KERNEL_PYTHON": python.in_sandbox,
        "ROCM_KERNEL_PYTHON_VERSION": python.identity,  # the interpreter's identity is in the key
        "ROCM_KERNEL_TARGETS": " ".join(targets),
        "ROCM_KERNEL_WORKLOAD": workload.file_path.rsplit("/", 1)[-1],
        "ROCM_KERNEL_NETWORK": "none" if isolation.enabled else "host",
    }


@rule(desc="Running a triton_kernel_test", level=LogLevel.DEBUG)
async def run_kernel_test(batch: TritonKernelTestRequest.Batch, test: TestSubsystem) -> TestResult:
    field_set = batch.single_element
    process = await Get(Process, KernelTestRequest(field_set, field_set.timeout.calculate_from_global_options(test)))
    result = await Get(FallibleProcessResult, Process, process)
    report = await Get(Snapshot, Digest, result.output_digest)
    return TestResult.from_fallible_process_result(
        result, field_set.address, test.output, extra_output=report, log_extra_output=True
    )


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        *TritonKernelTestRequest.rules(),
        *source_files.rules(),
        *wheel_build.rules(),
        *declared.rules(),
        *host_tools.rules(),
        *interpreters.rules(),
        *toolchain_isolation.rules(),
        *upstream_archives.rules(),
        *upstream_prebuilt.rules(),
        *source_tree.rules(),
        *upstream_repo.rules(),
    ])
