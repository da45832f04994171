"""check_box.py, the install set's check of the machine, run as a user runs it (a process) on
fixture trees of /sys, /proc and /dev built here, and once on this machine's own root."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, Optional

from rocm_build.script_modules import script_bytes

GIB = 1 << 30
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
PASS = "check_box: 0 failure(s), 0 warning(s): the set can run here."


def tree(root: Path, changes: Dict[str, Optional[str]]) -> Path:
    """The good Strix Halo with `changes` (a path to None removes it)."""
    for relative, text in {**GOOD, **changes}.items():
        if text is not None:
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            (root / relative).write_text(text)
    return root


def check(root: Path, *args: str, script: Optional[Path] = None) -> subprocess.CompletedProcess:
    if script is None:
        script = root.parent / "check_box.py"
        script.write_bytes(script_bytes("check_box.py"))
    return subprocess.run([sys.executable, str(script), "--root", str(root), *args], capture_output=True, text=True)


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
        "FAIL  hsa-override: HSA_OVERRIDE_GFX_VERSION=11.0.0 poses the GPU (gfx1151) as gfx1100: the runtime then loads "
        "code for that gfx, not this set's (hipErrorInvalidImage or wrong kernels)",
        "      source: https://github.com/ROCm/TheRock/issues/1719 (the override poses the GPU as another gfx)",
        f"      fix:    {UNSET}",
        *GOOD_LINES[2:],
        "check_box: 1 failure(s), 0 warning(s): fix the failures before running the set.",
    ]


def test_an_override_to_what_the_gpu_is_warns(tmp_path: Path) -> None:
    run = check(tree(tmp_path / "root", {"proc/self/environ": "HSA_OVERRIDE_GFX_VERSION=11.5.1\0"}), "--gpu-targets", "gfx1151")
    assert (run.returncode, lines(run)[1:4]) == (0, [
        "WARN  hsa-override: HSA_OVERRIDE_GFX_VERSION=11.5.1 poses the GPU as gfx1151, what it already is: it does "
        "nothing here but would mask another GPU",
        "      source: https://github.com/ROCm/TheRock/issues/1719 (the override poses the GPU as another gfx)",
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
        "      source: https://rocm.docs.amd.com/en/latest/how-to/system-optimization/strixhalo.html (GTT is the pool PyTorch allocates from)",
        "      fix:    echo 'options ttm pages_limit=29255270' | sudo tee /etc/modprobe.d/ttm.conf, then reboot (or "
        "`amd-ttm --set 111` from amd-debug-tools)",
        *GOOD_LINES[4:],
        "check_box: 0 failure(s), 1 warning(s): the set can run here.",
    ]


def test_a_gtt_past_the_ttm_limit_warns(tmp_path: Path) -> None:
    # amdgpu.gttsize raised without ttm.pages_limit (amdgpu-dkms: amdttm's): GTT says 120 GiB, TTM allows 62.
    changes = {
        "sys/class/drm/renderD128/device/mem_info_gtt_total": f"{120 * GIB}\n",
        "sys/module/ttm/parameters/pages_limit": None,
        "sys/module/amdttm/parameters/pages_limit": f"{62 * GIB // 4096}\n",
    }
    run = check(tree(tmp_path / "root", changes), "--gpu-targets", "gfx1151")
    assert (run.returncode, lines(run)[3:6]) == (0, [
        "WARN  ttm-limit: amdgpu reports 120.0 GiB of GTT but amdttm.pages_limit allows 62.0 GiB: allocations past it fail",
        "      source: https://github.com/ROCm/ROCm/issues/5595 (gttsize is deprecated: ttm.pages_limit caps GTT)",
        "      fix:    echo 'options amdttm pages_limit=31457280' | sudo tee /etc/modprobe.d/ttm.conf, then reboot (and drop amdgpu.gttsize)",
    ])  # fmt: skip
    assert lines(run)[6].startswith("WARN  gpu-memory: the GPU reaches 4.0 GiB VRAM + 62.0 GiB GTT of MemTotal 124.0 GiB")


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
    pacman = "%NAME%\nlinux-firmware-amdgpu\n\n%VERSION%\n20251125.abc-1\n\n"
    bad = tree(tmp_path / "bad", {"var/lib/dpkg/status": None, "var/lib/pacman/local/linux-firmware-amdgpu-20251125.abc-1/desc": pacman})
    run = check(bad, "--gpu-targets", "gfx1151")
    assert (run.returncode, lines(run)[5:8]) == (1, [
        "FAIL  firmware: linux-firmware-amdgpu 20251125.abc-1: 20251125 breaks ROCm on Strix Halo (instability, crashes)",
        "      source: https://github.com/kyuz0/amd-strix-halo-toolboxes/blob/main/docs/troubleshooting-firmware.md",
        "      fix:    install linux-firmware 20260110 or newer (or downgrade to 20251111), rebuild the initramfs and reboot",
    ])  # fmt: skip
    unknown = check(tree(tmp_path / "rpm" / "root", {"var/lib/dpkg/status": None}), "--gpu-targets", "gfx1151")
    assert (unknown.returncode, lines(unknown)[5:8]) == (0, [
        "note  firmware: no linux-firmware package version readable here (dpkg, pacman): 20251125 breaks ROCm on Strix Halo",
        "      source: https://github.com/kyuz0/amd-strix-halo-toolboxes/blob/main/docs/troubleshooting-firmware.md",
        "      fix:    rpm -q linux-firmware  (or your package manager's query): it must not be 20251125",
    ])  # fmt: skip


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
