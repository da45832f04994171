"""The miniature chain's ROCm SDK: a test double for TheRock's `rocm-sdk-core` and its device
wheel, as the real wheels carry them, on a file:// package index.

- `mini-rocm-sdk-core` ships `_mini_rocm_sdk_core/lib/libmini_hip.so.1` (SONAME
  libmini_hip.so.1, its symbols under version MINI_HIP_1.0, as the HIP runtime versions its
  own), and says per gpu target `Provides-Extra: device-<gfx>` with the device wheel it pulls:
  TheRock's split-wheel metadata, so the chain treats it as a split host.
  It also ships `_mini_rocm_sdk_core/lib/libmini_blas.so.1`, a HIP library split as TheRock's
  ROCm 10 wheels are (RFC0008, kpack): host code only, a `.rocm_kpack_ref` marker naming
  its kernel `mini-sdk/stage/lib/libmini_blas.so.1` and the archive
  `../.kpack/blas_lib_@GFXARCH@.kpack`, one HIPK wrapper (index 0). It links libmini_hip,
  which defines the HIP runtime entry points clang's registration code calls.
- `mini-rocm-sdk-device-gfx1151` ships that library's GPU code the same way:
  `_mini_rocm_sdk_core/.kpack/blas_lib_gfx1151.kpack`, an archive holding the gfx1151 code
  object under `<kernel name>#0` (written by kpack_writer.py), which the install-set check
  reads (rules/rocm_build/install/kpack_check.py).

Mini torch links libmini_hip through its RUNPATH and requires the SDK wheel; mini vllm links
mini torch's library. Both wheels are byte-reproducible (compiled with the identifying
`.comment` removed, no build id, zip entries at a fixed date), so their sha256 is a pin:
tests/mini/pins/mini-sdk.toml holds it. Nothing here is a real ROCm: the GPU code is compiled by
Debian's clang-19 for the AMDGPU target and never runs.
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Dict, List, Tuple

if __package__:
    from mini import kpack_writer
else:  # run as a script (make_upstreams.py): its directory is on sys.path
    import kpack_writer  # type: ignore[no-redef]  # pants: no-infer-dep

VERSION = "1.0.0"
TARGETS = ("gfx1151",)
CORE = "mini-rocm-sdk-core"
DEVICE = "mini-rocm-sdk-device-{}"
CLANG = "/usr/bin/clang-19"
OBJCOPY = "/usr/bin/llvm-objcopy-19"
# The HIP runtime's entry points that clang's registration and launch code call, as stubs.
HIP_ENTRY_POINTS = (
    "__hipRegisterFatBinary", "__hipRegisterFunction", "__hipUnregisterFatBinary", "__hipPopCallConfiguration",
    "hipLaunchKernel",
)  # fmt: skip
HIP_C = "long mini_hip_answer(void) { return 1151; }\n" + "".join(f"void *{name}(void) {{ return 0; }}\n" for name in HIP_ENTRY_POINTS)
HIP_MAP = f"MINI_HIP_1.0 {{ global: mini_hip_answer; {'; '.join(HIP_ENTRY_POINTS)}; local: *; }};\n"
BLAS_HIP = """\
#define __global__ __attribute__((global))
typedef struct { unsigned x, y, z; } dim3;
typedef struct ihipStream_t *hipStream_t;
extern "C" int hipLaunchKernel(const void *, dim3, dim3, void **, unsigned long, hipStream_t);
extern "C" __global__ void axpy(float *x, float a) { int i = __builtin_amdgcn_workitem_id_x(); x[i] += a; }
"""
BLAS = "libmini_blas.so.1"
KERNEL_NAME = f"mini-sdk/stage/lib/{BLAS}"  # TheRock's: <artifact prefix>/<path of the binary in it>
KPACK_GROUP = "blas_lib"
SEARCH_PATH = f"../.kpack/{KPACK_GROUP}_@GFXARCH@.kpack"  # from lib/, to the package's .kpack/
ZIP_DATE = (2026, 1, 1, 0, 0, 0)


def wheel_name(project: str) -> str:
    return f"{project.replace('-', '_')}-{VERSION}-py3-none-linux_x86_64.whl"


def _compile(work: Path, out: str, args: List[str]) -> bytes:
    subprocess.run([CLANG, *args, "-o", out], cwd=work, check=True)
    # What names the compiler's and linker's versions goes: the bytes are a pin.
    subprocess.run([OBJCOPY, "--remove-section=.comment", out], cwd=work, check=True)
    return (work / out).read_bytes()


def _binaries() -> Tuple[bytes, bytes, Dict[str, bytes]]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "hip.c").write_text(HIP_C)
        (work / "hip.map").write_text(HIP_MAP)
        (work / "blas.hip").write_text(BLAS_HIP)
        library = _compile(work, "libmini_hip.so.1", [
            "-shared", "-fPIC", "-O2", "-fno-ident", "-Wl,--build-id=none", "-Wl,-soname,libmini_hip.so.1",
            "-Wl,--version-script=hip.map", "hip.c",
        ])  # fmt: skip
        hip = ["-x", "hip", "-nogpulib", "-nogpuinc", "-O2", "-fno-ident", "-cuid=blas"]
        devices = {
            gfx: _compile(work, f"blas-{gfx}.co", [
                *hip, f"--offload-arch={gfx}", "--cuda-device-only", "--no-gpu-bundle-output", "blas.hip",
            ])  # fmt: skip
            for gfx in TARGETS
        }
        # The fat library, then split: its code objects go to the device wheels' archives.
        _compile(work, BLAS, [
            *hip, *(f"--offload-arch={gfx}" for gfx in TARGETS), "-no-hip-rt", "-shared", "-fPIC", "-Wl,--build-id=none",
            f"-Wl,-soname,{BLAS}", "-Wl,--enable-new-dtags,-rpath,$ORIGIN", "blas.hip", "-L.", "-l:libmini_hip.so.1",
        ])  # fmt: skip
        kpack_writer.split_library(work / BLAS, KERNEL_NAME, [SEARCH_PATH])
        return library, (work / BLAS).read_bytes(), devices


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _write_wheel(path: Path, project: str, metadata: List[str], files: Dict[str, bytes]) -> None:
    dist_info = f"{project.replace('-', '_')}-{VERSION}.dist-info"
    members = dict(files)
    members[f"{dist_info}/METADATA"] = "\n".join(
        ["Metadata-Version: 2.1", f"Name: {project}", f"Version: {VERSION}", *metadata, ""]
    ).encode()
    members[f"{dist_info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: rocm-pants make_sdk\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n\n"
    record = [f"{name},{_record_hash(data)},{len(data)}" for name, data in sorted(members.items())]
    members[f"{dist_info}/RECORD"] = ("\n".join([*record, f"{dist_info}/RECORD,,"]) + "\n").encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, ZIP_DATE)
            info.external_attr = (0o755 if name.endswith(".so.1") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)


def make_index(dest: Path) -> Dict[str, Tuple[str, str]]:
    """Writes the SDK's wheels and a PEP 503 index of them under `dest` (simple/, files/);
    returns project -> (file name, sha256)."""
    library, blas, devices = _binaries()
    files_dir = dest / "files"
    files_dir.mkdir(parents=True, exist_ok=True)
    core_metadata = [f"Provides-Extra: device-{gfx}" for gfx in TARGETS] + [
        f'Requires-Dist: {DEVICE.format(gfx)}=={VERSION}; extra == "device-{gfx}"' for gfx in TARGETS
    ]
    core = {"_mini_rocm_sdk_core/__init__.py": b"", "_mini_rocm_sdk_core/lib/libmini_hip.so.1": library,
            f"_mini_rocm_sdk_core/lib/{BLAS}": blas}  # fmt: skip
    wheels = {CORE: (core_metadata, core)}
    for gfx, code in devices.items():
        archive = kpack_writer.archive({f"{KERNEL_NAME}#0": {gfx: code}}, [gfx], KPACK_GROUP)
        wheels[DEVICE.format(gfx)] = (
            [f"Requires-Dist: {CORE}=={VERSION}"],
            {f"_mini_rocm_sdk_core/.kpack/{KPACK_GROUP}_{gfx}.kpack": archive},
        )
    for project, (metadata, members) in wheels.items():
        _write_wheel(files_dir / wheel_name(project), project, metadata, members)
    pinned = pinned_files(dest)
    for project, (name, sha256) in pinned.items():
        page = dest / "simple" / project
        page.mkdir(parents=True, exist_ok=True)
        (page / "index.html").write_text(f'<html><body>\n<a href="../../files/{name}#sha256={sha256}">{name}</a>\n</body></html>\n')
    return pinned


def pinned_files(index: Path) -> Dict[str, Tuple[str, str]]:
    """project -> (file name, sha256) of the wheels make_index wrote under `index`."""
    found = {}
    for project in (CORE, *(DEVICE.format(gfx) for gfx in TARGETS)):
        name = wheel_name(project)
        found[project] = (name, hashlib.sha256((index / "files" / name).read_bytes()).hexdigest())
    return found


def pins_text(index: Path) -> str:
    """The SDK's `[prebuilt.*]` tables: the host (mini-sdk) and a device pin per target."""
    url = f"file://{index}/simple/"
    pinned = pinned_files(index)
    name, sha256 = pinned[CORE]
    lines = [
        "[prebuilt.mini-sdk]", f'index_url = "{url}"', f'project = "{CORE}"', 'python = "3.11"',
        f'track = "=={VERSION}"', f'version = "{VERSION}"', f'file = "{name}"', f'sha256 = "{sha256}"', "",
    ]  # fmt: skip
    for gfx in TARGETS:
        name, sha256 = pinned[DEVICE.format(gfx)]
        lines += [
            f"[prebuilt.mini-sdk-{gfx}]", f'index_url = "{url}"', f'project = "{DEVICE.format(gfx)}"',
            'python = "3.11"', 'device_of = "mini-sdk"', f'version = "{VERSION}"', f'file = "{name}"',
            f'sha256 = "{sha256}"', f'extra = "device-{gfx}"', "",
        ]  # fmt: skip
    return "\n".join(lines)
