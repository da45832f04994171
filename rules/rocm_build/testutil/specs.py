"""A WheelBuildSpec made in a test, for rules whose logic reads only the spec (the preflight's
checks under run_rule_with_mocks): no BUILD file or target graph behind it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pants.engine.addresses import Address
from pants.engine.fs import EMPTY_DIGEST
from pants.util.frozendict import FrozenDict

from rocm_build.pins.tables import Pin
from rocm_build.upstream.upstream_repo import UpstreamSpec
from rocm_build.wheel.build_spec import WheelBuildSpec

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def upstream_spec(pin_name: str = "mini-torch", **pin: Any) -> UpstreamSpec:
    fields = {"url": f"https://example.invalid/{pin_name}.git", "track": "main", "commit": COMMIT, **pin}
    return UpstreamSpec(Address("tests/mini/torch", target_name="src"), pin_name, Pin(**fields), "components/pins/mini.toml", (), EMPTY_DIGEST)


def wheel_spec(**overrides: Any) -> WheelBuildSpec:
    """tests/mini/torch:wheel as its spec, with `overrides`."""
    spec = WheelBuildSpec(
        address=Address("tests/mini/torch", target_name="wheel"),
        upstream=upstream_spec(),
        toolchain=Address("tests/mini", target_name="llvm"),
        dependencies=(),
        prebuilt=(),
        archives=(),
        python="CPython==3.11.*",
        gpu_targets=("gfx1151",),
        supported_gpu_targets=(),
        supported_gpu_targets_source="",
        allow_missing_gpu_targets=(),
        env=FrozenDict(),
        requirements=(),
        lock_path=None,
        steps=(),
        wheel_command="pip wheel --no-deps --no-build-isolation -w dist .",
        max_jobs=None,
        timeout=3600,
        optional=False,
        # What version_env.pin_version gives a pin on a branch without a `version`.
        version=f"0.0.0+g{COMMIT[:12]}",
    )
    return replace(spec, **overrides)
