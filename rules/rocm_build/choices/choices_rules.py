"""`pants test` of an upstream_choices_test: its process, made from the target, and its result.

The process (scripts/choices_test.sh) gets the dependency wheels, the upstream's tree with our
patches (an `upstream_archive`'s or `upstream_repo`'s own `patches`, applied when it is fetched),
the workload and its modules, the driver scripts and the expectations, and nothing else; it runs
without network. Its key is those contents, the Python's identity and the gpu targets. The
report (choices.json) goes to dist/test/.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional, Tuple

from pants.core.goals.test import TestFieldSet, TestRequest, TestResult, TestSubsystem, TestTimeoutField
from pants.core.util_rules.source_files import SourceFiles, SourceFilesRequest
from pants.engine.addresses import Addresses, UnparsedAddressInputs
from pants.engine.fs import AddPrefix, CreateDigest, Digest, FileContent, MergeDigests, RemovePrefix, Snapshot
from pants.engine.process import FallibleProcessResult, Process
from pants.engine.rules import Get, collect_rules, rule
from pants.engine.target import WrappedTarget, WrappedTargetRequest
from pants.option.option_types import SkipOption
from pants.option.subsystem import Subsystem
from pants.util.logging import LogLevel
from pants.core.util_rules import source_files
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.choices.target_types import (
    ChoicesSourceField,
    ChoicesWorkloadField,
    ChoicesWorkloadModulesField,
    ExpectedChoicesField,
)
from rocm_build.errors import RocmBuildError
from rocm_build.declared import DeclaredDependencies, DeclaredDependenciesRequest
from rocm_build.kernels.kernel_rules import VenvWheels, VenvWheelsRequest, workload_env
from rocm_build.kernels.target_types import (
    KernelDependenciesField,
    KernelEnvField,
    KernelGpuTargetsField,
    KernelPythonField,
)
from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_files
from rocm_build.subsystems.host_tools import HostTools
from rocm_build.toolchain.interpreters import PYTHON_LINK, BuildPython, BuildPythonRequest
from rocm_build.toolchain.isolation import NetworkIsolation
from rocm_build.upstream.archives import ArchiveRequest, FetchedArchive
from rocm_build.upstream.source_tree import MergedTree, MergedTreeRequest
from rocm_build.upstream.target_types import UpstreamArchiveTarget, UpstreamRepoTarget
from rocm_build.upstream.upstream_repo import ResolvedUpstream, UpstreamRequest
from rocm_build.wheel.env import check_gpu_targets
from rocm_build import declared
from rocm_build.kernels import kernel_rules
from rocm_build.subsystems import host_tools
from rocm_build.toolchain import interpreters
from rocm_build.toolchain import isolation as toolchain_isolation
from rocm_build.upstream import archives as upstream_archives
from rocm_build.upstream import source_tree, upstream_repo

REPORT = "choices.json"
EXPECTED = "expected.json"


class UpstreamChoicesTestSubsystem(Subsystem):
    options_scope = "upstream-choices"
    name = "upstream-choices"
    help = "Reading an upstream's run-time choices for each gpu target without a GPU (`upstream_choices_test` targets)."

    skip = SkipOption("test")


@dataclass(frozen=True)
class UpstreamChoicesTestFieldSet(TestFieldSet):
    required_fields = (ChoicesWorkloadField, ExpectedChoicesField)

    source: ChoicesSourceField
    workload: ChoicesWorkloadField
    workload_modules: ChoicesWorkloadModulesField
    gpu_targets: KernelGpuTargetsField
    dependencies: KernelDependenciesField
    expected_choices: ExpectedChoicesField
    python: KernelPythonField
    env: KernelEnvField
    timeout: TestTimeoutField


class UpstreamChoicesTestRequest(TestRequest):
    tool_subsystem = UpstreamChoicesTestSubsystem
    field_set_type = UpstreamChoicesTestFieldSet


@dataclass(frozen=True)
class ChoicesTestRequest:
    field_set: UpstreamChoicesTestFieldSet
    timeout_seconds: Optional[int] = None


@dataclass(frozen=True)
class ChoicesTree:
    """The upstream's tree as we ship it: patched by the source's own `patches`."""

    tree: Digest
    patch_files: Tuple[str, ...]  # in the order they were applied


@rule(desc="Gathering the tree of an upstream_choices_test", level=LogLevel.DEBUG)
async def choices_tree(request: ChoicesTestRequest) -> ChoicesTree:
    field_set = request.field_set
    owner = field_set.address.spec
    what = f"the `{ChoicesSourceField.alias}` field of {owner}"
    (address,) = await Get(
        Addresses, UnparsedAddressInputs([field_set.source.value], owning_address=field_set.address, description_of_origin=what)
    )
    source = (await Get(WrappedTarget, WrappedTargetRequest(address, what))).target
    if isinstance(source, UpstreamArchiveTarget):
        archive = await Get(FetchedArchive, ArchiveRequest(source.address, what))
        return ChoicesTree(archive.tree, tuple(p.path for p in archive.patches))
    if isinstance(source, UpstreamRepoTarget):
        upstream = await Get(ResolvedUpstream, UpstreamRequest(source.address, what))
        tree = await Get(MergedTree, MergedTreeRequest(upstream.source, owner))
        return ChoicesTree(tree.digest, tuple(p.path for p in upstream.patches))
    raise RocmBuildError(
        f"{what} names {address.spec}, a `{source.alias}`; it takes an `{UpstreamArchiveTarget.alias}` or "
        f"`{UpstreamRepoTarget.alias}` (the choices are read from the upstream's Python, not a built wheel)"
    )


@rule(desc="Setting up an upstream_choices_test", level=LogLevel.DEBUG)
async def setup_choices_test(request: ChoicesTestRequest, tools: HostTools, isolation: NetworkIsolation) -> Process:
    field_set = request.field_set
    owner = field_set.address.spec
    targets = tuple(field_set.gpu_targets.value or ())
    check_gpu_targets(targets, owner, KernelGpuTargetsField.alias)
    python = await Get(BuildPython, BuildPythonRequest(field_set.python.value or "3.11", owner))
    tree = await Get(ChoicesTree, ChoicesTestRequest, request)
    deps = await Get(DeclaredDependencies, DeclaredDependenciesRequest(field_set.dependencies))
    wheels = (await Get(VenvWheels, VenvWheelsRequest(tuple(t.address for t in deps), owner))).digest
    workload = await Get(SourceFiles, SourceFilesRequest([field_set.workload, field_set.workload_modules]))
    workload_files = await Get(Digest, RemovePrefix(workload.snapshot.digest, field_set.address.spec_path or "."))
    expected = {
        "owner": owner,
        "workload": field_set.workload.file_path,
        "patches": list(tree.patch_files),
        "expected_choices": dict(field_set.expected_choices.value or {}),
    }
    digest = await Get(
        Digest,
        MergeDigests(
            [
                await Get(Digest, AddPrefix(wheels, "wheels")),
                await Get(Digest, AddPrefix(tree.tree, "src")),
                workload_files,
                await Get(Digest, CreateDigest([FileContent(EXPECTED, json.dumps(expected, sort_keys=True).encode())])),
                await Get(Digest, script_files("choices_test.sh", "kernel_venv.sh", "upstream_choices.py", "triton_kernels.py", "gpu_code.py", "wheel_zip.py")),
            ]
        ),
    )
    env = workload_env(field_set.env, field_set.workload, python, targets, isolation)
    return Process(
        argv=(tools.bash.path, f"{SCRIPTS_DIR}/choices_test.sh"),
        env=env,
        input_digest=digest,
        output_files=(REPORT,),
        append_only_caches={python.cache_name: PYTHON_LINK},
        description=f"Reading the run-time choices of {owner} for {', '.join(targets)}",
        level=LogLevel.INFO,
        timeout_seconds=request.timeout_seconds,
    )


@rule(desc="Running an upstream_choices_test", level=LogLevel.DEBUG)
async def run_choices_test(batch: UpstreamChoicesTestRequest.Batch, test: TestSubsystem) -> TestResult:
    field_set = batch.single_element
    process = await Get(Process, ChoicesTestRequest(field_set, field_set.timeout.calculate_from_global_options(test)))
    result = await Get(FallibleProcessResult, Process, process)
    report = await Get(Snapshot, Digest, result.output_digest)
    return TestResult.from_fallible_process_result(
        result, field_set.address, test.output, extra_output=report, log_extra_output=True
    )


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        *UpstreamChoicesTestRequest.rules(),
        *source_files.rules(),
        *declared.rules(),
        *kernel_rules.rules(),
        *host_tools.rules(),
        *interpreters.rules(),
        *toolchain_isolation.rules(),
        *upstream_archives.rules(),
        *source_tree.rules(),
        *upstream_repo.rules(),
    ])
