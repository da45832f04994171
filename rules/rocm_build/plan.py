"""`pants rocm-plan <rocm_wheel>`: what a build would do, without doing it.

For each wheel of the chain in build order: the pinned commit, the patches (with their
sha256), the toolchain, the exact environment and the commands. Nothing is fetched or
built and no toolchain is needed, so it works on any machine.
"""

from __future__ import annotations

import hashlib
import shlex
from typing import List

from pants.engine.addresses import Addresses, UnparsedAddressInputs
from pants.engine.console import Console
from pants.engine.fs import Digest, DigestContents
from pants.engine.goal import Goal, GoalSubsystem
from pants.engine.rules import Get, MultiGet, collect_rules, goal_rule
from pants.engine.target import (
    HydratedSources,
    HydrateSourcesRequest,
    Targets,
    WrappedTarget,
    WrappedTargetRequest,
)

from rocm_build.errors import RocmBuildError
from rocm_build.pins import PinsError, lookup_pin
from rocm_build.rocm_env import build_env, check_gpu_targets
from rocm_build.target_types import (
    GpuTargetsField,
    PatchSetsField,
    PatchSourcesField,
    PinField,
    PinsFileField,
    RocmWheelTarget,
    WheelBuildCommandField,
    WheelBuildRequirementsField,
    WheelCommandField,
    WheelEnvField,
    WheelKindField,
    WheelOptionalField,
    WheelSourceField,
    WheelToolchainField,
)
from rocm_build.upstream import load_pins
from rocm_build.wheel import _single, wheel_chain

SANDBOX_ENV = {
    "ROCM_PATH": "<sandbox>/.rocm/root (link to the toolchain root)",
    "ROCM_HOME": "$ROCM_PATH",
    "HIP_DEVICE_LIB_PATH": "<toolchain device bitcode dir>",
    "HIPFLAGS": "--rocm-device-lib-path=$HIP_DEVICE_LIB_PATH",
    "MAX_JOBS": "min(cores, GiB of memory / 4) unless the target sets max_jobs",
    "PATH": "<build venv>/bin:$ROCM_PATH/bin:/usr/bin:/bin",
}


class RocmPlanSubsystem(GoalSubsystem):
    name = "rocm-plan"
    help = "Print what building rocm_wheel targets would do: pins, patches, environment, commands."


class RocmPlan(Goal):
    subsystem_cls = RocmPlanSubsystem
    environment_behavior = Goal.EnvironmentBehavior.LOCAL_ONLY


async def _describe(step: int, wheel: RocmWheelTarget) -> List[str]:
    owner = wheel.address.spec
    gpu_targets = tuple(sorted(wheel[GpuTargetsField].value or ()))
    try:
        check_gpu_targets(gpu_targets, owner)
        env = build_env(wheel[WheelKindField].value, gpu_targets, dict(wheel[WheelEnvField].value or {}), owner)
    except ValueError as e:
        raise RocmBuildError(str(e)) from None
    # Gets written out here: Pants finds a helper's Gets only one call deep.
    source_address, toolchain_address = await MultiGet(
        Get(Addresses, UnparsedAddressInputs, _single(wheel, WheelSourceField)),
        Get(Addresses, UnparsedAddressInputs, _single(wheel, WheelToolchainField)),
    )
    source = (await Get(WrappedTarget, WrappedTargetRequest(source_address[0], owner))).target
    pins_file = source[PinsFileField].value
    loaded = await load_pins(pins_file, source.address.spec)
    try:
        pin = lookup_pin(dict(loaded.pins), source[PinField].value, pins_file, source.address.spec)
    except PinsError as e:
        raise RocmBuildError(str(e)) from None
    patch_set_addresses = await Get(
        Addresses,
        UnparsedAddressInputs(source[PatchSetsField].value or (), owning_address=source.address,
                              description_of_origin=f"the `patches` field of {source.address.spec}"),
    )  # fmt: skip
    patch_sets = await Get(Targets, Addresses, patch_set_addresses)
    hydrated = await MultiGet(
        Get(HydratedSources, HydrateSourcesRequest(t[PatchSourcesField])) for t in patch_sets
    )
    patch_lines = []
    for sources in hydrated:
        contents = await Get(DigestContents, Digest, sources.snapshot.digest)
        by_path = {fc.path: fc.content for fc in contents}
        for path in sorted(by_path, key=lambda p: p.rsplit("/", 1)[-1]):
            patch_lines.append(f"    {path}  sha256:{hashlib.sha256(by_path[path]).hexdigest()[:16]}")
    toolchain = toolchain_address[0]
    reqs = wheel[WheelBuildRequirementsField].value or ()
    out = [
        f"[{step}] {owner}{'  (optional)' if wheel[WheelOptionalField].value else ''}",
        f"  source    {pin.url} @ {pin.commit}{' (with submodules)' if pin.submodules else ''}",
        "  patches   none" if not patch_lines else "  patches",
        *patch_lines,
        f"  toolchain {toolchain.spec}",
        "  env",
        *(f"    {k}={v}" for k, v in sorted(env.items())),
        *(f"    {k}={v}" for k, v in SANDBOX_ENV.items()),
        "  commands (in the patched tree)",
        *([f"    python -m pip install {' '.join(shlex.quote(r) for r in reqs)}"] if reqs else []),
        *(f"    {c}" for c in wheel[WheelBuildCommandField].value or ()),
        f"    {wheel[WheelCommandField].value}",
        "",
    ]
    return out


@goal_rule
async def rocm_plan(console: Console, addresses: Addresses) -> RocmPlan:
    seen = set()
    lines: List[str] = []
    for root in addresses:
        wrapped = await Get(WrappedTarget, WrappedTargetRequest(root, "rocm-plan"))
        if not isinstance(wrapped.target, RocmWheelTarget):
            continue
        for step, wheel in enumerate(await wheel_chain(root), 1):
            if wheel.address in seen:
                continue
            seen.add(wheel.address)
            lines += await _describe(step, wheel)
    if not lines:
        raise RocmBuildError("rocm-plan: give it rocm_wheel targets, e.g. `pants rocm-plan components/vllm:wheel`")
    console.print_stdout("\n".join(lines))
    return RocmPlan(exit_code=0)


def rules():
    return collect_rules()
