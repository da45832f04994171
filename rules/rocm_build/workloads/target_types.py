"""The workload tests: `triton_kernel_test` and `upstream_choices_test`, and their fields.

Both run a workload of ours, a Python file that calls an upstream's own code, under the
compile-only driver (scripts/triton_kernels.py), in a venv of exactly their wheels, offline and
without a GPU, once per gpu target. A kernel test compiles every Triton kernel the workload
launches and reports them (../shared/notes/triton-offline.md): one that does not compile for RDNA
3.5, or needs more LDS than a workgroup has, would otherwise fail at its first launch on the
box. A choices test records what the upstream decides once it sees the arch (an attention
backend, a tuned config or the default, a config family): a wheel can be complete and correct
and still run several times slower because of one such decision.

The fields both read are defined once here; each kind adds what it is judged against.
"""

from __future__ import annotations

from typing import Optional

from pants.core.goals.test import TestTimeoutField
from pants.engine.target import (
    COMMON_TARGET_FIELDS,
    AsyncFieldMixin,
    BoolField,
    Dependencies,
    DictStringToStringField,
    MultipleSourcesField,
    SingleSourceField,
    StringField,
    StringSequenceField,
    Target,
)
from pants.util.strutil import help_text

# ----------------------------------------------------------------------------- both kinds


class WorkloadSourceField(AsyncFieldMixin, StringField):
    # AsyncFieldMixin: the field knows its target's address, so source.py resolves it alone.
    alias = "source"
    help = help_text(
        """
        Where the upstream's Python comes from: an `upstream_archive` or `upstream_repo` (its
        tree, with its `patches` applied, goes on PYTHONPATH at its root, so a package at the
        root of the upstream imports; nothing is built: an sdist's Triton kernels are plain
        Python), or a `rocm_wheel` or `prebuilt_wheel` (installed into the test's venv). None:
        the workload holds its kernels itself.
        """
    )
    # Why a kind refuses a wheel as its source, or None where a wheel goes into the venv.
    wheel_refused: Optional[str] = None


class WorkloadField(SingleSourceField):
    alias = "workload"
    required = True
    expected_file_extensions = (".py",)
    help = help_text(
        """
        A Python file beside the BUILD file that calls the upstream's own code with
        representative inputs: it defines `cases()`, returning (name, callable) pairs, called
        once per gpu target with the platform resolving as that target. In a
        `triton_kernel_test` every Triton kernel a case launches is compiled for the target and
        nothing runs; in an `upstream_choices_test` each callable returns the choice as a short
        string (or `{"choice": str, "detail": ...}`).
        """
    )


class WorkloadGpuTargetsField(StringSequenceField):
    alias = "gpu_targets"
    default = ("gfx1151",)
    help = help_text(
        """
        The AMD GPUs the workload runs for. Triton's own resource checks apply with each
        target's real limits (LDS a workgroup, threads, wave size: the table in
        rules/rocm_build/scripts/triton_kernels.py, each number with its source).
        """
    )


class WorkloadDependenciesField(Dependencies):
    help = help_text(
        """
        The wheels the test's venv gets: `prebuilt_wheel` and `rocm_wheel` targets (or a
        `target` or `prebuilt_wheels` grouping them), the chain's triton and torch among them
        (the venv has nothing else: no index, no network).
        """
    )


class WorkloadPythonField(StringField):
    alias = "python"
    default = "3.11"
    help = "The Python of the test's venv (major.minor), found as builds find theirs."


class WorkloadEnvField(DictStringToStringField):
    alias = "env"
    help = help_text(
        """
        Environment variables the upstream reads when its kernels are chosen, e.g.
        flash-attention's `{"FLASH_ATTENTION_TRITON_AMD_ENABLE": "TRUE"}`.
        """
    )


# The fields of both kinds; each adds its `source` (a choices test requires one) and its own.
WORKLOAD_FIELDS = (
    *COMMON_TARGET_FIELDS,
    WorkloadField,
    WorkloadGpuTargetsField,
    WorkloadDependenciesField,
    WorkloadPythonField,
    WorkloadEnvField,
    TestTimeoutField,
)

# ----------------------------------------------------------------------------- triton_kernel_test


class ExpectedFailuresField(DictStringToStringField):
    alias = "expected_failures"
    help = help_text(
        """
        Failures that are known, each with why and its upstream link:
        `{"<case>@<gpu target>": "why (upstream issue URL)"}`. The test passes on exactly this
        list: a failure not listed fails it, and so does a listed one that no longer happens
        (drop it, the upstream fixed it).
        """
    )


class FailOnSpillsField(BoolField):
    alias = "fail_on_spills"
    default = False
    help = help_text(
        """
        Fail when a kernel spills registers to scratch memory on a gpu target. Spills are
        always reported (VGPRs, spills, scratch bytes a lane); by default they do not fail:
        a spilling kernel runs, slower.
        """
    )


class TritonKernelTestTarget(Target):
    alias = "triton_kernel_test"
    core_fields = (*WORKLOAD_FIELDS, WorkloadSourceField, ExpectedFailuresField, FailOnSpillsField)
    help = help_text(
        f"""
        Compiles an upstream's Triton kernels for each of `{WorkloadGpuTargetsField.alias}`, hermetically,
        offline and without a GPU: `pants test` builds a venv of the `dependencies` wheels, puts
        the `{WorkloadSourceField.alias}` on it, and runs the `{WorkloadField.alias}` under a compile-only
        driver. Every kernel launch compiles for each target and nothing launches. Each kernel and
        specialization is reported with its arch (read from the code object's ELF header), VGPRs,
        spills, scratch and LDS, also as JSON (dist/test/...). A compile error or a resource
        overflow fails the test, naming kernel, specialization, target, required and limit, unless
        `{ExpectedFailuresField.alias}` lists it. Cached: it runs again only when a wheel, the
        workload or the target changes (or with `--force`). The cases run in as many processes
        as Pants gives the test cores (up to 4), so they must not rest on each other's state;
        the report is the one a single process writes.

        Example (tests/kernels/BUILD; components/flash_attention/BUILD and components/vllm/BUILD
        compile those upstreams' kernels from their `{WorkloadSourceField.alias}`):

            triton_kernel_test(
                name="lds",
                workload="lds_workload.py",
                gpu_targets=["gfx1151", "gfx950"],
                dependencies=["components/kernels:venv"],  # triton, a CPU torch and what they import
                expected_failures={{"needs_128k@gfx1151": "128 KiB of LDS; RDNA 3.5 has 64 KiB a workgroup"}},
            )
        """
    )


# ----------------------------------------------------------------------------- upstream_choices_test


class ChoicesSourceField(WorkloadSourceField):
    required = True
    help = help_text(
        """
        Where the upstream's Python comes from: an `upstream_archive` (an sdist) or an
        `upstream_repo`. Its tree goes on PYTHONPATH; nothing is built: the decisions read here
        are plain Python.
        """
    )
    wheel_refused = "the choices are read from the upstream's Python, not a built wheel"


class WorkloadModulesField(MultipleSourcesField):
    alias = "workload_modules"
    expected_file_extensions = (".py",)
    help = help_text(
        """
        Other Python files beside the BUILD file that the workload imports (e.g. the
        triton_kernel_test's workload, for its GPU test doubles). They sit next to it in the
        sandbox. Each is another target's source (that test's `workload`), and the test depends
        on that target: an edit of the module selects this test too (`--changed-dependents`).
        """
    )


class ExpectedChoicesField(DictStringToStringField):
    alias = "expected_choices"
    required = True
    help = help_text(
        """
        The choice each case makes on each gpu target: `{"<case>@<gpu target>": "<choice>"}`.
        Keys may be patterns (`"attention_*@gfx1151"`): the exact key, else the longest matching
        pattern, states a case. The test fails, naming the case, the expected and the new choice,
        when a pin move or a patch changes one; also when a case matches no key, or a key no
        case.
        """
    )


class UpstreamChoicesTestTarget(Target):
    alias = "upstream_choices_test"
    # `workload` comes before `workload_modules`: Pants reads a target's first sources field as
    # its sources (`filedeps`, owners), and that is the workload.
    core_fields = (*WORKLOAD_FIELDS, ChoicesSourceField, WorkloadModulesField, ExpectedChoicesField)
    help = help_text(
        f"""
        Records what an upstream's own code decides at run time on each of `{WorkloadGpuTargetsField.alias}` (an
        attention backend, a tuned config file or the default, a config family) and fails when a
        decision differs from `{ExpectedChoicesField.alias}`: `pants test` builds the venv of the
        `dependencies` wheels, puts the `{ChoicesSourceField.alias}` tree on it (with the source's own `patches`), and runs the
        `{WorkloadField.alias}` with the platform resolving as each gpu target, without a
        GPU, offline (the compile-only driver of `triton_kernel_test`). The report is JSON in
        dist/test/.... Cached: it runs again only when a wheel, the patched tree, the workload or
        the expectations change.

        Example (components/vllm/BUILD):

            upstream_choices_test(
                name="choices",
                source=":sdist",
                workload="choices_workload.py",
                workload_modules=["kernels_workload.py"],
                gpu_targets=["gfx1151", "gfx942"],
                dependencies=["components/kernels:venv", "components/kernels:vllm-venv"],
                expected_choices={{"attention_*@gfx1151": "TRITON_ATTN", ...}},
            )
        """
    )
