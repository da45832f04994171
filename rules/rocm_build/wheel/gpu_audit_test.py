from types import SimpleNamespace

from pants.util.frozendict import FrozenDict

from rocm_build.wheel.gpu_audit import GpuCode, audit_problems

WHEEL = "torch-2.13.0+rocm7.14gfx1100.gfx1151-cp312-cp312-linux_x86_64.whl"


def spec(allow_missing=()):
    return SimpleNamespace(owner="components/torch:wheel", gpu_targets=("gfx1100", "gfx1151"), allow_missing_gpu_targets=allow_missing)


def code(libraries=None, code_objects=None, unreadable=None) -> GpuCode:
    return GpuCode(FrozenDict(libraries or {}), FrozenDict(code_objects or {}), FrozenDict(unreadable or {}))


def test_each_library_needs_every_target_code_objects_together() -> None:
    found = code(
        libraries={"torch/lib/libtorch_hip.so": ("gfx1100", "gfx1151"), "torch/lib/libhipblaslt.so": ("gfx1100", "gfx942")},
        code_objects={"aotriton/images/amd-gfx1100/a.hsaco": ("gfx1100",), "aotriton/images/amd-gfx1151/a.hsaco": ("gfx1151",)},
    )
    (problem,) = audit_problems(spec(), WHEEL, found)
    assert problem.startswith(
        f"components/torch:wheel: torch/lib/libhipblaslt.so in {WHEEL} carries AMDGPU code for gfx1100, gfx942, "
        "but none for gfx1151 (gpu_targets: gfx1100, gfx1151). On a gfx1151 GPU it would fail with hipErrorInvalidImage"
    )
    assert audit_problems(spec(allow_missing=("gfx1151",)), WHEEL, found) == ()


def test_code_objects_lacking_a_target_and_unreadable_libraries() -> None:
    objects = {f"k/amd-gfx1100/{i}.hsaco": ("gfx1100",) for i in range(5)}
    problems = audit_problems(spec(), WHEEL, code(code_objects=objects, unreadable={"x.so": "its ELF section headers lie outside the file"}))
    assert problems[0].startswith(
        f"components/torch:wheel: the code objects in {WHEEL} (k/amd-gfx1100/0.hsaco, k/amd-gfx1100/1.hsaco, "
        "k/amd-gfx1100/2.hsaco and 2 more) carry AMDGPU code for gfx1100, but none for gfx1151"
    )
    assert problems[1] == f"components/torch:wheel: the GPU code of x.so in {WHEEL} could not be read: its ELF section headers lie outside the file"
    # A pure-Python wheel carries no GPU code: nothing to check.
    assert audit_problems(spec(), WHEEL, code()) == ()
