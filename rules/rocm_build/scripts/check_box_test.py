"""check_box.py, the install set's check of the machine, run as a user runs it (a process, here
under RLIMIT_AS of LIMIT bytes and a timeout) on fixture trees of /sys, /proc, /dev and /etc
built here, and once on this machine's own root. The firmware's version is asked of the real
dpkg-query, reading the fixture's dpkg database."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, Optional

import pytest

from rocm_build.script_modules import script_bytes

GIB = 1 << 30
LIMIT = 256 << 20  # the check's address space
SECONDS = 60  # a check takes well under a second alone
CPU_NODE = "cpu_cores_count 32\nsimd_count 0\ngfx_target_version 0\ndrm_render_minor 0\n"
# A Strix Halo as a 128 GB box with a 4 GiB carve-out and ttm.pages_limit=25165824 shows it
# (measured on one: noamsto/nix-amd-ai#42): 96 GiB of GTT, 124 GiB left to Linux.
GOOD = {
    "sys/class/kfd/kfd/topology/nodes/0/properties": CPU_NODE,
    "sys/class/kfd/kfd/topology/nodes/1/properties": "cpu_cores_count 0\nsimd_count 80\ngfx_target_version 110501\ndrm_render_minor 128\n",
    "sys/class/drm/renderD128/device/mem_info_gtt_total": f"{96 * GIB}\n",
    "sys/class/drm/renderD128/device/mem_info_vram_total": f"{4 * GIB}\n",
    "sys/module/ttm/parameters/pages_limit": "25165824\n",
    "proc/meminfo": f"MemTotal:       {124 * GIB // 1024} kB\nMemFree:        1000 kB\n",
    "proc/sys/kernel/osrelease": "6.18.6-200.fc43.x86_64\n",
    "sys/module/ttm/initstate": "live\n",  # ttm is a module (built in, it has no initstate)
    "etc/os-release": 'NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\n',
    "proc/self/environ": "PATH=/usr/bin\0HOME=/home/u\0",
    "var/lib/dpkg/status": "Package: bash\nStatus: install ok installed\nVersion: 5.2\n\n"
    "Package: linux-firmware\nStatus: install ok installed\nVersion: 20260110.git1-0ubuntu1\n",
    "dev/kfd": "",
    "dev/dri/renderD128": "",
}  # fmt: skip
GOOD_LINES = [
    "ok    gpu-target: node 1 gfx1151 (110501), a target of this set (gfx1151)",
    "ok    hsa-override: HSA_OVERRIDE_GFX_VERSION is not set",
    "ok    device-access: /dev/kfd, /dev/dri/renderD128 readable and writable",
    "ok    gpu-memory: the GPU reaches 4.0 GiB VRAM + 96.0 GiB GTT of MemTotal 124.0 GiB",
    "ok    kernel: 6.18.6-200.fc43.x86_64",
    "ok    firmware: linux-firmware 20260110.git1-0ubuntu1",
]
UNSET = "unset HSA_OVERRIDE_GFX_VERSION (and remove it from ~/.bashrc, /etc/environment or the service's unit)"
OVERRIDE_SOURCE = (
    "https://github.com/ROCm/TheRock/issues/1719 (the override poses the GPU as another gfx); "
    "https://github.com/ROCm/ROCR-Runtime (libhsakmt/src/topology.c: HSA_OVERRIDE_GFX_VERSION_<node>, then HSA_OVERRIDE_GFX_VERSION)"
)
MEMORY_SOURCE = (
    "https://rocm.docs.amd.com/en/latest/how-to/system-optimization/strixhalo.html (GTT is the pool PyTorch allocates from); "
    "https://github.com/ROCm/ROCm/issues/5595 (gttsize is deprecated: ttm.pages_limit caps GTT); "
    "https://mid.mail-archive.com/dri-devel@lists.freedesktop.org/msg593027.html (AMD: a carve-out is never reclaimed; "
    "a modprobe.d file does not reach a ttm built in or loaded from the initramfs)"
)
VISIBLE_SOURCE = (
    "https://github.com/ROCm/ROCR-Runtime (runtime/hsa-runtime/core/runtime/amd_filter_device.cpp: ROCR_VISIBLE_DEVICES); "
    "https://github.com/ROCm/clr (rocclr/device/rocm/rocdevice.cpp: HIP_VISIBLE_DEVICES, else CUDA_VISIBLE_DEVICES)"
)
INVALID_IMAGE = "https://github.com/ROCm/TheRock/issues/7839 (no code for the GPU: hipErrorInvalidImage)"
KFD_SOURCE = "https://github.com/torvalds/linux/blob/master/drivers/gpu/drm/amd/amdkfd/kfd_topology.c (gfx_target_version, drm_render_minor)"
NODES_FIX = "cat /sys/class/kfd/kfd/topology/nodes/*/properties"
TTM_LINE = (
    "echo 'options {m} pages_limit=29255270' | sudo tee /etc/modprobe.d/{m}.conf, `sudo update-initramfs -u` ({m} loads "
    "from the initramfs, which holds a copy of modprobe.d) and reboot; or add {m}.pages_limit=29255270 to the kernel command line instead"
)
GFX1100 = "cpu_cores_count 0\nsimd_count 96\ngfx_target_version 110000\ndrm_render_minor 129\n"  # an RX 7900
CHECKED = "check_box: 0 failure(s), 0 warning(s), {n} note(s): the set can run here as far as this could tell: check the notes by hand."
PASS = "check_box: 0 failure(s), 0 warning(s): the set can run here."


def tree(root: Path, changes: Dict[str, Optional[str]]) -> Path:
    """The good Strix Halo with `changes` (a path to None removes it)."""
    for relative, text in {**GOOD, **changes}.items():
        if text is not None:
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            (root / relative).write_text(text)
    return root


def limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def check(root: Path, *args: str, script: Optional[Path] = None, env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
    if script is None:
        script = root.parent / "check_box.py"
        script.write_bytes(script_bytes("check_box.py"))
    start = time.monotonic()
    run = subprocess.run(
        [sys.executable, str(script), "--root", str(root), *args], capture_output=True, text=True, preexec_fn=limited,
        timeout=SECONDS, env=env,
    )  # fmt: skip
    assert time.monotonic() - start < SECONDS
    assert "Traceback" not in run.stderr, run.stderr
    return run


def lines(run: subprocess.CompletedProcess) -> list:
    return run.stdout.splitlines()


def test_a_good_strix_halo_passes(tmp_path: Path) -> None:
    run = check(tree(tmp_path / "root", {}), "--gpu-targets", "gfx1151")
    assert (run.returncode, lines(run), run.stderr) == (0, [*GOOD_LINES, PASS], "")


def test_no_kfd_fails_with_the_fix(tmp_path: Path) -> None:
    run = check(tree(tmp_path / "root", {"dev/kfd": None}), "--gpu-targets", "gfx1151")
    assert run.returncode == 1
    assert lines(run) == [
        *GOOD_LINES[:2],
        "FAIL  device-access: /dev/kfd does not exist: the runtime opens it to reach the GPU",
        "      source: https://github.com/ROCm/ROCT-Thunk-Interface#readme (/dev/kfd and the render node: groups render, video)",
        "      fix:    load amdgpu (`sudo modprobe amdgpu`); in a container pass `--device /dev/kfd --device /dev/dri`",
        *GOOD_LINES[3:],
        "check_box: 1 failure(s), 0 warning(s): fix the failures before running the set.",
    ]


def test_another_gpu_fails_naming_it(tmp_path: Path) -> None:
    node = "cpu_cores_count 0\nsimd_count 96\ngfx_target_version 110000\ndrm_render_minor 128\n"  # a gfx1100 (RX 7900)
    run = check(tree(tmp_path / "root", {"sys/class/kfd/kfd/topology/nodes/1/properties": node}), "--gpu-targets", "gfx1151")
    assert run.returncode == 1
    assert lines(run) == [
        "FAIL  gpu-target: node 1 gfx1100 (110000): none is a target of this set (gfx1151); its kernels would fail with hipErrorInvalidImage",
        "      source: https://github.com/ROCm/TheRock/issues/7839 (no code for the GPU: hipErrorInvalidImage)",
        '      fix:    build the set for this GPU (`gpu_targets=["gfx1100"]` on the chain\'s rocm_wheel targets) or run it on a gfx1151 machine',
        GOOD_LINES[1],
        "ok    device-access: /dev/kfd readable and writable",
        *GOOD_LINES[4:],
        "check_box: 1 failure(s), 0 warning(s): fix the failures before running the set.",
    ]


def test_a_second_gpu_is_a_warning_with_the_devices_to_keep(tmp_path: Path) -> None:
    node = "cpu_cores_count 0\nsimd_count 416\ngfx_target_version 90010\ndrm_render_minor 129\n"  # an MI210: hex digits in the name
    run = check(tree(tmp_path / "root", {"sys/class/kfd/kfd/topology/nodes/2/properties": node}), "--gpu-targets", "gfx1151")
    assert (run.returncode, lines(run)[:3]) == (0, [
        "WARN  gpu-target: node 1 gfx1151 (110501), node 2 gfx90a (90010): node 2 gfx90a is not a target of this set "
        "(gfx1151); work placed there fails with hipErrorInvalidImage",
        "      source: https://github.com/ROCm/TheRock/issues/7839 (no code for the GPU: hipErrorInvalidImage)",
        "      fix:    export ROCR_VISIBLE_DEVICES=0",
    ])  # fmt: skip
    assert lines(run)[-1] == "check_box: 0 failure(s), 1 warning(s): the set can run here."


def test_the_override_set_fails(tmp_path: Path) -> None:
    environ = "PATH=/usr/bin\0HSA_OVERRIDE_GFX_VERSION=11.0.0\0"
    run = check(tree(tmp_path / "root", {"proc/self/environ": environ}), "--gpu-targets", "gfx1151")
    assert run.returncode == 1
    assert lines(run) == [
        GOOD_LINES[0],
        "FAIL  hsa-override: HSA_OVERRIDE_GFX_VERSION=11.0.0 poses node 1 gfx1151 as gfx1100: the runtime then loads "
        "code for gfx1100, not the GPU's own (hipErrorInvalidImage or wrong kernels)",
        f"      source: {OVERRIDE_SOURCE}",
        f"      fix:    {UNSET}",
        *GOOD_LINES[2:],
        "check_box: 1 failure(s), 0 warning(s): fix the failures before running the set.",
    ]


def test_an_override_to_what_the_gpu_is_warns(tmp_path: Path) -> None:
    run = check(tree(tmp_path / "root", {"proc/self/environ": "HSA_OVERRIDE_GFX_VERSION=11.5.1\0"}), "--gpu-targets", "gfx1151")
    assert (run.returncode, lines(run)[1:4]) == (0, [
        "WARN  hsa-override: HSA_OVERRIDE_GFX_VERSION=11.5.1 poses node 1 gfx1151 as gfx1151, what it already is: it does "
        "nothing here but would mask another GPU",
        f"      source: {OVERRIDE_SOURCE}",
        f"      fix:    {UNSET}",
    ])  # fmt: skip


def test_a_small_gtt_warns_with_the_ttm_line(tmp_path: Path) -> None:
    # The kernel's default: TTM's limit and so GTT at half of the memory (62 GiB of 124).
    changes = {"sys/class/drm/renderD128/device/mem_info_gtt_total": f"{62 * GIB}\n", "sys/module/ttm/parameters/pages_limit": f"{62 * GIB // 4096}\n"}
    run = check(tree(tmp_path / "root", changes), "--gpu-targets", "gfx1151")
    assert run.returncode == 0
    assert lines(run) == [
        *GOOD_LINES[:3],
        "WARN  gpu-memory: the GPU reaches 4.0 GiB VRAM + 62.0 GiB GTT of MemTotal 124.0 GiB: GTT is at or below the "
        "kernel's default, half of memory",
        f"      source: {MEMORY_SOURCE}",
        f"      fix:    {TTM_LINE.format(m='ttm')}",
        *GOOD_LINES[4:],
        "check_box: 0 failure(s), 1 warning(s): the set can run here.",
    ]


def test_a_gtt_past_the_ttm_limit_is_one_warning_with_one_value(tmp_path: Path) -> None:
    # amdgpu.gttsize raised without ttm.pages_limit (amdgpu-dkms: amdttm's): GTT says 120 GiB, TTM
    # allows its default, 62. One finding, one value in one file (it was two, of two values).
    changes = {
        "sys/class/drm/renderD128/device/mem_info_gtt_total": f"{120 * GIB}\n",
        "sys/module/ttm/parameters/pages_limit": None,
        "sys/module/amdttm/parameters/pages_limit": f"{62 * GIB // 4096}\n",
    }
    run = check(tree(tmp_path / "root", changes), "--gpu-targets", "gfx1151")
    assert (run.returncode, lines(run)[3:]) == (0, [
        "WARN  gpu-memory: the GPU reaches 4.0 GiB VRAM + 62.0 GiB GTT of MemTotal 124.0 GiB: amdgpu reports 120.0 GiB of "
        "GTT but amdttm.pages_limit allows 62.0 GiB: GTT is at or below the kernel's default, half of memory",
        f"      source: {MEMORY_SOURCE}",
        f"      fix:    {TTM_LINE.format(m='amdttm')}, and drop amdgpu.gttsize (deprecated: TTM caps GTT)",
        *GOOD_LINES[4:],
        "check_box: 0 failure(s), 1 warning(s): the set can run here.",
    ])  # fmt: skip


def test_an_old_kernel_warns(tmp_path: Path) -> None:
    run = check(tree(tmp_path / "root", {"proc/sys/kernel/osrelease": "6.14.0-1014-oem\n"}), "--gpu-targets", "gfx1151")
    assert run.returncode == 0
    assert lines(run) == [
        *GOOD_LINES[:4],
        "WARN  kernel: 6.14.0-1014-oem: gfx1151 needs 6.18.4 (older kernels are unstable under AI workloads on it; a "
        "distribution may have backported the fix)",
        "      source: https://github.com/kyuz0/amd-strix-halo-toolboxes#readme (kernel vs ROCm matrix; issue #45)",
        "      fix:    install a kernel >= 6.18.4 (your distribution's, or its mainline/HWE kernel) and reboot into it",
        GOOD_LINES[5],
        "check_box: 0 failure(s), 1 warning(s): the set can run here.",
    ]


def test_the_bad_firmware_fails_and_an_unreadable_one_is_a_note(tmp_path: Path) -> None:
    # Arch: pacman's local database, as `pacman -Q` reads it; the fix rebuilds Arch's initramfs.
    pacman = "%NAME%\nlinux-firmware-amdgpu\n\n%VERSION%\n20251125.abc-1\n\n"
    arch = {"etc/os-release": "ID=arch\n", "var/lib/dpkg/status": None, "var/lib/pacman/local/linux-firmware-amdgpu-20251125.abc-1/desc": pacman}
    run = check(tree(tmp_path / "bad", arch), "--gpu-targets", "gfx1151")
    assert (run.returncode, lines(run)[5:8]) == (1, [
        "FAIL  firmware: linux-firmware-amdgpu 20251125.abc-1: 20251125 breaks ROCm on Strix Halo (instability, crashes)",
        "      source: https://github.com/kyuz0/amd-strix-halo-toolboxes/blob/main/docs/troubleshooting-firmware.md",
        "      fix:    install linux-firmware 20260110 or newer (or downgrade to 20251111), then `sudo mkinitcpio -P` and reboot",
    ])  # fmt: skip
    # Fedora without rpm on the PATH: a note whose fix is rpm's own query (Debian's is dpkg's, below).
    fedora = {"etc/os-release": 'ID=fedora\nVERSION_ID=43\n', "var/lib/dpkg/status": None}
    (tmp_path / "bin").mkdir()
    unknown = check(tree(tmp_path / "rpm" / "root", fedora), "--gpu-targets", "gfx1151", env={"PATH": str(tmp_path / "bin")})
    assert (unknown.returncode, lines(unknown)[5:]) == (0, [
        "note  firmware: no linux-firmware version readable here (rpm is not here to ask): 20251125 breaks ROCm on Strix Halo",
        "      source: https://github.com/kyuz0/amd-strix-halo-toolboxes/blob/main/docs/troubleshooting-firmware.md",
        "      fix:    rpm -q linux-firmware amd-gpu-firmware kernel-firmware-amdgpu: it must not be 20251125",
        CHECKED.format(n=1),
    ])  # fmt: skip
    debian = check(tree(tmp_path / "deb" / "root", {"etc/os-release": "ID=debian\n", "var/lib/dpkg/status": "Package: bash\n"}), "--gpu-targets", "gfx1151")
    assert lines(debian)[5:8] == [
        "note  firmware: no linux-firmware version readable here (dpkg knows none of linux-firmware, firmware-amd-graphics): 20251125 "
        "breaks ROCm on Strix Halo",
        "      source: https://github.com/kyuz0/amd-strix-halo-toolboxes/blob/main/docs/troubleshooting-firmware.md",
        "      fix:    dpkg -s linux-firmware firmware-amd-graphics: it must not be 20251125",
    ]


def test_a_device_the_user_cannot_open_fails() -> None:
    # A real second user (nobody, through util-linux's setpriv) against a /dev/kfd only root may open.
    base = Path(tempfile.mkdtemp(prefix="check_box-"))
    try:
        root = tree(base / "root", {})
        (root / "dev/kfd").chmod(0o600)
        for path in (base, *(p for p in base.rglob("*") if p.is_dir())):
            path.chmod(0o755)
        for path in (p for p in base.rglob("*") if p.is_file() and p.name != "kfd"):
            path.chmod(0o666 if path.name.startswith("renderD") else 0o644)
        script = base / "check_box.py"
        script.write_bytes(script_bytes("check_box.py"))
        script.chmod(0o644)
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", str(script), "--root", str(root), "--gpu-targets", "gfx1151"]
        run = subprocess.run(argv, capture_output=True, text=True)
        assert (run.returncode, lines(run)[2:5]) == (1, [
            "FAIL  device-access: /dev/kfd is not readable and writable by this user (the runtime opens it read-write)",
            "      source: https://github.com/ROCm/ROCT-Thunk-Interface#readme (/dev/kfd and the render node: groups render, video)",
            '      fix:    sudo usermod -aG render,video "$USER", then log in again (in a container: `--group-add render --group-add video`)',
        ]), run.stderr  # fmt: skip
    finally:
        shutil.rmtree(base)


def test_the_gpu_targets_come_from_the_install_set_beside_it(tmp_path: Path) -> None:
    install = tmp_path / "set"
    install.mkdir()
    script = install / "check_box.py"
    script.write_bytes(script_bytes("check_box.py"))
    root = tree(tmp_path / "root", {})
    missing = check(root, script=script)
    assert (missing.returncode, missing.stdout, missing.stderr) == (
        2, "", "check_box: no gpu targets: pass --gpu-targets gfx1151 or keep install_set.json beside this script\n",
    )  # fmt: skip
    (install / "install_set.json").write_text(json.dumps({"target": "components/vllm:wheel", "gpu_targets": ["gfx1100"]}))
    run = check(root, script=script)
    assert (run.returncode, lines(run)[0]) == (1, (
        "FAIL  gpu-target: node 1 gfx1151 (110501): none is a target of this set (gfx1100); its kernels would fail with hipErrorInvalidImage"
    ))  # fmt: skip


def test_this_machine_has_no_gpu(tmp_path: Path) -> None:
    # The real root: no /sys/class/kfd and no /dev/kfd on the machines this repository's tests run on.
    assert not Path("/dev/kfd").exists(), "this test expects a machine without a GPU"
    script = tmp_path / "check_box.py"
    script.write_bytes(script_bytes("check_box.py"))
    run = subprocess.run([sys.executable, str(script), "--gpu-targets", "gfx1151"], capture_output=True, text=True, env={**os.environ})
    assert run.returncode == 1
    assert lines(run)[:3] == [
        "FAIL  gpu-target: no GPU: /sys/class/kfd/kfd/topology/nodes has no node with a gfx_target_version (amdgpu's "
        "KFD is not loaded, or this is not the box)",
        "      source: https://github.com/torvalds/linux/blob/master/drivers/gpu/drm/amd/amdkfd/kfd_topology.c (gfx_target_version, drm_render_minor)",
        "      fix:    run this on the gfx1151 machine with amdgpu loaded (`sudo modprobe amdgpu`; in a container: "
        "`--device /dev/kfd --device /dev/dri`)",
    ]
    assert "FAIL  device-access: /dev/kfd does not exist: the runtime opens it to reach the GPU" in lines(run)
    assert lines(run)[-1].startswith("check_box: 2 failure(s)")


# -- what the box holds is not ours: bounded reads, every value parsed into a finding ------------

NODE1 = "sys/class/kfd/kfd/topology/nodes/1/properties"


@pytest.mark.parametrize("value", ["gfx1151", "110501 0", "0x1afa5"])
def test_a_gfx_target_version_that_is_no_number_is_a_note(tmp_path: Path, value: str) -> None:
    node = f"cpu_cores_count 0\nsimd_count 80\ngfx_target_version {value}\ndrm_render_minor 128\n"
    run = check(tree(tmp_path / "root", {NODE1: node}), "--gpu-targets", "gfx1151")
    assert (run.returncode, lines(run)[:8]) == (0, [
        f"note  gpu-target: gfx_target_version of /{NODE1} is {value}: not a decimal number",
        f"      source: {KFD_SOURCE}",
        f"      fix:    {NODES_FIX}",
        "note  gpu-target: node 1 (gfx unknown): whether node 1 (gfx unknown) is a target of this set (gfx1151) cannot be "
        "told: its gfx_target_version is unreadable (the note above)",
        f"      source: {KFD_SOURCE}",
        f"      fix:    {NODES_FIX}",
        GOOD_LINES[1],
        "ok    device-access: /dev/kfd readable and writable",
    ])  # fmt: skip
    assert lines(run)[-1] == CHECKED.format(n=2)


def test_a_properties_file_of_three_gibibytes_is_not_read(tmp_path: Path) -> None:
    root = tree(tmp_path / "root", {})
    os.truncate(root / NODE1, 3 * GIB)  # sparse: no disk, and 3 GiB to whoever reads it whole
    run = check(root, "--gpu-targets", "gfx1151")
    assert lines(run)[:3] == [
        f"note  gpu-target: /{NODE1} is larger than 64 KiB, more than such a file holds: it is not read",
        f"      source: {KFD_SOURCE}",
        f"      fix:    look at /{NODE1} by hand (`ls -l /{NODE1}`)",
    ]
    assert lines(run)[3] == GOOD_LINES[1]  # no verdict on the GPU from a file not read


def test_a_properties_fifo_is_not_opened(tmp_path: Path) -> None:
    root = tree(tmp_path / "root", {NODE1: None})
    (root / NODE1).parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(root / NODE1)  # reading it would wait for a writer forever
    run = check(root, "--gpu-targets", "gfx1151")
    assert lines(run)[:3] == [
        f"note  gpu-target: /{NODE1} is a FIFO, not a regular file: it is not read",
        f"      source: {KFD_SOURCE}",
        f"      fix:    look at /{NODE1} by hand (`ls -l /{NODE1}`)",
    ]


def test_a_topology_the_user_cannot_list_is_a_note_not_a_missing_gpu() -> None:
    # nobody (setpriv) against a topology directory only root may list.
    base = Path(tempfile.mkdtemp(prefix="check_box-"))
    try:
        root = tree(base / "root", {})
        for path in (base, *(p for p in base.rglob("*") if p.is_dir())):
            path.chmod(0o755)
        for path in (p for p in base.rglob("*") if p.is_file()):
            path.chmod(0o666)
        (root / "sys/class/kfd/kfd/topology/nodes").chmod(0o700)
        script = base / "check_box.py"
        script.write_bytes(script_bytes("check_box.py"))
        script.chmod(0o644)
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", str(script), "--root", str(root), "--gpu-targets", "gfx1151"]
        run = subprocess.run(argv, capture_output=True, text=True, timeout=SECONDS, preexec_fn=limited)
        assert (run.returncode, lines(run)[:4], run.stderr) == (0, [
            "note  gpu-target: /sys/class/kfd/kfd/topology/nodes cannot be listed (Permission denied): its GPUs are unknown",
            f"      source: {KFD_SOURCE}",
            "      fix:    ls -l /sys/class/kfd/kfd/topology/nodes",
            GOOD_LINES[1],
        ], "")  # fmt: skip
    finally:
        shutil.rmtree(base)


SET_CASES = {
    "gpu_targets null": ({"gpu_targets": None}, "`gpu_targets` of {path} is null, not a list of gfx names such as [\"gfx1151\"]"),
    "gpu_targets [1151]": ({"gpu_targets": [1151]}, "entry 0 of `gpu_targets` of {path} is 1151, not a gfx name such as \"gfx1151\""),
    "gpu_targets a string": ({"gpu_targets": "gfx1151"}, "`gpu_targets` of {path} is a str, not a list of gfx names such as [\"gfx1151\"]"),
    "a list": (["gfx1151"], "{path} is list, not an object with `gpu_targets`"),
    "nested past the parser": ("[" * 30_000 + "]" * 30_000, "{path} is not JSON as this reads it (it nests deeper than Python's parser goes)"),
    "not JSON": ("{gpu_targets: []}", "{path} is not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"),
    "larger than 64 KiB": (" " * 70_000 + "{}", "{path} is larger than 64 KiB, more than such a file holds"),
}  # fmt: skip


@pytest.mark.parametrize("content, why", SET_CASES.values(), ids=SET_CASES.keys())
def test_an_install_set_json_of_the_wrong_shape_is_refused_naming_it(tmp_path: Path, content, why: str) -> None:
    install = tmp_path / "set"
    install.mkdir()
    script = install / "check_box.py"
    script.write_bytes(script_bytes("check_box.py"))
    (install / "install_set.json").write_text(content if isinstance(content, str) else json.dumps(content))
    run = check(tree(tmp_path / "root", {}), script=script)
    path = install / "install_set.json"
    assert (run.returncode, run.stdout, run.stderr) == (
        2, "", f"check_box: {why.format(path=path)}: pass --gpu-targets gfx1151 or keep install_set.json beside this script\n",
    )  # fmt: skip


def test_gpu_targets_are_read_as_a_list_with_spaces(tmp_path: Path) -> None:
    run = check(tree(tmp_path / "root", {}), "--gpu-targets", "gfx1151, gfx1100")
    assert lines(run)[0] == "ok    gpu-target: node 1 gfx1151 (110501), a target of this set (gfx1151, gfx1100)"
    wrong = check(tree(tmp_path / "root", {}), "--gpu-targets", "gfx1151,1100")
    assert (wrong.returncode, wrong.stderr) == (
        2, "check_box: --gpu-targets: 1100 is not a gfx name such as gfx1151: pass --gpu-targets gfx1151 or keep install_set.json beside this script\n"
    )  # fmt: skip


# -- the variables that choose the GPUs the runtime sees, and pose them ---------------------------

TWO_GPUS = {  # a discrete gfx1100 at node 1 (ROCr's GPU 0) and the Strix Halo at node 2 (GPU 1)
    NODE1: GFX1100,
    "sys/class/kfd/kfd/topology/nodes/2/properties": "cpu_cores_count 0\nsimd_count 80\ngfx_target_version 110501\ndrm_render_minor 128\nunique_id 1311768467463790320\n",
}


def environ(**variables: str) -> Dict[str, str]:
    return {"proc/self/environ": "PATH=/usr/bin\0" + "".join(f"{k}={v}\0" for k, v in variables.items())}


def test_rocr_visible_devices_hiding_the_target_behind_another_gpu_fails(tmp_path: Path) -> None:
    run = check(tree(tmp_path / "root", {**TWO_GPUS, **environ(ROCR_VISIBLE_DEVICES="0")}), "--gpu-targets", "gfx1151")
    assert (run.returncode, lines(run)[:3]) == (1, [
        "FAIL  gpu-target: node 1 gfx1100 (110000), node 2 gfx1151 (110501): ROCR_VISIBLE_DEVICES=0 leaves node 1 gfx1100: "
        "none the runtime sees is a target of this set (gfx1151); its kernels would fail with hipErrorInvalidImage",
        f"      source: {INVALID_IMAGE}; {VISIBLE_SOURCE}",
        "      fix:    export ROCR_VISIBLE_DEVICES=1",
    ])  # fmt: skip
    # The GPU's UUID names it as well as its index; the list stops at an entry that names none.
    uuid = check(tree(tmp_path / "uuid", {**TWO_GPUS, **environ(ROCR_VISIBLE_DEVICES="gpu-12345678,0")}), "--gpu-targets", "gfx1151")
    assert lines(uuid)[0] == (
        "WARN  gpu-target: node 1 gfx1100 (110000), node 2 gfx1151 (110501): ROCR_VISIBLE_DEVICES=gpu-12345678,0 leaves "
        "node 2 gfx1151, node 1 gfx1100: node 1 gfx1100 is not a target of this set (gfx1151); work placed there fails with "
        "hipErrorInvalidImage"
    )
    stops = check(tree(tmp_path / "stops", {**TWO_GPUS, **environ(ROCR_VISIBLE_DEVICES="1,7,0")}), "--gpu-targets", "gfx1151")
    assert lines(stops)[0] == (
        "ok    gpu-target: node 1 gfx1100 (110000), node 2 gfx1151 (110501): ROCR_VISIBLE_DEVICES=1,7,0 leaves node 2 gfx1151 "
        "(ROCr stops at its entry 7 (there are 2 GPU(s), 0 to 1)), a target of this set (gfx1151)"
    )


def test_hip_visible_devices_past_the_gpus_leaves_none(tmp_path: Path) -> None:
    run = check(tree(tmp_path / "root", environ(HIP_VISIBLE_DEVICES="1")), "--gpu-targets", "gfx1151")
    assert (run.returncode, lines(run)[:3]) == (1, [
        "FAIL  gpu-target: node 1 gfx1151 (110501): HIP_VISIBLE_DEVICES=1 leaves no GPU (HIP stops at its entry 1 (the "
        "runtime shows 1 GPU(s), 0 to 0)): the runtime sees no GPU",
        f"      source: {VISIBLE_SOURCE}",
        "      fix:    unset HIP_VISIBLE_DEVICES; export ROCR_VISIBLE_DEVICES=0",
    ])  # fmt: skip
    # HIP reads CUDA_VISIBLE_DEVICES where HIP_VISIBLE_DEVICES is empty, indexing what ROCr shows.
    cuda = check(tree(tmp_path / "cuda", {**TWO_GPUS, **environ(ROCR_VISIBLE_DEVICES="1,0", HIP_VISIBLE_DEVICES="", CUDA_VISIBLE_DEVICES="1")}), "--gpu-targets", "gfx1151")
    assert lines(cuda)[:3] == [
        "FAIL  gpu-target: node 1 gfx1100 (110000), node 2 gfx1151 (110501): ROCR_VISIBLE_DEVICES=1,0 leaves node 2 gfx1151, "
        "node 1 gfx1100; CUDA_VISIBLE_DEVICES=1 leaves node 1 gfx1100: none the runtime sees is a target of this set "
        "(gfx1151); its kernels would fail with hipErrorInvalidImage",
        f"      source: {INVALID_IMAGE}; {VISIBLE_SOURCE}",
        "      fix:    unset CUDA_VISIBLE_DEVICES; export ROCR_VISIBLE_DEVICES=1",
    ]


def test_the_per_node_override_is_read_first(tmp_path: Path) -> None:
    env = environ(HSA_OVERRIDE_GFX_VERSION_1="11.0.0", HSA_OVERRIDE_GFX_VERSION="11.5.1")
    run = check(tree(tmp_path / "root", env), "--gpu-targets", "gfx1151")
    assert (run.returncode, lines(run)[1:4]) == (1, [
        "FAIL  hsa-override: HSA_OVERRIDE_GFX_VERSION_1=11.0.0 poses node 1 gfx1151 as gfx1100: the runtime then loads "
        "code for gfx1100, not the GPU's own (hipErrorInvalidImage or wrong kernels)",
        f"      source: {OVERRIDE_SOURCE}",
        "      fix:    unset HSA_OVERRIDE_GFX_VERSION HSA_OVERRIDE_GFX_VERSION_1 (and remove it from ~/.bashrc, "
        "/etc/environment or the service's unit)",
    ])  # fmt: skip
    other = check(tree(tmp_path / "other", environ(HSA_OVERRIDE_GFX_VERSION_0="11.0.0")), "--gpu-targets", "gfx1151")
    assert lines(other)[1] == (
        "WARN  hsa-override: HSA_OVERRIDE_GFX_VERSION_0=11.0.0 names no GPU node (KFD node 0): it does nothing here but "
        "would mask another GPU"
    )


def test_an_override_to_the_target_poses_the_other_gpu(tmp_path: Path) -> None:
    run = check(tree(tmp_path / "root", {**TWO_GPUS, **environ(HSA_OVERRIDE_GFX_VERSION="11.5.1")}), "--gpu-targets", "gfx1151")
    assert (run.returncode, lines(run)[3:6]) == (1, [
        "FAIL  hsa-override: HSA_OVERRIDE_GFX_VERSION=11.5.1 poses node 1 gfx1100 as gfx1151: the runtime then loads code "
        "for gfx1151, not the GPU's own (hipErrorInvalidImage or wrong kernels)",
        f"      source: {OVERRIDE_SOURCE}",
        f"      fix:    {UNSET}",
    ])  # fmt: skip
    # With the gfx1100 hidden, the same override poses only what the gfx1151 already is.
    hidden = check(tree(tmp_path / "hidden", {**TWO_GPUS, **environ(HSA_OVERRIDE_GFX_VERSION="11.5.1", ROCR_VISIBLE_DEVICES="1")}), "--gpu-targets", "gfx1151")
    assert lines(hidden)[1] == (
        "WARN  hsa-override: HSA_OVERRIDE_GFX_VERSION=11.5.1 poses node 1 gfx1100, which the runtime does not show; "
        "HSA_OVERRIDE_GFX_VERSION=11.5.1 poses node 2 gfx1151 as gfx1151, what it already is: it does nothing here but "
        "would mask another GPU"
    )


@pytest.mark.parametrize("value, why", [
    ("11.5", "not major.minor.stepping"), ("11.5.1 ", "not major.minor.stepping"),
    ("64.0.0", "past what the thunk takes (major at most 63, minor and stepping at most 255)"),
])  # fmt: skip
def test_an_override_the_thunk_refuses_fails(tmp_path: Path, value: str, why: str) -> None:
    run = check(tree(tmp_path / "root", environ(HSA_OVERRIDE_GFX_VERSION=value)), "--gpu-targets", "gfx1151")
    shown = value if value.isprintable() else repr(value)
    assert (run.returncode, lines(run)[1]) == (1, (
        f"FAIL  hsa-override: HSA_OVERRIDE_GFX_VERSION={shown} is {why} as ROCm's thunk reads it: it refuses the topology, "
        "and the runtime starts no GPU"
    ))  # fmt: skip


# -- one memory recommendation ------------------------------------------------------------------


def test_a_large_carve_out_is_to_be_lowered_not_outgrown(tmp_path: Path) -> None:
    # 96 GiB of VRAM carved out of 128: Linux has 29.6 GiB; TTM at its default gives half of it.
    changes = {
        "sys/class/drm/renderD128/device/mem_info_vram_total": f"{96 * GIB}\n",
        "sys/class/drm/renderD128/device/mem_info_gtt_total": f"{int(14.8 * GIB)}\n",
        "sys/module/ttm/parameters/pages_limit": f"{int(14.8 * GIB) // 4096}\n",
        "proc/meminfo": f"MemTotal:       {int(29.6 * GIB) // 1024} kB\n",
    }
    run = check(tree(tmp_path / "root", changes), "--gpu-targets", "gfx1151")
    assert (run.returncode, lines(run)[3:6]) == (0, [
        "WARN  gpu-memory: the GPU reaches 96.0 GiB VRAM + 14.8 GiB GTT of MemTotal 29.6 GiB: the VRAM carve-out keeps more "
        "than it leaves Linux, and is never given back; GTT taken from the 29.6 GiB left would starve the system",
        f"      source: {MEMORY_SOURCE}",
        "      fix:    lower the VRAM carve-out (UMA frame buffer size) in the firmware setup to its smallest and reboot: the "
        "memory returns to Linux and the GPU reaches it as GTT; then run this check again for the TTM limit",
    ])  # fmt: skip


def test_a_ttm_built_into_the_kernel_takes_the_kernel_parameter(tmp_path: Path) -> None:
    changes = {
        "sys/class/drm/renderD128/device/mem_info_gtt_total": f"{62 * GIB}\n",
        "sys/module/ttm/parameters/pages_limit": f"{62 * GIB // 4096}\n",
        "sys/module/ttm/initstate": None,
        "etc/os-release": "ID=fedora\n",
    }
    run = check(tree(tmp_path / "root", changes), "--gpu-targets", "gfx1151")
    assert lines(run)[5] == (
        "      fix:    add ttm.pages_limit=29255270 to the kernel command line and reboot (ttm is built into this kernel: no "
        "modprobe.d file reaches it)"
    )
    module = check(tree(tmp_path / "module", {**changes, "sys/module/ttm/initstate": "live\n"}), "--gpu-targets", "gfx1151")
    assert lines(module)[5] == f"      fix:    {TTM_LINE.format(m='ttm').replace('sudo update-initramfs -u', 'sudo dracut -f')}"


def test_an_unknown_kernel_version_is_a_note(tmp_path: Path) -> None:
    for release, found in (("", "/proc/sys/kernel/osrelease says nothing: the kernel's version is unknown"),
                           ("linux-next\n", "/proc/sys/kernel/osrelease is linux-next: not a kernel version (major.minor[.patch])")):  # fmt: skip
        run = check(tree(tmp_path / f"root{len(release)}", {"proc/sys/kernel/osrelease": release}), "--gpu-targets", "gfx1151")
        assert lines(run)[4:7] == [
            f"note  kernel: {found}",
            "      source: https://github.com/kyuz0/amd-strix-halo-toolboxes#readme (kernel vs ROCm matrix; issue #45)",
            "      fix:    uname -r: gfx1151 needs 6.18.4",
        ]
