"""Wires the rocm_build target types and rules into Pants."""

from pants.core.util_rules.environments import DockerEnvironmentTarget

from rocm_build import (
    archives,
    build_request,
    build_requirements,
    ccache_remote,
    chain,
    container,
    gpu_audit,
    interpreters,
    isolation,
    lock_goal,
    mirrors,
    patching,
    plan,
    portable,
    prebuilt,
    preflight,
    runtime_lock,
    runtime_set,
    source_tree,
    sources,
    toolchain,
    tools,
    upstream,
    verify,
    wheel,
)
from rocm_build.target_types import ImageRecipeField
from rocm_build.target_types import target_types as _target_types


def target_types():
    return _target_types()


def rules():
    return [
        *tools.rules(),
        *container.rules(),
        DockerEnvironmentTarget.register_plugin_field(ImageRecipeField),
        *interpreters.rules(),
        *mirrors.rules(),
        *sources.rules(),
        *source_tree.rules(),
        *patching.rules(),
        *upstream.rules(),
        *toolchain.rules(),
        *archives.rules(),
        *build_requirements.rules(),
        *isolation.rules(),
        *ccache_remote.rules(),
        *build_request.rules(),
        *preflight.rules(),
        *chain.rules(),
        *gpu_audit.rules(),
        *wheel.rules(),
        *portable.rules(),
        *prebuilt.rules(),
        *plan.rules(),
        *lock_goal.rules(),
        *verify.rules(),
        *runtime_lock.rules(),
        *runtime_set.rules(),
    ]
