"""Wires the rocm_build target types and rules into Pants, layer by layer as docs/layout.md draws
them: each heading's modules import only those above it.

Each module's `rules()` is complete on its own, as in Pants' backends: its rules, the `rules()`
of the modules whose rules its rules ask for, and its union members; so a test builds a
RuleRunner from one module's `rules()` (rules_test.py proves each does). This list names every
module anyway, so that the plugin's shape reads here; Pants drops the repeats. The lists nest
(a goal's holds the build's, which holds the toolchain's...), so a module's `rules()` that holds
others is memoized and holds each rule once: unmemoized, this list was 125,000 entries for 270
rules, rebuilt at every start."""

from rocm_build import declared
from rocm_build.audits import gpu_audit, portable
from rocm_build.build import build, build_output
from rocm_build.caches import ccache, sccache_dist
from rocm_build.checks import chain, preflight
from rocm_build.goals import (
    check,
    lock_build_requirements,
    lock_runtime_requirements,
    lockfiles,
    package,
    patch_header_lint,
    patch_workspace,
    plan,
    verify_reproducible,
)
from rocm_build.graph import edges
from rocm_build.install import load_check, runtime_lock, runtime_set
from rocm_build.locks import build_requirements
from rocm_build.pants_environments import DockerEnvironmentTarget
from rocm_build.prebuilt import target_generator as prebuilt_wheels
from rocm_build.prebuilt import wheel_rules as prebuilt_wheel
from rocm_build.prepare import inputs as build_inputs
from rocm_build.provenance import signing as provenance_signing
from rocm_build.rust import cargo, cargo_crates
from rocm_build.subsystems import bootstrap_wheels, host_tools, sccache
from rocm_build.target_types import target_types as _target_types
from rocm_build.toolchain import container, interpreters, isolation, rocm_sdk
from rocm_build.toolchain import rust as rust_toolchain
from rocm_build.toolchain.target_types import ImageContainerfileField, ImageRecipeField
from rocm_build.upstream import (
    archive_source,
    archives,
    download,
    fetch,
    mirror_table,
    patching,
    source_tree,
    sources,
    tree_scan_rules,
    upstream_repo,
)
from rocm_build.wheel import build_lock, build_process, build_spec, chain_order, patch_files, source_kind
from rocm_build.workloads import register as workloads


def target_types():
    return _target_types()


def rules():
    return [
        # Subsystems, and what every layer reads: a BUILD file's declared dependencies
        *host_tools.rules(),
        *bootstrap_wheels.rules(),
        *sccache.rules(),
        *declared.rules(),
        # Toolchains: the ROCm SDK, Rust, the Python, the image, the sandbox's network
        *rocm_sdk.rules(),
        *rust_toolchain.rules(),
        *interpreters.rules(),
        *container.rules(),
        DockerEnvironmentTarget.register_plugin_field(ImageRecipeField),
        DockerEnvironmentTarget.register_plugin_field(ImageContainerfileField),
        *isolation.rules(),
        # Upstream sources (upstream/, pins/, prebuilt/): pins, fetch, patches, archives, prebuilt wheels, the tree scan,
        # the kinds of `source` (sources.py)
        *mirror_table.rules(),
        *download.rules(),
        *fetch.rules(),
        *source_tree.rules(),
        *patching.rules(),
        *upstream_repo.rules(),
        *archive_source.rules(),
        *archives.rules(),
        *prebuilt_wheel.rules(),
        *prebuilt_wheels.rules(),
        *tree_scan_rules.rules(),
        *sources.rules(),
        # Locks of build requirements (locks/) and compiler caches (caches/)
        *build_requirements.rules(),
        *ccache.rules(),
        *sccache_dist.rules(),
        # A rocm_wheel (wheel/): its spec, its chain, its lock, its build process
        *build_spec.rules(),
        *source_kind.rules(),
        *chain_order.rules(),
        *build_lock.rules(),
        *build_process.rules(),
        *patch_files.rules(),
        # What a build runs beside: Rust crates (rust/), audits of built wheels (audits/)
        *cargo.rules(),
        *cargo_crates.rules(),
        *portable.rules(),
        *gpu_audit.rules(),
        # Install sets (install/)
        *runtime_lock.rules(),
        *runtime_set.rules(),
        *load_check.rules(),
        # A build's inputs resolved into its Process (prepare/): the build's, and the preflight's,
        # which runs an upstream's own steps in a build's set-up
        *build_inputs.rules(),
        # The checks before any build (checks/): `package` runs them first, `pants check` reports them
        *preflight.rules(),
        *chain.rules(),
        # The build itself (build/), gated by its chain's checks, and the wheel it writes read back
        *build.rules(),
        *build_output.rules(),
        # What a built wheel's folder in dist/ carries beside it: its in-toto provenance (provenance/)
        *provenance_signing.rules(),
        # Workload tests (workloads/): Triton kernels compiled for each gpu target
        # (triton_kernel_test), upstreams' run-time choices on each (upstream_choices_test)
        *workloads.rules(),
        # The graph Pants sees: every input of a build an inferred dependency
        *edges.rules(),
        # Goals
        *package.rules(),
        *plan.rules(),
        *check.rules(),
        *lockfiles.rules(),
        *lock_build_requirements.rules(),
        *lock_runtime_requirements.rules(),
        *verify_reproducible.rules(),
        # `pants lint` of patch_set targets: every patch's Why:/Upstream:/Drop when: header
        *patch_header_lint.rules(),
        # `pants patch-workspace <upstream>`: its patched tree as a git repository, commits saved as patches
        *patch_workspace.rules(),
    ]
