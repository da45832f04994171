"""`pants rocm-plan <rocm_wheel>`: what a build would do, without doing it.

For each wheel of the chain in build order: the pinned commit, the patches (with their
sha256), the toolchain, the exact environment and the commands. Nothing is fetched or
built and no toolchain is needed, so it works on any machine.
"""

from __future__ import annotations

import shlex
from typing import List

from pants.engine.addresses import Addresses, UnparsedAddressInputs
from pants.engine.console import Console
from pants.engine.goal import Goal, GoalSubsystem
from pants.engine.rules import Get, MultiGet, collect_rules, goal_rule
from pants.engine.target import WrappedTarget, WrappedTargetRequest

from rocm_build.errors import RocmBuildError
from rocm_build.target_types import (
    RocmWheelTarget,
    WheelBuildCommandField,
    WheelBuildRequirementsField,
    WheelCommandField,
    WheelOptionalField,
    WheelSourceField,
    WheelToolchainField,
)
from rocm_build.upstream import UpstreamRequest, UpstreamSpec
from rocm_build.wheel import _single, wheel_chain, wheel_env

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
    _, env = wheel_env(wheel)
    # Gets written out here: Pants finds a helper's Gets only one call deep.
    source_address, toolchain_address = await MultiGet(
        Get(Addresses, UnparsedAddressInputs, _single(wheel, WheelSourceField)),
        Get(Addresses, UnparsedAddressInputs, _single(wheel, WheelToolchainField)),
    )
    spec = await Get(UpstreamSpec, UpstreamRequest(source_address[0], f"the `source` field of {owner}"))
    pin = spec.pin
    patch_lines = [f"    {p.path}  sha256:{p.sha256[:16]}" for p in spec.patches]
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
