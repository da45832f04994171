"""`pants test` of a workload test, either kind: its sandbox, its Process and its result.

The sandbox gets the venv's wheels, each installed once and linked in under site/ (installed.py),
the upstream's tree (src/), the workload and its modules, the expectations (expected.json), the
kind's script and judge with the compile-only driver, and nothing else; it runs without
network (scripts/kernel_venv.sh). Its key is those contents, the Python's identity and the gpu
targets, so a test runs again only when one of them changes. The report goes to dist/test/. A kind (kernels.py, choices.py) says only what differs:
its option scope, its fields, its `WorkloadKind` (script, judge, report) and expectations.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar, Dict, Optional, Tuple

from pants.core.goals.test import TestFieldSet, TestResult, TestSubsystem, TestTimeoutField
from pants.core.util_rules import source_files
from pants.core.util_rules.source_files import SourceFiles, SourceFilesRequest
from pants.engine.fs import AddPrefix, CreateDigest, Digest, FileContent, MergeDigests, RemovePrefix, Snapshot
from pants.engine.process import FallibleProcessResult, Process, ProcessCacheScope
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import SourcesField
from pants.option.option_types import SkipOption
from pants.option.subsystem import Subsystem
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.declared import DeclaredDependencies, DeclaredDependenciesRequest
from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_files
from rocm_build.subsystems.host_tools import HostTools
from rocm_build.toolchain.interpreters import PYTHON_LINK, BuildPython, BuildPythonRequest
from rocm_build.toolchain.isolation import NetworkIsolation
from rocm_build.wheel.env import check_gpu_targets
from rocm_build.workloads.source import WorkloadSource, WorkloadSourceRequest
from rocm_build.workloads.target_types import (
    WorkloadDependenciesField,
    WorkloadEnvField,
    WorkloadField,
    WorkloadGpuTargetsField,
    WorkloadPythonField,
    WorkloadSourceField,
)
from rocm_build.workloads.installed import InstalledWheels, InstallWheelsRequest
from rocm_build.workloads.venv import VenvWheels, VenvWheelsRequest
from rocm_build.toolchain import interpreters, isolation
from rocm_build import declared
from rocm_build.subsystems import host_tools
from rocm_build.workloads import installed, source, venv

EXPECTED = "expected.json"
# What every workload runs on: the sandbox (kernel_venv.sh) and the compile-only driver.
DRIVER = ("kernel_venv.sh", "no_network.sh", "triton_kernels.py", "amdgpu_elf.py", "kernel_shards.py")
# Pants' share of the cores, where a kind spreads its cases over processes: its script's argument.
CONCURRENCY = "{pants_concurrency}"


class WorkloadTestSubsystem(Subsystem):
    """A kind's option scope: `skip`, for `pants test` (each kind names its scope)."""

    skip = SkipOption("test")


@dataclass(frozen=True)
class WorkloadKind:
    """What a kind of workload test runs and writes: all its Process does not share."""

    script: str  # scripts/<script>, run by bash: it sources kernel_venv.sh, runs the workload
    judge: str  # scripts/<judge>: what the script judges the workload's outcome with
    report: str  # the file the process writes, kept in dist/test/<target>/
    doing: str  # the process's description: "<doing> of <target> for <gpu targets>"
    # At most this many processes for the cases, as Pants shares out idle cores: more than 1 and
    # the script gets the number Pants gives (CONCURRENCY) as its argument.
    processes: int = 1


@dataclass(frozen=True)
class WorkloadTestFieldSet(TestFieldSet):
    """What both kinds read of their target; a kind subclasses it with its own fields."""

    kind: ClassVar[WorkloadKind]

    source: WorkloadSourceField
    workload: WorkloadField
    gpu_targets: WorkloadGpuTargetsField
    dependencies: WorkloadDependenciesField
    python: WorkloadPythonField
    env: WorkloadEnvField
    timeout: TestTimeoutField

    def modules(self) -> Tuple[SourcesField, ...]:
        """Sources the workload imports, beside it in the sandbox."""
        return ()

    def expectations(self, source: WorkloadSource) -> Dict[str, Any]:
        """What expected.json holds besides the owner and the workload, for the judge."""
        raise NotImplementedError


@dataclass(frozen=True)
class WorkloadTest:
    field_set: WorkloadTestFieldSet
    timeout_seconds: Optional[int] = None  # the target's `timeout`, with [test]'s defaults applied
    force: bool = False  # `pants test --force`: run again, whatever the caches hold

    @classmethod
    def of(cls, field_set: WorkloadTestFieldSet, test: TestSubsystem) -> "WorkloadTest":
        return cls(field_set, field_set.timeout.calculate_from_global_options(test), test.force)


@dataclass(frozen=True)
class WorkloadVenvRequest:
    """The wheels some addresses stand for in a test's venv (venv.py), each installed (installed.py)."""

    named: Tuple[VenvWheelsRequest, ...]
    python: BuildPython


@rule(desc="Installing a workload test's venv", level=LogLevel.DEBUG)
async def install_workload_venv(request: WorkloadVenvRequest) -> InstalledWheels:
    # Each address a request of its own (venv.py), asked for together; the files merged, so two
    # addresses that stand for the same wheel give one install (and two different files of one
    # name, an error).
    venv = await MultiGet(Get(VenvWheels, VenvWheelsRequest, each) for each in request.named)
    wheels = await Get(Digest, MergeDigests(w.digest for w in venv))
    return await Get(InstalledWheels, InstallWheelsRequest(wheels, request.python))


@rule(desc="Setting up a workload test", level=LogLevel.DEBUG)
async def setup_workload_test(request: WorkloadTest, tools: HostTools, isolation: NetworkIsolation) -> Process:
    field_set = request.field_set
    kind = field_set.kind
    owner = field_set.address.spec
    targets = tuple(field_set.gpu_targets.value or ())
    check_gpu_targets(targets, owner, WorkloadGpuTargetsField.alias)
    python, declared, workload = await MultiGet(
        Get(BuildPython, BuildPythonRequest(field_set.python.value or "3.11", owner)),
        Get(DeclaredDependencies, DeclaredDependenciesRequest(field_set.dependencies)),
        Get(SourceFiles, SourceFilesRequest([field_set.workload, *field_set.modules()])),
    )
    from_dependencies = tuple(VenvWheelsRequest(t.address, f"the `dependencies` of {owner}") for t in declared)
    # The `dependencies`' wheels are installed while the source is made (a patched tree or a
    # built wheel is a chain of processes, each queued for a slot behind whatever was asked for
    # before it), not after it; the venv's installs below find them done, as the engine
    # memoizes each wheel's install.
    source, _ = await MultiGet(
        Get(WorkloadSource, WorkloadSourceRequest(field_set.source)),
        Get(InstalledWheels, WorkloadVenvRequest(from_dependencies, python)),
    )
    from_source = tuple(VenvWheelsRequest(a, f"the `{field_set.source.alias}` field of {owner}") for a in source.wheels)
    installed = await Get(InstalledWheels, WorkloadVenvRequest((*from_source, *from_dependencies), python))
    # What is under test (the upstream's wheel or tree: version, pin, patch digests) goes into the
    # report and the output with what the kind expects (workloads/source.py, under_test).
    expected = {
        "owner": owner, "workload": field_set.workload.file_path, "under_test": json.loads(source.under_test),
        **field_set.expectations(source),
    }  # fmt: skip
    sandbox = await MultiGet(
        Get(Digest, AddPrefix(source.tree, "src")),
        Get(Digest, RemovePrefix(workload.snapshot.digest, field_set.address.spec_path or ".")),
        Get(Digest, CreateDigest([FileContent(EXPECTED, json.dumps(expected, sort_keys=True).encode())])),
        Get(Digest, script_files(kind.script, kind.judge, *DRIVER)),
    )
    return Process(
        argv=(tools.bash.path, f"{SCRIPTS_DIR}/{kind.script}", *([CONCURRENCY] if kind.processes > 1 else [])),
        concurrency_available=kind.processes if kind.processes > 1 else 0,
        env=workload_env(field_set, python, targets, isolation),
        input_digest=await Get(Digest, MergeDigests(sandbox)),
        output_files=(kind.report,),
        immutable_input_digests=installed.immutable_inputs(),
        append_only_caches={python.cache_name: PYTHON_LINK},
        description=f"{kind.doing} of {owner} for {', '.join(targets)}",
        level=LogLevel.INFO,
        timeout_seconds=request.timeout_seconds,
        # As Pants' own test runners: a failure is never cached, and --force runs it again.
        cache_scope=ProcessCacheScope.PER_SESSION if request.force else ProcessCacheScope.SUCCESSFUL,
    )


def workload_env(
    field_set: WorkloadTestFieldSet, python: BuildPython, targets: Tuple[str, ...], isolation: NetworkIsolation
) -> Dict[str, str]:
    """The variables kernel_venv.sh and the kinds' scripts read: the target's `env`, the venv's
    Python, the gpu targets and the workload."""
    return {
        **dict(field_set.env.value or {}),
        "PATH": "/usr/bin:/bin",
        "ROCM_KERNEL_PYTHON": python.in_sandbox,
        "ROCM_KERNEL_PYTHON_VERSION": python.identity,  # the interpreter's identity is in the key
        "ROCM_KERNEL_TARGETS": " ".join(targets),
        "ROCM_KERNEL_WORKLOAD": field_set.workload.file_path.rsplit("/", 1)[-1],
        "ROCM_KERNEL_NETWORK": "none" if isolation.enabled else "host",
    }


@dataclass(frozen=True)
class WorkloadTestRun:
    """A workload test's process result and its report. Not a TestResult: the engine logs a
    TestResult (an EngineAwareReturnType) as each rule returning it completes, so only each
    kind's test rule makes one, and the outcome is shown once."""

    result: FallibleProcessResult
    report: Snapshot

    def test_result(self, field_set: WorkloadTestFieldSet, test: TestSubsystem) -> TestResult:
        return TestResult.from_fallible_process_result(
            self.result, field_set.address, test.output, extra_output=self.report, log_extra_output=True
        )


# A rule, not a helper: each kind's test rule asks for it (`pants migrate-call-by-name` rewrites
# the engine calls of rules only).
@rule(desc="Running a workload test", level=LogLevel.DEBUG)
async def run_workload_test(request: WorkloadTest) -> WorkloadTestRun:
    process = await Get(Process, WorkloadTest, request)
    result = await Get(FallibleProcessResult, Process, process)
    return WorkloadTestRun(result, await Get(Snapshot, Digest, result.output_digest))


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        *source_files.rules(),
        *interpreters.rules(),
        *declared.rules(),
        *host_tools.rules(),
        *isolation.rules(),
        *venv.rules(),
        *installed.rules(),
        *source.rules(),
    ])
