"""The miniature chain's ROCm SDK: a test double for TheRock's `rocm-sdk-core` and its device
wheel, as the real wheels carry them, on a file:// package index.

- `mini-rocm-sdk-core` ships `_mini_rocm_sdk_core/lib/libmini_hip.so.1` (SONAME
  libmini_hip.so.1, its symbols under version MINI_HIP_1.0, as the HIP runtime versions its
  own), and says per gpu target `Provides-Extra: device-<gfx>` with the device wheel it pulls:
  TheRock's split-wheel metadata, so the chain treats it as a split host.
- `mini-rocm-sdk-device-gfx1151` ships a gfx1151 code object, the GPU code of the SDK.

Mini torch links libmini_hip through its RUNPATH and requires the SDK wheel; mini vllm links
mini torch's library. Both wheels are byte-reproducible (compiled with the identifying
`.comment` removed, no build id, zip entries at a fixed date), so their sha256 is a pin:
tests/mini/pins.toml holds it. Nothing here is a real ROCm: the GPU code is compiled by
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

VERSION = "1.0.0"
TARGETS = ("gfx1151",)
CORE = "mini-rocm-sdk-core"
DEVICE = "mini-rocm-sdk-device-{}"
CLANG = "/usr/bin/clang-19"
OBJCOPY = "/usr/bin/llvm-objcopy-19"
HIP_C = "long mini_hip_answer(void) { return 1151; }\n"
HIP_MAP = "MINI_HIP_1.0 { global: mini_hip_answer; local: *; };\n"
BLAS_HIP = """\
#define __global__ __attribute__((global))
extern "C" __global__ void axpy(float *x, float a) { int i = __builtin_amdgcn_workitem_id_x(); x[i] += a; }
"""
ZIP_DATE = (2026, 1, 1, 0, 0, 0)


def wheel_name(project: str) -> str:
    return f"{project.replace('-', '_')}-{VERSION}-py3-none-linux_x86_64.whl"


def _compile(work: Path, out: str, args: List[str]) -> bytes:
    subprocess.run([CLANG, *args, "-o", out], cwd=work, check=True)
    # What names the compiler's and linker's versions goes: the bytes are a pin.
    subprocess.run([OBJCOPY, "--remove-section=.comment", out], cwd=work, check=True)
    return (work / out).read_bytes()


def _binaries() -> Tuple[bytes, Dict[str, bytes]]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "hip.c").write_text(HIP_C)
        (work / "hip.map").write_text(HIP_MAP)
        (work / "blas.hip").write_text(BLAS_HIP)
        library = _compile(work, "libmini_hip.so.1", [
            "-shared", "-fPIC", "-O2", "-fno-ident", "-Wl,--build-id=none", "-Wl,-soname,libmini_hip.so.1",
            "-Wl,--version-script=hip.map", "hip.c",
        ])  # fmt: skip
        devices = {
            gfx: _compile(work, f"blas-{gfx}.co", [
                "-x", "hip", f"--offload-arch={gfx}", "--cuda-device-only", "--no-gpu-bundle-output", "-nogpulib",
                "-nogpuinc", "-O2", "-fno-ident", "-fuse-cuid=none", "blas.hip",
            ])  # fmt: skip
            for gfx in TARGETS
        }
        return library, devices


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
            info.external_attr = (0o755 if name.endswith((".so.1", ".co")) else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)


def make_index(dest: Path) -> Dict[str, Tuple[str, str]]:
    """Writes the SDK's wheels and a PEP 503 index of them under `dest` (simple/, files/);
    returns project -> (file name, sha256)."""
    library, devices = _binaries()
    files_dir = dest / "files"
    files_dir.mkdir(parents=True, exist_ok=True)
    core_metadata = [f"Provides-Extra: device-{gfx}" for gfx in TARGETS] + [
        f'Requires-Dist: {DEVICE.format(gfx)}=={VERSION}; extra == "device-{gfx}"' for gfx in TARGETS
    ]
    wheels = {CORE: (core_metadata, {"_mini_rocm_sdk_core/__init__.py": b"", "_mini_rocm_sdk_core/lib/libmini_hip.so.1": library})}
    for gfx, code in devices.items():
        wheels[DEVICE.format(gfx)] = (
            [f"Requires-Dist: {CORE}=={VERSION}"],
            {f"_mini_rocm_sdk_devices/{gfx}/blas.co": code},
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
