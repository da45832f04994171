"""upstream_choices_test: what an upstream's own code decides at run time on each gpu target.

A wheel can be complete and correct and still run several times slower than it should, because
of what the upstream decides once it sees a gfx1151: vLLM ranked ROCM_ATTN first on every ROCm
GPU (its prefill kernel spills on gfx1151), its fused-MoE configs are looked up by device name,
flash-attention picks its configs by an arch list. Those decisions are Python reading the arch:
the test runs them under the compile-only driver of the triton_kernel_test (the platform resolves
as ROCm on the named gfx), in the same venv, and compares each with `expected_choices`.
"""

from __future__ import annotations

from pants.core.goals.test import TestTimeoutField
from pants.engine.target import (
    COMMON_TARGET_FIELDS,
    DictStringToStringField,
    MultipleSourcesField,
    SingleSourceField,
    Target,
)
from pants.util.strutil import help_text

from rocm_build.kernels.target_types import (
    KernelDependenciesField,
    KernelEnvField,
    KernelGpuTargetsField,
    KernelPythonField,
    KernelSourceField,
)


class ChoicesSourceField(KernelSourceField):
    # A subclass: what infers the `source` edge of a triton_kernel_test infers this one too.
    required = True
    help = help_text(
        """
        Where the upstream's Python comes from: an `upstream_archive` (an sdist) or an
        `upstream_repo`. Its tree goes on PYTHONPATH; nothing is built: the decisions read here
        are plain Python.
        """
    )


class ChoicesWorkloadField(SingleSourceField):
    alias = "workload"
    required = True
    expected_file_extensions = (".py",)
    help = help_text(
        """
        A Python file beside the BUILD file that calls the upstream's own selection code: it
        defines `cases()`, returning (name, callable) pairs; each callable returns the choice as
        a short string (or `{"choice": str, "detail": ...}`). `cases()` is called once per gpu
        target, with the platform resolving as that target.
        """
    )


class ChoicesWorkloadModulesField(MultipleSourcesField):
    alias = "workload_modules"
    expected_file_extensions = (".py",)
    help = help_text(
        """
        Other Python files beside the BUILD file that the workload imports (e.g. the
        triton_kernel_test's workload, for its GPU test doubles). They sit next to it in the
        sandbox.
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
    core_fields = (
        *COMMON_TARGET_FIELDS,
        ChoicesSourceField,
        ChoicesWorkloadField,
        ChoicesWorkloadModulesField,
        KernelGpuTargetsField,
        KernelDependenciesField,
        ExpectedChoicesField,
        KernelPythonField,
        KernelEnvField,
        TestTimeoutField,
    )
    help = help_text(
        f"""
        Records what an upstream's own code decides at run time on each of `gpu_targets` (an
        attention backend, a tuned config file or the default, a config family) and fails when a
        decision differs from `{ExpectedChoicesField.alias}`: `pants test` builds the venv of the
        `dependencies` wheels, puts the `source` tree on it (with the source's own `patches`), and runs the
        `{ChoicesWorkloadField.alias}` with the platform resolving as each gpu target, without a
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
