"""wheel/chain_versions.py: the torch and triton a chain builds or pins, read from every rocm_wheel
below the root (each once) and its prebuilt wheels; a recipe's version variable before the pin's
version, and a pin's stand-in version (0.0.0+g<sha>) never compared. What it provides by module
name and holds as distributions, for the upstream-steps check and the install set."""

from __future__ import annotations

from typing import Any, Dict

from pants.engine.addresses import Address
from pants.util.frozendict import FrozenDict

from rocm_build.pins.tables import PrebuiltPin
from rocm_build.prebuilt.wheel_rules import PrebuiltRequest, PrebuiltSpec
from rocm_build.testutil.engine import drive
from rocm_build.testutil.specs import upstream_spec, wheel_spec
from rocm_build.wheel.build_spec import WheelBuildSpec, WheelRequest
from rocm_build.wheel.chain_versions import ChainVersions, ChainVersionsRequest, chain_versions, exact_version, release

VLLM, TORCH, TRITON, FA = (Address(f"tests/mini/{n}", target_name="wheel") for n in ("vllm", "torch", "triton", "flash_attention"))
PREBUILT_TRITON = Address("tests/mini/triton", target_name="prebuilt")
SDK = Address("tests/mini/sdk", target_name="core")


def spec(address: Address, kind: str, pin: str, **fields: Any) -> WheelBuildSpec:
    return wheel_spec(address=address, kind=kind, upstream=upstream_spec(pin), **fields)


def prebuilt(address: Address, project: str, **pin: Any) -> PrebuiltSpec:
    fields = dict(index_url="https://example.invalid/simple/", project=project, python="3.11", **pin)
    return PrebuiltSpec(address, project, PrebuiltPin(**fields), "tests/mini/pins")


def versions(specs: Dict[Address, WheelBuildSpec], prebuilts: Dict[Address, PrebuiltSpec] = {}):
    def answer(output_type: type, request: Any) -> Any:
        if output_type is WheelBuildSpec:
            assert isinstance(request, WheelRequest)
            return specs[request.address]
        assert request == PrebuiltRequest(request.address, "the `dependencies` of a rocm_wheel")
        return prebuilts[request.address]

    return drive(chain_versions(ChainVersionsRequest(VLLM)), answer)


def test_a_recipe_variable_comes_before_the_pin_version_and_every_spec_below_the_root_is_read() -> None:
    specs = {
        VLLM: spec(VLLM, "vllm", "mini-vllm", dependencies=(TORCH, FA)),
        # A diamond: flash-attention builds on torch too.
        FA: spec(FA, "flash_attention", "mini-flash_attention", dependencies=(TORCH,), version="2.8.3"),
        TORCH: spec(TORCH, "torch", "mini-torch", dependencies=(TRITON,), env=FrozenDict({"PYTORCH_BUILD_VERSION": "2.13.0"}), version="2.9.0"),
        TRITON: spec(TRITON, "triton", "mini-triton", version="3.7.1"),
    }
    chain, asked = versions(specs)
    # Each spec of the chain, the diamond's torch included (asked again, the engine answers once).
    assert {r.address for _, r in asked} == {VLLM, FA, TORCH, TRITON}
    assert set(chain.versions) == {
        ("torch", "2.13.0", "tests/mini/torch:wheel (`env` PYTORCH_BUILD_VERSION)"),
        ("triton", "3.7.1", "tests/mini/triton:wheel (pin mini-triton)"),
    }
    # By the pin's name, the kind and the kind's distribution: what an import or a requirement names.
    assert dict(chain.provided) == {
        "mini_torch": TORCH.spec, "torch": TORCH.spec, "mini_triton": TRITON.spec, "triton": TRITON.spec,
        "mini_flash_attention": FA.spec, "flash_attention": FA.spec, "flash_attn": FA.spec,
    }  # fmt: skip
    assert ("flash_attn", "2.8.3", FA.spec) in chain.dists and ("torch", "2.13.0", TORCH.spec) in chain.dists


def test_a_pin_without_a_version_is_not_compared() -> None:
    specs = {VLLM: spec(VLLM, "vllm", "mini-vllm", dependencies=(TORCH,)), TORCH: spec(TORCH, "torch", "mini-torch", version="0.0.0+g0123456789ab")}
    chain, _ = versions(specs)
    assert chain.versions == ()
    assert ("torch", "", TORCH.spec) in chain.dists  # held, its version not known


def test_prebuilt_wheels_are_read_once_and_a_pytorch_triton_is_the_chain_triton() -> None:
    specs = {
        VLLM: spec(VLLM, "vllm", "mini-vllm", dependencies=(TORCH,), prebuilt=(PREBUILT_TRITON, SDK)),
        TORCH: spec(TORCH, "torch", "mini-torch", prebuilt=(PREBUILT_TRITON,)),
    }
    prebuilts = {
        PREBUILT_TRITON: prebuilt(PREBUILT_TRITON, "pytorch-triton-rocm", version="3.5.0", file="x.whl", sha256="a" * 64),
        SDK: prebuilt(SDK, "rocm-sdk-core", track="==7.0.0"),  # not resolved: its exact track is its version
    }
    chain, asked = versions(specs, prebuilts)
    assert [r.address for t, r in asked if t is PrebuiltSpec] == [PREBUILT_TRITON, SDK]
    assert chain.versions == (("triton", "3.5.0", f"prebuilt_wheel {PREBUILT_TRITON.spec} ([prebuilt.pytorch-triton-rocm] in tests/mini/pins)"),)
    assert ("rocm_sdk_core", "7.0.0", SDK.spec) in chain.dists


def test_what_a_track_allows_alone_and_what_must_agree() -> None:
    assert exact_version("==2.13.0+rocm10.0.0") == exact_version(" === 2.13.0+rocm10.0.0 ") == "2.13.0+rocm10.0.0"
    assert exact_version(">=2.13") == exact_version("==2.13.*") == exact_version("") == ""
    assert release("2.13.0+rocm7.14.0") == release("2.13.0a0+gitcf30153") == "2.13.0"
