"""Wires the rocm_build target types and rules into Pants."""

from rocm_build import patching, plan, sources, toolchain, tools, upstream, wheel
from rocm_build.target_types import target_types as _target_types


def target_types():
    return _target_types()


def rules():
    return [
        *tools.rules(),
        *sources.rules(),
        *patching.rules(),
        *upstream.rules(),
        *toolchain.rules(),
        *wheel.rules(),
        *plan.rules(),
    ]
