"""triton_kernel_test: an upstream's Triton kernels compiled for each gpu target, before install.

The kernels a gfx1151 user runs are compiled at their first launch on the box; one that does
not compile for RDNA 3.5, or needs more LDS than a workgroup has, fails there. PyPI's triton
compiles them for any AMD target in process, without a GPU (../shared/notes/triton-offline.md):
the test runs a workload of ours that calls the upstream's own entry points under a
compile-only driver (scripts/triton_kernels.py), and reports every kernel specialization.
"""

from __future__ import annotations

from pants.core.goals.test import TestTimeoutField
from pants.engine.target import (
    COMMON_TARGET_FIELDS,
    BoolField,
    Dependencies,
    DictStringToStringField,
    SingleSourceField,
    StringField,
    StringSequenceField,
    Target,
)
from pants.util.strutil import help_text


class KernelSourceField(StringField):
    alias = "source"
    help = help_text(
        """
        Where the kernels' Python code comes from: an `upstream_archive` or `upstream_repo` (its
        tree, with its `patches` applied, goes on PYTHONPATH at its root, so a package at the
        root of the upstream imports; nothing is built: an sdist's Triton kernels are plain
        Python), or a `rocm_wheel` or `prebuilt_wheel` (installed into the test's venv). None:
        the workload holds its kernels itself.
        """
    )


class KernelWorkloadField(SingleSourceField):
    alias = "workload"
    required = True
    expected_file_extensions = (".py",)
    help = help_text(
        """
        A Python file beside the BUILD file that calls the upstream's own entry points with
        representative shapes and dtypes: it defines `cases()`, returning (name, callable)
        pairs. Each case is called once per gpu target; every Triton kernel it launches is
        compiled for that target and nothing runs.
        """
    )


class KernelGpuTargetsField(StringSequenceField):
    alias = "gpu_targets"
    default = ("gfx1151",)
    help = help_text(
        """
        The AMD GPUs to compile every kernel for. Triton's own resource checks apply with each
        target's real limits (LDS a workgroup, threads, wave size: the table in
        rules/rocm_build/scripts/triton_kernels.py, each number with its source).
        """
    )


class KernelDependenciesField(Dependencies):
    help = help_text(
        """
        The wheels the test's venv gets: `prebuilt_wheel` and `rocm_wheel` targets, the
        chain's triton and torch among them (the venv has nothing else: no index, no network).
        """
    )


class KernelExpectedFailuresField(DictStringToStringField):
    alias = "expected_failures"
    help = help_text(
        """
        Failures that are known, each with why and its upstream link:
        `{"<case>@<gpu target>": "why (upstream issue URL)"}`. The test passes on exactly this
        list: a failure not listed fails it, and so does a listed one that no longer happens
        (drop it, the upstream fixed it).
        """
    )


class KernelFailOnSpillsField(BoolField):
    alias = "fail_on_spills"
    default = False
    help = help_text(
        """
        Fail when a kernel spills registers to scratch memory on a gpu target. Spills are
        always reported (VGPRs, spills, scratch bytes a lane); by default they do not fail:
        a spilling kernel runs, slower.
        """
    )


class KernelPythonField(StringField):
    alias = "python"
    default = "3.11"
    help = "The Python of the test's venv (major.minor), found as builds find theirs."


class KernelEnvField(DictStringToStringField):
    alias = "env"
    help = help_text(
        """
        Environment variables the upstream reads when its kernels are chosen, e.g.
        flash-attention's `{"FLASH_ATTENTION_TRITON_AMD_ENABLE": "TRUE"}`.
        """
    )


class TritonKernelTestTarget(Target):
    alias = "triton_kernel_test"
    core_fields = (
        *COMMON_TARGET_FIELDS,
        KernelSourceField,
        KernelWorkloadField,
        KernelGpuTargetsField,
        KernelDependenciesField,
        KernelExpectedFailuresField,
        KernelFailOnSpillsField,
        KernelPythonField,
        KernelEnvField,
        TestTimeoutField,
    )
    help = help_text(
        f"""
        Compiles an upstream's Triton kernels for each of `{KernelGpuTargetsField.alias}`, hermetically,
        offline and without a GPU: `pants test` builds a venv of the `dependencies` wheels, puts
        the `{KernelSourceField.alias}` on it, and runs the `{KernelWorkloadField.alias}` under a compile-only
        driver. Every kernel launch compiles for each target and nothing launches. Each kernel and
        specialization is reported with its arch (read from the code object's ELF header), VGPRs,
        spills, scratch and LDS, also as JSON (dist/test/...). A compile error or a resource
        overflow fails the test, naming kernel, specialization, target, required and limit, unless
        `{KernelExpectedFailuresField.alias}` lists it. Cached: it runs again only when a wheel, the
        workload or the target changes.

        Example (components/flash_attention/BUILD):

            triton_kernel_test(
                name="kernels",
                source=":sdist",
                workload="kernels_workload.py",
                gpu_targets=["gfx1151"],
                dependencies=["components/kernels:venv"],  # triton, a CPU torch and what they import
                env={{"FLASH_ATTENTION_TRITON_AMD_ENABLE": "TRUE"}},
            )
        """
    )
