"""The gpu-code audit of a built wheel: each library, the code objects together and the `.kpack`
archives together carry every requested target; a code object an archive files under another
arch than its ELF header says is refused."""

import json
from types import SimpleNamespace

import pytest

from pants.engine.fs import EMPTY_DIGEST, CreateDigest, Digest, MergeDigests
from pants.engine.process import Process, ProcessResult
from pants.testutil.rule_runner import MockGet, run_rule_with_mocks
from pants.util.frozendict import FrozenDict

from rocm_build.testutil import kpack_wheels
from rocm_build.testutil.kpack_wheels import ARCHIVE, DEVICE, HOST, KERNEL_NAME, LIBRARY, device_wheel, filed, read_gpu_code
from rocm_build.testutil.wheel_facts import read_script_json
from rocm_build.wheel.built_wheel import BuiltWheel
from rocm_build.audits import gpu_audit
from rocm_build.audits.gpu_audit import GPU_CODE, GpuCode, audit_problems, with_gpu_code
from rocm_build.audits.portable import AuditwheelPythonProcess

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


# TheRock's split device code, read by gpu_code.py from wheels of real code objects
# (rocm_build/testutil/kpack_wheels.py).
@pytest.fixture(scope="module")
def split(tmp_path_factory) -> kpack_wheels.Split:
    return kpack_wheels.split_library(tmp_path_factory.mktemp("hip"))


def test_kpack_archives_carry_the_targets_together_and_a_split_library_none(split, tmp_path) -> None:
    both = read_gpu_code(device_wheel(tmp_path, split[1], "zstd-per-kernel", ("gfx1100", "gfx1151")), tmp_path)
    assert audit_problems(spec(), DEVICE, both) == ()
    assert json.loads(with_gpu_code("{}", spec(), both))["gpu_code"] == {ARCHIVE: ["gfx1100", "gfx1151"]}
    # A host library split from its device code carries none itself: nothing to lack.
    host = read_gpu_code(kpack_wheels.host_wheel(split, tmp_path), tmp_path)
    assert dict(host.split_libraries) == {LIBRARY: KERNEL_NAME} and not host.libraries
    assert audit_problems(spec(), HOST, host) == ()
    # Archives with code for gfx1151 alone lack gfx1100.
    one = read_gpu_code(device_wheel(tmp_path, filed(split, ("gfx1151", "gfx1151"))), tmp_path)
    (problem,) = audit_problems(spec(), DEVICE, one)
    assert problem.startswith(
        f"components/torch:wheel: the .kpack archives in {DEVICE} ({ARCHIVE}) carry AMDGPU code "
        "for gfx1151, but none for gfx1100 (gpu_targets: gfx1100, gfx1151)"
    )


def test_a_code_object_of_another_arch_than_its_archive_files_it_under(split, tmp_path) -> None:
    kernels = filed(split, ("gfx1100", "gfx1151"))  # unit 0 compiled for gfx1100, filed under gfx1151
    found = read_gpu_code(device_wheel(tmp_path, kernels, "zstd-per-kernel"), tmp_path)
    assert audit_problems(spec(), DEVICE, found) == (
        f"components/torch:wheel: kernel {KERNEL_NAME}#0 in {ARCHIVE} in {DEVICE} "
        "is filed under gfx1151 (its table of contents), but its code object's ELF header says gfx1100. On a gfx1151 GPU "
        "it would fail with hipErrorInvalidImage: the build packed another arch's code under gfx1151. Give its packing "
        "step the arch list it compiled for (PYTORCH_ROCM_ARCH).",
    )
    # A whole archive of another arch: its kernels named together, and the target it lacks.
    found = read_gpu_code(device_wheel(tmp_path, filed(split, ("gfx1100", "gfx1100"))), tmp_path)
    lacks, mismatch = audit_problems(spec(), DEVICE, found)
    assert lacks.startswith(
        f"components/torch:wheel: the .kpack archives in {DEVICE} ({ARCHIVE}) carry AMDGPU code for gfx1100, but none for gfx1151"
    )
    assert mismatch.startswith(
        f"components/torch:wheel: kernels {KERNEL_NAME}#0, {KERNEL_NAME}#1 in {ARCHIVE} "
        f"in {DEVICE} are filed under gfx1151 (its table of contents), but their code objects' ELF headers say gfx1100. "
    )


def test_the_wheel_is_read_by_gpu_code_py_with_its_kpack_reader_in_auditwheels_venv(split, tmp_path) -> None:
    # The rule's steps: the scripts beside the wheel, run by auditwheel's Python (kpack.py needs
    # msgpack and zstandard), a remote cache asked first; its JSON (read here for real) parsed.
    out = read_script_json(GPU_CODE, device_wheel(tmp_path, filed(split, ("gfx1151", "gfx1100"))), tmp_path)
    asked: list = []
    created: list = []

    def run(request: AuditwheelPythonProcess) -> Process:
        asked.append(request)
        return Process(argv=("python", *request.argv), description=request.description)

    code = run_rule_with_mocks(gpu_audit.read_gpu_code, rule_args=[BuiltWheel(EMPTY_DIGEST, DEVICE)], mock_gets=[
        MockGet(Digest, (CreateDigest,), lambda c: created.append(sorted(f.path for f in c)) or EMPTY_DIGEST),
        MockGet(Digest, (MergeDigests,), lambda _: EMPTY_DIGEST),
        MockGet(Process, (AuditwheelPythonProcess,), run),
        MockGet(ProcessResult, (Process,), lambda p: SimpleNamespace(stdout=json.dumps(out).encode(), process=p)),
    ])  # fmt: skip
    assert created == [[f"__rocm_build/{name}" for name in ("amdgpu_elf.py", "gpu_code.py", "kpack.py", "wheel_zip.py")]]
    (request,) = asked
    assert request.argv == ("__rocm_build/gpu_code.py", DEVICE) and dict(request.env) == {"PATH": "/usr/bin:/bin"}
    assert code.kpacks[ARCHIVE].mismatches == ((f"{KERNEL_NAME}#1", "gfx1151", "gfx1100"),)
    assert code.kpacks[ARCHIVE].arches == ("gfx1100", "gfx1151") and code.kpacks[ARCHIVE].toc_arches == ("gfx1151",)
