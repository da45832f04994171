"""Wires the rocm_build target types and rules into Pants, in the order data flows:
options, then upstream sources, toolchains, the wheel build, install sets, and the goals."""

from rocm_build.pants_environments import DockerEnvironmentTarget

from rocm_build.graph import declared, edges
from rocm_build.goals import (
    check,
    lock_build_requirements,
    lock_runtime_requirements,
    lockfiles,
    package,
    plan,
    preflight_report,
    verify_reproducible,
)
from rocm_build.install import load_check, runtime_lock, runtime_set
from rocm_build.subsystems import bootstrap_wheels, host_tools, sccache
from rocm_build.target_types import target_types as _target_types
from rocm_build.toolchain.target_types import ImageContainerfileField, ImageRecipeField
from rocm_build.toolchain import container, interpreters, isolation, rocm_sdk, rust
from rocm_build.upstream import archive_source, archives, download, fetch, mirrors, patching, prebuilt, prebuilt_wheels, source_tree, upstream_repo
from rocm_build.workloads import register as workloads
from rocm_build.wheel import (
    build,
    build_lock,
    build_output,
    build_process,
    build_requirements,
    build_spec,
    cargo,
    cargo_crates,
    ccache,
    chain,
    chain_order,
    gpu_audit,
    patch_files,
    portable,
    preflight,
    sccache_dist,
)


def target_types():
    return _target_types()


def rules():
    return [
        # Subsystems
        *host_tools.rules(),
        *bootstrap_wheels.rules(),
        *sccache.rules(),
        # The graph Pants sees: every input of a build an inferred dependency
        *edges.rules(),
        *declared.rules(),
        # Upstream sources: pins, fetch, patches, archives, prebuilt wheels
        *mirrors.rules(),
        *download.rules(),
        *fetch.rules(),
        *source_tree.rules(),
        *patching.rules(),
        *upstream_repo.rules(),
        *archive_source.rules(),
        *archives.rules(),
        *prebuilt.rules(),
        *prebuilt_wheels.rules(),
        # Toolchains: the ROCm SDK, Rust, the Python, the image, the sandbox's network
        *rocm_sdk.rules(),
        *rust.rules(),
        *interpreters.rules(),
        *container.rules(),
        DockerEnvironmentTarget.register_plugin_field(ImageRecipeField),
        DockerEnvironmentTarget.register_plugin_field(ImageContainerfileField),
        *isolation.rules(),
        # The wheel build: requirements, compiler cache, spec and process, checks, build, audits
        *build_requirements.rules(),
        *build_lock.rules(),
        *ccache.rules(),
        *sccache_dist.rules(),
        *build_spec.rules(),
        *build_process.rules(),
        *cargo.rules(),
        *cargo_crates.rules(),
        *preflight.rules(),
        *chain_order.rules(),
        *chain.rules(),
        *build.rules(),
        *build_output.rules(),
        *gpu_audit.rules(),
        *patch_files.rules(),
        *portable.rules(),
        # Install sets
        *runtime_lock.rules(),
        *runtime_set.rules(),
        *load_check.rules(),
        # Workload tests on each gpu target (`pants test`): Triton kernels compiled
        # (triton_kernel_test), upstreams' run-time choices (upstream_choices_test)
        *workloads.rules(),
        # Goals
        *package.rules(),
        *preflight_report.rules(),
        *plan.rules(),
        *check.rules(),
        *lockfiles.rules(),
        *lock_build_requirements.rules(),
        *lock_runtime_requirements.rules(),
        *verify_reproducible.rules(),
    ]
