"""Building on prebuilt wheels: the mini vllm on a mini torch from a package index.

A first checkout (standing in for TheRock's CI) builds mini aotriton and torch; their wheels
are put on a PEP 503 index served on 127.0.0.1. The checkout under test never builds torch:
its `tests/mini/torch:prebuilt` is a `prebuilt_wheel` pinned (by update-pins) to the index's
file and sha256, and flash-attention and vllm variants build on it.

Then TheRock's split wheels (tests 5-7): a whl-next-shaped index of pure fixture wheels with
TheRock's metadata (host torch and torchvision, their device and family wheels, the SDK);
torch's host wheel has a library split as TheRock's are (a `.rocm_kpack_ref` marker, a HIPK
wrapper) and its gfx1151 device wheel the `.kpack` archive with its code object (clang-19,
tests/mini/kpack_writer.py); update-pins resolves the set and refuses a device wheel for
another torch, a consumer missing the device wheel of its gpu target stops before any build,
the install set (host and device wheels) installs with pip --require-hashes, and a device
wheel whose archive is indexed off its host's wrappers is refused before dist/ (test 8).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Dict, List, Mapping, Sequence, Tuple

import pytest

from e2e.http_server import serving
from e2e.workspace import Workspace, borrowed, require_success
from mini import kpack_writer

PINS_DIR = "tests/mini/pins"
PINS = "tests/mini/pins/mini-sdk.toml"  # the prebuilt pins of these tests go beside the SDK's
PIN = "prebuilt-mini-torch"
VLLM = "tests/mini/vllm:wheel-on-prebuilt"
FLASH = "tests/mini/flash_attention:wheel-on-prebuilt"
INSTALL = "dist/tests.mini.vllm.wheel-on-prebuilt.install"


def add_variants(ws: Workspace) -> None:
    """The prebuilt torch, and flash-attention and vllm variants that depend on it."""
    with open(ws.path("tests/mini/torch/BUILD"), "a") as f:
        f.write(f'\nprebuilt_wheel(name="prebuilt", pin="{PIN}", pins_file="{PINS_DIR}")\n')
    for rel, deps in (
        # The prebuilt torch links the SDK's library: the SDK comes with it, as rocm[libraries]
        # comes with TheRock's torch.
        ("tests/mini/flash_attention/BUILD", '["tests/mini/torch:prebuilt", "tests/mini/sdk:gfx1151"]'),
        ("tests/mini/vllm/BUILD", f'["tests/mini/torch:prebuilt", "{FLASH}"]'),
    ):
        add_variant(ws, rel, "wheel-on-prebuilt", deps)


def add_variant(ws: Workspace, rel: str, name: str, deps: str, extra: str = "") -> None:
    """A copy of the BUILD file's rocm_wheel named `name`, on other dependencies."""
    text = ws.read(rel)
    start = text.index("rocm_wheel(")
    block = text[start : text.index("\n)\n", start) + 3]
    fields = f"dependencies={deps}, {extra}" if extra else f"dependencies={deps}"
    variant = re.sub(r"dependencies=\[[^\]]*\]", fields, block).replace('name="wheel"', f'name="{name}"')
    ws.write(rel, f"{text}\n{variant}")


def prebuilt_table(index_url: str, track: str = ">=1,<2", **resolved: str) -> str:
    fields = {"version": "", "file": "", "sha256": "", **resolved}
    lines = [f"[prebuilt.{PIN}]", f'index_url = "{index_url}"', 'project = "mini-torch"', f'track = "{track}"', 'python = "3.11"']
    return "\n" + "\n".join([*lines, *(f'{k} = "{v}"' for k, v in fields.items())]) + "\n"


@pytest.fixture(scope="module")
def index(tmp_path_factory, batch_copy):
    """A PEP 503 index on 127.0.0.1 with the mini torch and aotriton wheels a first checkout built
    (the batch's copy, before this file's checkout borrows it)."""
    root = tmp_path_factory.mktemp("index")
    files = root / "serve" / "files"
    files.mkdir(parents=True)
    wheels = {}
    with borrowed(batch_copy, root / "upstreams") as builder:
        require_success(builder.package("tests/mini/torch:wheel"), "the wheels for the index")
        for wheel in builder.dist_wheels(prebuilt=True).values():
            (files / wheel.name).write_bytes(wheel.read_bytes())
            project = wheel.name.split("-")[0].replace("_", "-")
            wheels.setdefault(project, []).append(wheel.name)
    torch = wheels["mini-torch"][0]
    # Two more files the pin must not take: a version outside `track`, and one for another Python.
    for other in (torch.replace("-1.0.0+", "-2.0.0+"), re.sub(r"cp311-cp311", "cp312-cp312", torch.replace("-1.0.0+", "-1.5.0+"))):
        (files / other).write_bytes((files / torch).read_bytes())
        wheels["mini-torch"].append(other)
    for project, names in wheels.items():
        page = root / "serve" / "simple" / project
        page.mkdir(parents=True)
        links = [f'<a href="../../files/{n}#sha256={hashlib.sha256((files / n).read_bytes()).hexdigest()}">{n}</a>' for n in names]
        (page / "index.html").write_text("<html><body>\n" + "\n".join(links) + "\n</body></html>\n")
    with serving(root / "serve") as (url, seen):
        yield f"{url}/simple/", files, torch, seen


@pytest.fixture(scope="module")
def ws(tmp_path_factory, index, batch_copy):
    index_url = index[0]
    with borrowed(batch_copy, tmp_path_factory.mktemp("prebuilt") / "upstreams") as workspace:
        add_variants(workspace)
        workspace.write(PINS, workspace.read(PINS) + prebuilt_table(index_url))
        yield workspace


PIP_ENV = {"PIP_CONFIG_FILE": "/dev/null", "PATH": "/usr/bin:/bin"}


def fresh_venv(path: Path) -> List[str]:
    """A CPython 3.11 venv (the mini chain's Python) and the pip command that installs into it."""
    python = sorted(Path(p) for p in Path.home().glob(".pyenv/versions/3.11*/bin/python3.11"))
    subprocess.run([str(python[0]) if python else "python3.11", "-m", "venv", str(path)], check=True)
    return [str(path / "bin/python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]


def dist_files(ws: Workspace) -> Dict[str, bytes]:
    return {str(p.relative_to(ws.root)): p.read_bytes() for p in (ws.root / "dist").rglob("*") if p.is_file()}


def test_2_update_pins_resolves_track_against_the_index(ws, index) -> None:
    _, files, torch, _ = index
    before = ws.read(PINS)
    run = ws.pants("run", "rules:update-pins", "--", "--pins-file", PINS_DIR, "--only", PIN, "--no-patch-check")
    require_success(run, "update-pins")
    after = ws.read(PINS)
    sha = hashlib.sha256((files / torch).read_bytes()).hexdigest()
    # Only the prebuilt table changed: the newest 1.x for CPython 3.11, with its sha256.
    assert after.split(f"[prebuilt.{PIN}]")[0] == before.split(f"[prebuilt.{PIN}]")[0]
    # (The version of a built wheel ends with the digest of its inputs: .k<16 hex digits>.)
    assert prebuilt_table(index[0], version=torch.split("-")[1], file=torch, sha256=sha).strip() in after
    assert not list(ws.path(PINS_DIR).glob(".*.tmp"))


def test_3_a_wrong_sha256_and_a_missing_file_stop_before_any_build(ws, index) -> None:
    text = ws.read(PINS)
    sha = re.search(r'sha256 = "([0-9a-f]{64})"', text.split(f"[prebuilt.{PIN}]")[1]).group(1)
    cases = {
        "the index says": (sha, "0" * 64, "has sha256 " + sha + ", but the pin `prebuilt-mini-torch`"),
        "no longer lists": (index[2], index[2].replace("1.0.0", "1.0.1"), "no longer lists mini_torch-1.0.1+"),
    }
    for old, new, expected in cases.values():
        ws.write(PINS, text.replace(old, new))
        try:
            run = ws.package(VLLM)
        finally:
            ws.write(PINS, text)
        assert run.returncode != 0
        assert expected in run.stderr, run.stderr[-3000:]
        assert "tests/mini/torch:prebuilt" in run.stderr
        assert run.built == [] and not (ws.root / "dist").exists()


def test_4_the_chain_builds_on_the_prebuilt_torch_and_installs(ws, index, tmp_path) -> None:
    _, files, torch, seen = index
    # A variant's chain differs from the wheel's, so its run-time lock is its own
    # (3rdparty/run/py3.11/mini-flash_attention.wheel-on-prebuilt.lock), made as a user would.
    lock = require_success(ws.pants("lock-runtime-requirements", FLASH), "the variant's run-time lock")
    assert "Wrote 3rdparty/run/py3.11/mini-flash_attention.wheel-on-prebuilt.lock: 1 distribution(s)" in lock.stdout
    run = require_success(ws.package(VLLM), "the chain on the prebuilt torch")
    assert sorted(run.built) == [FLASH, VLLM]  # no torch, no aotriton
    shipped = ws.path("dist/tests.mini.torch.prebuilt") / torch
    assert shipped.read_bytes() == (files / torch).read_bytes()
    (vllm,) = ws.path("dist/tests.mini.vllm.wheel-on-prebuilt").glob("*.whl")
    with zipfile.ZipFile(vllm) as zf:
        info = next(zf.read(n).decode() for n in zf.namelist() if n.endswith("rocm_build_info.json"))
    assert f'"prebuilt": "{PIN}"' in info and f'"file": "{torch}"' in info
    requirements = ws.path(f"{INSTALL}/requirements.txt").read_text()
    torch_version = torch.split("-")[1]
    assert f"mini_torch=={torch_version} --hash=sha256:{hashlib.sha256(shipped.read_bytes()).hexdigest()}" in requirements
    # As on a box with TheRock's torch: the prebuilt wheel (and what it requires from outside
    # the set: its mini aotriton) from its index first, as requirements.txt's header says; then
    # exactly the chain, by hash.
    assert f"# then, the prebuilt mini_torch and what it requires, from its index: pip install --index-url {index[0]} mini_torch=={torch_version}\n" in requirements
    venv = tmp_path / "venv"
    pip = fresh_venv(venv)
    subprocess.run([*pip, "--index-url", index[0], f"mini_torch=={torch_version}"], check=True, env=PIP_ENV)
    install = ws.path(INSTALL)
    subprocess.run([*pip, "--no-index", "--find-links", str(install / "wheels"), "-r", str(install / "requirements.txt")], check=True, env=PIP_ENV)
    # linked() calls into mini torch's library, which calls into the SDK's (RUNPATH both).
    out = subprocess.run([str(venv / "bin/python"), "-c", "import mini_vllm; print(mini_vllm.answer(), mini_vllm._C.linked())"], capture_output=True, text=True)
    assert (out.returncode, out.stdout) == (0, "42 1151\n"), out.stderr
    # A repeat builds nothing and downloads nothing.
    before = len(seen)
    assert require_success(ws.package(VLLM), "the repeat").built == []
    assert len(seen) == before


def test_4b_a_prebuilt_torch_without_its_sdk_is_refused_before_dist(ws, index) -> None:
    # A consumer that does not import torch while building (so the build itself cannot notice):
    # the install set would hold a torch whose library needs the SDK's, and no SDK.
    add_variant(ws, "tests/mini/aotriton/BUILD", "wheel-on-prebuilt-torch", '["tests/mini/torch:prebuilt"]')
    before = dist_files(ws)
    run = ws.package("tests/mini/aotriton:wheel-on-prebuilt-torch")
    assert run.returncode != 0
    assert "tests/mini/aotriton:wheel-on-prebuilt-torch: the install set would not load on the box" in run.stderr
    assert (
        f"mini_torch/lib/libmini_torch.so in {index[2]} needs libmini_hip.so.1: no wheel of the set ships it. "
        f"`import` would fail with \"libmini_hip.so.1: cannot open shared object file\". Add the wheel that ships "
        f"it to the chain, or, if every target machine has it, declare it with why in `system_libraries` of "
        f"tests/mini/torch:prebuilt."
    ) in run.stderr, run.stderr[-3000:]
    assert run.built == ["tests/mini/aotriton:wheel-on-prebuilt-torch"]
    assert dist_files(ws) == before


# ------------------------------------------------- TheRock's split wheels (issue 35)
# A slice of whl-next (PEP 503, <index>/<project>/ beside its files) with TheRock's metadata
# shapes (rocm-systems rocm_kpack/wheel_splitter.py): an arch-neutral host torch whose extra
# device-gfx1151 pulls amd-torch-device-gfx1151 and the family wheel amd-torch-device-gfx115x,
# torchvision split the same way, and the SDK wheels they require. Pure wheels: no GPU needed.

TORCH, VISION, SDK = "2.13.0+rocm10.0.0", "0.28.0+rocm10.0.0", "10.0.0"
CONSUMER = "tests/mini/aotriton:wheel-on-therock"
THEROCK_BUILD = """\
prebuilt_wheel(name="torch", pin="therock-torch", pins_file="tests/mini/pins",
               system_libraries={"libamdhip64.so.7": "TheRock's HIP runtime, in rocm[libraries], installed first from its index"})
prebuilt_wheel(name="torch-gfx115x", pin="therock-torch-gfx115x", pins_file="tests/mini/pins", dependencies=[":torch"])
prebuilt_wheel(name="torch-gfx1151", pin="therock-torch-gfx1151", pins_file="tests/mini/pins",
               dependencies=[":torch", ":torch-gfx115x"])
prebuilt_wheel(name="vision", pin="therock-vision", pins_file="tests/mini/pins")
prebuilt_wheel(name="vision-gfx1151", pin="therock-vision-gfx1151", pins_file="tests/mini/pins", dependencies=[":vision"])
"""
# The consumer prints its build venv's distributions: the hosts, never a device wheel.
VENV_PRINT = """build_command=["python -c 'import importlib.metadata as m; print(\\"build venv:\\", sorted(d.metadata[\\"Name\\"] for d in m.distributions()))'"]"""


def therock_pins(index_url: str) -> str:
    tables = {
        "therock-torch": f'index_url = "{index_url}"\nproject = "torch"\ntrack = "=={TORCH}"\npython = "3.11"',
        "therock-torch-gfx1151": 'device_of = "therock-torch"\nproject = "amd-torch-device-gfx1151"',
        "therock-torch-gfx115x": 'device_of = "therock-torch"\nproject = "amd-torch-device-gfx115x"',
        "therock-vision": f'index_url = "{index_url}"\nproject = "torchvision"\ntrack = "=={VISION}"\npython = "3.11"',
        "therock-vision-gfx1151": 'device_of = "therock-vision"\nproject = "amd-torchvision-device-gfx1151"',
    }
    return "".join(f"\n[prebuilt.{name}]\n{fields}\nversion = \"\"\nfile = \"\"\nsha256 = \"\"\n" for name, fields in tables.items())


def write_wheel(directory: Path, project: str, version: str, requires: Sequence[str], extras: Sequence[str] = (),
                package: str = "", tag: str = "cp311-cp311-linux_x86_64", members: Mapping[str, bytes] = {}) -> str:  # fmt: skip
    """A wheel pip installs: one module (under `package`, as a device wheel overlays its host's
    package), the METADATA lines given, and `members` (TheRock's split device code)."""
    dist = re.sub(r"[-_.]+", "_", project)
    info = f"{dist}-{version}.dist-info"
    metadata = ["Metadata-Version: 2.1", f"Name: {project}", f"Version: {version}",
                *(f"Provides-Extra: {e}" for e in extras), *(f"Requires-Dist: {r}" for r in requires)]  # fmt: skip
    files = {
        f"{package or dist}/{dist if package else '__init__'}.py": f"VERSION = {version!r}\n".encode(),
        **members,
        f"{info}/METADATA": ("\n".join(metadata) + "\n\n").encode(),
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: rocm-pants-test\nRoot-Is-Purelib: false\nTag: {tag}\n".encode(),
    }
    record = [
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
        for path, data in files.items()
    ]
    name = f"{dist}-{version}-{tag}.whl"
    with zipfile.ZipFile(directory / name, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
        zf.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    return name


# torch's split library: its HIPK wrapper asks torch/.kpack/torch_gfx1151.kpack for `<KERNEL_NAME>#0`.
TORCH_LIBRARY = "torch/lib/libtorch_hip.so"
KERNEL_NAME = TORCH_LIBRARY
TORCH_ARCHIVE = "torch/.kpack/torch_gfx1151.kpack"


def split_torch(work: Path) -> Tuple[bytes, Dict[str, Dict[str, bytes]]]:
    """torch's host library, split (it links a stand-in of TheRock's HIP runtime, which the SDK
    installed from the index provides), and its gfx1151 code object keyed as the archive keys it."""
    hip = "".join(f"void *{f}(void) {{ return 0; }}\n" for f in (
        "__hipRegisterFatBinary", "__hipRegisterFunction", "__hipUnregisterFatBinary", "__hipPopCallConfiguration", "hipLaunchKernel"))  # fmt: skip
    (work / "hip.c").write_text(hip)
    subprocess.run(["/usr/bin/clang-19", "-shared", "-fPIC", "-Wl,-soname,libamdhip64.so.7", "-o", "libamdhip64.so.7", "hip.c"], cwd=work, check=True)
    kernel = 'extern "C" __global__ void add(float *x, float a) { x[__builtin_amdgcn_workitem_id_x()] += a; }\n'
    link = ["-L.", "-l:libamdhip64.so.7", "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../../_rocm_sdk_core/lib"]
    return kpack_writer.split_hip_library(work, "libtorch_hip.so", {"add": kernel}, KERNEL_NAME, ["../.kpack/torch_@GFXARCH@.kpack"], ["gfx1151"], link)


def therock_index(root: Path, split: Tuple[bytes, Dict[str, Dict[str, bytes]]], torch_for_device: str = TORCH, shift: int = 0) -> None:
    """whl-next's layout: <root>/<project>/index.html beside the project's files. `shift`: how far
    the device wheel's archive indexes its code objects off the host's wrappers (rocm-systems#6943)."""
    library, kernels = split
    archive = kpack_writer.archive(
        {f"{KERNEL_NAME}#{int(key.rsplit('#', 1)[1]) + shift}": by_arch for key, by_arch in kernels.items()}, ["gfx1151"], "torch"
    )
    members = {"torch": {TORCH_LIBRARY: library}, "amd-torch-device-gfx1151": {TORCH_ARCHIVE: archive}}
    device_extra = 'extra == "device-gfx1151"'
    wheels = {
        "torch": (TORCH, [f"rocm[libraries]=={SDK}", "rocm-bootstrap",
                          f"amd-torch-device-gfx1151 == {TORCH}; {device_extra}", f"amd-torch-device-gfx115x == {TORCH}; {device_extra}",
                          f'amd-torch-device-gfx1151 == {TORCH}; extra == "device-all"', f'amd-torch-device-gfx115x == {TORCH}; extra == "device-all"'],
                  ["device-gfx1151", "device-all"], ""),
        "amd-torch-device-gfx1151": (TORCH, [f"torch == {torch_for_device}", f"rocm-sdk-device-gfx1151 == {SDK}",
                                             f"amd-torch-device-gfx115x == {TORCH}"], [], "torch"),
        "amd-torch-device-gfx115x": (TORCH, [f"torch == {TORCH}"], [], "torch"),
        "torchvision": (VISION, [f"torch=={TORCH}", f"amd-torchvision-device-gfx1151 == {VISION}; {device_extra}",
                                 f'amd-torchvision-device-gfx1151 == {VISION}; extra == "device-all"'],
                        ["device-gfx1151", "device-all"], ""),
        "amd-torchvision-device-gfx1151": (VISION, [f"torchvision == {VISION}", f"rocm-sdk-device-gfx1151 == {SDK}"], [], "torchvision"),
        # The SDK (on whl-next `rocm` is an sdist; a wheel stands for it here).
        "rocm": (SDK, [f'rocm-sdk-device-gfx1151=={SDK}; {device_extra}'], ["libraries", "device-gfx1151"], ""),
        "rocm-sdk-device-gfx1151": (SDK, [], [], ""),
        "rocm-bootstrap": ("0.3.0", [], [], ""),
    }  # fmt: skip
    for project, (version, requires, extras, package) in wheels.items():
        directory = root / project
        directory.mkdir(parents=True)
        name = write_wheel(directory, project, version, requires, extras, package, members=members.get(project, {}))
        sha = hashlib.sha256((directory / name).read_bytes()).hexdigest()
        (directory / "index.html").write_text(f'<html><body><a href="{name.replace("+", "%2B")}#sha256={sha}">{name}</a></body></html>\n')


@pytest.fixture(scope="module")
def therock(index, ws):
    """(whl-next URL, its root) served beside the mini index; the pins, targets and consumers."""
    serve = index[1].parent
    work = serve / "split-torch"
    work.mkdir()
    split = split_torch(work)
    therock_index(serve / "whl-next", split)
    therock_index(serve / "whl-next-mismatched", split, torch_for_device="2.13.0+rocm10.0.1")
    therock_index(serve / "whl-next-shifted", split, shift=1)
    base = index[0][: -len("simple/")]
    ws.write(PINS, ws.read(PINS) + therock_pins(f"{base}whl-next/"))
    ws.path("tests/mini/therock").mkdir(exist_ok=True)
    ws.write("tests/mini/therock/BUILD", THEROCK_BUILD)
    devices = '["tests/mini/therock:torch-gfx1151", "tests/mini/therock:vision-gfx1151"]'
    add_variant(ws, "tests/mini/aotriton/BUILD", "wheel-on-therock", devices, VENV_PRINT)
    add_variant(ws, "tests/mini/aotriton/BUILD", "wheel-on-therock-host-only", '["tests/mini/therock:torch"]')
    return f"{base}whl-next/", serve / "whl-next", base


def test_5_update_pins_refuses_a_device_wheel_for_another_torch_and_resolves_the_set(ws, therock) -> None:
    whl_next, root, base = therock
    update = ("run", "rules:update-pins", "--", "--pins-file", PINS_DIR, "--only", "therock-torch", "therock-vision", "--no-patch-check")
    good = ws.read(PINS)
    ws.write(PINS, good.replace(whl_next, f"{base}whl-next-mismatched/"))
    mismatched = ws.read(PINS)
    run = ws.pants(*update)
    assert run.returncode != 0 and ws.read(PINS) == mismatched
    assert (
        f"update-pins: amd-torch-device-gfx1151 {TORCH} ([prebuilt.therock-torch-gfx1151]) requires "
        f"torch==2.13.0+rocm10.0.1, but the host pin [prebuilt.therock-torch] is {TORCH}; the set disagrees"
    ) in run.stderr, run.stderr[-3000:]
    ws.write(PINS, good)
    require_success(ws.pants(*update), "update-pins on whl-next")
    pins = ws.read(PINS)
    for project, version in (("torch", TORCH), ("amd_torch_device_gfx1151", TORCH), ("amd_torch_device_gfx115x", TORCH),
                             ("torchvision", VISION), ("amd_torchvision_device_gfx1151", VISION)):  # fmt: skip
        (wheel,) = (root / project.replace("_", "-")).glob("*.whl")
        assert f'version = "{version}"\nfile = "{wheel.name}"\nsha256 = "{hashlib.sha256(wheel.read_bytes()).hexdigest()}"\n' in pins
    gfx1151 = pins.split("[prebuilt.therock-torch-gfx1151]")[1].split("\n\n")[0]
    assert gfx1151.endswith(f'requires_rocm = "{SDK}"\nextra = "device-gfx1151"\nrequires_devices = "amd-torch-device-gfx115x"')
    assert f'requires_rocm = "{SDK}"' in pins.split("[prebuilt.therock-torch]")[1].split("\n\n")[0]


def test_6_a_consumer_without_the_device_wheel_of_its_gpu_target_stops_before_any_build(ws, therock) -> None:
    run = ws.package(f"{CONSUMER}-host-only")
    assert run.returncode != 0
    assert (
        f"{CONSUMER}-host-only builds for gfx1151 (gpu_targets) on prebuilt_wheel tests/mini/therock:torch (torch, pin "
        "`therock-torch`), whose GPU code is in device wheels, but depends on none for gfx1151: add the prebuilt_wheel "
        "of pin `therock-torch-gfx1151` to its `dependencies`"
    ) in run.stderr, run.stderr[-3000:]
    assert run.built == [] and not ws.path("dist/tests.mini.aotriton.wheel-on-therock-host-only").exists()


def test_7_the_install_set_holds_host_and_device_wheels_and_installs_by_hash(ws, therock, tmp_path) -> None:
    whl_next, root, _ = therock
    run = require_success(ws.package(CONSUMER), "the consumer of the split torch")
    assert run.built == [CONSUMER]
    # torch's split library found its kernel in the gfx1151 device wheel's .kpack archive.
    assert f"{CONSUMER}: the install set loads: " in run.stderr and "the 1 GPU kernel(s) their libraries keep in device wheels (.kpack files) are there" in run.stderr
    # The build compiled against the hosts only: no device wheel in its venv.
    (log,) = ws.path("dist/tests.mini.aotriton.wheel-on-therock").glob("*.build.log")
    venv_line = next(line for line in log.read_text().splitlines() if line.startswith("build venv:"))
    assert "'torch'" in venv_line and "'torchvision'" in venv_line and "device" not in venv_line, venv_line
    install = ws.path("dist/tests.mini.aotriton.wheel-on-therock.install")
    shipped = {p.name: p for p in (install / "wheels").glob("*.whl")}
    for project in ("torch", "amd-torch-device-gfx1151", "amd-torch-device-gfx115x", "torchvision", "amd-torchvision-device-gfx1151"):
        (wheel,) = (root / project).glob("*.whl")
        assert shipped[wheel.name].read_bytes() == wheel.read_bytes()
    requirements = (install / "requirements.txt").read_text()

    def line(project: str, requirement: str) -> str:
        (wheel,) = (root / project).glob("*.whl")
        return f"{requirement} --hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}"

    assert line("torch", f"torch[device-gfx1151]=={TORCH}") in requirements.splitlines()
    assert line("torchvision", f"torchvision[device-gfx1151]=={VISION}") in requirements.splitlines()
    assert line("amd-torch-device-gfx115x", f"amd_torch_device_gfx115x=={TORCH}") in requirements.splitlines()
    assert f"# then, the prebuilt torch and what it requires, from its index: pip install --index-url {whl_next} 'torch[device-gfx1151]=={TORCH}'" in requirements
    # On a box with TheRock's SDK installed (what the wheels require from outside the set),
    # the set installs by hash alone: every wheel the chain's own wheels require is in it.
    def install_by_hash(venv: Path, wheels: Path) -> subprocess.CompletedProcess:
        pip = fresh_venv(venv)
        subprocess.run([*pip, "--index-url", whl_next, f"rocm[libraries,device-gfx1151]=={SDK}", "rocm-bootstrap"], check=True, env=PIP_ENV)
        return subprocess.run([*pip, "--no-index", "--find-links", str(wheels), "--require-hashes", "-r", str(install / "requirements.txt")],
                              env=PIP_ENV, capture_output=True, text=True)  # fmt: skip

    venv = tmp_path / "venv"
    done = install_by_hash(venv, install / "wheels")
    assert done.returncode == 0, done.stderr
    listed = subprocess.run([str(venv / "bin/python"), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
                            env=PIP_ENV, capture_output=True, text=True, check=True)  # fmt: skip
    installed = {d["name"].lower().replace("_", "-"): d["version"] for d in json.loads(listed.stdout)}
    assert {k: installed.get(k) for k in ("torch", "amd-torch-device-gfx1151", "amd-torch-device-gfx115x", "torchvision",
                                          "amd-torchvision-device-gfx1151")} == {  # fmt: skip
        "torch": TORCH, "amd-torch-device-gfx1151": TORCH, "amd-torch-device-gfx115x": TORCH,
        "torchvision": VISION, "amd-torchvision-device-gfx1151": VISION,
    }  # fmt: skip
    out = subprocess.run([str(venv / "bin/python"), "-c", "import torch.amd_torch_device_gfx1151 as d; print(d.VERSION)"],
                         capture_output=True, text=True)  # fmt: skip
    assert out.stdout.strip() == TORCH, out.stderr
    # A tampered device wheel is refused by the hashes.
    gfx1151 = next(p for p in (install / "wheels").glob("amd_torch_device_gfx1151-*.whl"))
    tampered = tmp_path / "tampered"
    shutil.copytree(install / "wheels", tampered)
    with zipfile.ZipFile(tampered / gfx1151.name, "a") as zf:
        zf.writestr("extra.txt", "not what was pinned")
    refused = install_by_hash(tmp_path / "venv2", tampered)
    assert refused.returncode != 0 and "THESE PACKAGES DO NOT MATCH THE HASHES" in refused.stderr, refused.stderr


def test_8_a_device_wheel_indexed_off_its_host_is_refused_before_dist(ws, therock) -> None:
    # ROCm/rocm-systems#6943's shape: the same host torch, a gfx1151 device wheel whose archive
    # keys its code object #1 where the host's wrapper asks for #0.
    whl_next, root, base = therock
    (device,) = (root / "amd-torch-device-gfx1151").glob("*.whl")
    (shifted,) = (root.parent / "whl-next-shifted" / "amd-torch-device-gfx1151").glob("*.whl")
    good = ws.read(PINS)
    pinned, moved = (hashlib.sha256(p.read_bytes()).hexdigest() for p in (device, shifted))
    assert pinned in good and device.name == shifted.name  # the same file name, other bytes: the pin's sha256 moves
    ws.write(PINS, good.replace(whl_next, f"{base}whl-next-shifted/").replace(pinned, moved))
    before = dist_files(ws)
    try:
        run = ws.package(CONSUMER)
    finally:
        ws.write(PINS, good)
    assert run.returncode != 0
    assert f"{CONSUMER}: the install set would not load on the box (1 problem(s); nothing was written to dist/)" in run.stderr
    assert (
        f"  - {TORCH_LIBRARY} in torch-{TORCH}-cp311-cp311-linux_x86_64.whl (tests/mini/therock:torch) references kernel "
        f"{KERNEL_NAME}#0 for gfx1151, which the archive it looks in, {TORCH_ARCHIVE} in the device wheel "
        f"amd_torch_device_gfx1151-{TORCH}-cp311-cp311-linux_x86_64.whl, does not hold (it holds {KERNEL_NAME}#1: its "
        f"table of contents is indexed +1 from the wrappers' code object indexes, the shape of ROCm/rocm-systems#6943): "
        f"on a gfx1151 GPU the runtime fails with hipErrorInvalidImage"
    ) in run.stderr, run.stderr[-3000:]
    assert dist_files(ws) == before
