#!/usr/bin/env python3
"""Is this machine ready for the install set beside this script? Run it before the first run:

    python3 check_box.py                      # the set's gpu targets, from install_set.json beside it
    python3 check_box.py --gpu-targets gfx1151 --root /path/to/a/copy/of/sys/and/proc

It reads only files any user can read (the KFD topology, /dev, amdgpu's and TTM's sysfs
files, /proc) under `--root` (default `/`; tests point it at fixture trees), and prints one
line a rule; a rule that finds a problem also prints its source and the line that fixes it.
Exit 1 when a rule fails (the set will not run), 0 when only warnings are left (it runs, with
less than the machine has), 2 when it cannot tell which gpu targets the set is for.
Standard library only: it runs before anything of the set is installed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

# The install set's metadata beside this script (rules/rocm_build/install/box_check.py writes it).
SET_METADATA = "install_set.json"
TOPOLOGY = "sys/class/kfd/kfd/topology/nodes"
PAGE = 4096  # TTM counts pages_limit in the kernel's page size, 4 KiB on x86-64
GIB = 1 << 30

# Sources each rule cites (what a user reads to see why).
KFD_TOPOLOGY = "https://github.com/torvalds/linux/blob/master/drivers/gpu/drm/amd/amdkfd/kfd_topology.c (gfx_target_version, drm_render_minor)"
INVALID_IMAGE = "https://github.com/ROCm/TheRock/issues/7839 (no code for the GPU: hipErrorInvalidImage)"
OVERRIDE = "https://github.com/ROCm/TheRock/issues/1719 (the override poses the GPU as another gfx)"
ACCESS = "https://github.com/ROCm/ROCT-Thunk-Interface#readme (/dev/kfd and the render node: groups render, video)"
GTT = "https://rocm.docs.amd.com/en/latest/how-to/system-optimization/strixhalo.html (GTT is the pool PyTorch allocates from)"
TTM = "https://github.com/ROCm/ROCm/issues/5595 (gttsize is deprecated: ttm.pages_limit caps GTT)"
KERNEL = "https://github.com/kyuz0/amd-strix-halo-toolboxes#readme (kernel vs ROCm matrix; issue #45)"
FIRMWARE = "https://github.com/kyuz0/amd-strix-halo-toolboxes/blob/main/docs/troubleshooting-firmware.md"

# gfx1151 (Strix Halo): kernels up to 6.18.3 are unstable under AI workloads, 6.18.4 and later
# need ROCm 7.2+ or TheRock's, which is what this chain is built with (KERNEL above).
KERNEL_MINIMUM = {"gfx1151": (6, 18, 4)}
# linux-firmware 20251125 breaks ROCm on Strix Halo; 20251111 and 20260110 work (FIRMWARE above).
FIRMWARE_BAD = {"gfx1151": ("20251125",)}
FIRMWARE_PACKAGES = ("linux-firmware", "linux-firmware-amdgpu", "firmware-amd-graphics")


@dataclass(frozen=True)
class Finding:
    level: str  # "ok", "note" (could not tell: check by hand), "WARN" or "FAIL"
    rule: str
    found: str
    source: str = ""
    fix: str = ""

    def lines(self) -> List[str]:
        out = [f"{self.level:<5} {self.rule}: {self.found}"]
        if self.level != "ok":
            out += [f"      source: {self.source}", f"      fix:    {self.fix}"]
        return out


@dataclass(frozen=True)
class GpuNode:
    node: str  # the KFD node's directory name
    gfx: str  # gfx1151
    version: int  # gfx_target_version, 110501
    render_minor: int  # /dev/dri/renderD<minor>


class Box:
    """The machine's files, read under a root."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, relative: str) -> Path:
        return self.root / relative.lstrip("/")

    def read(self, relative: str) -> Optional[str]:
        try:
            return self.path(relative).read_text(errors="replace")
        except OSError:
            return None

    def number(self, relative: str) -> Optional[int]:
        text = self.read(relative)
        try:
            return int(text.strip()) if text is not None else None
        except ValueError:
            return None


def gfx_name(version: int) -> str:
    """KFD's gfx_target_version (major*10000 + minor*100 + stepping, decimal) as a gfx name:
    110501 -> gfx1151, 90010 -> gfx90a (minor and stepping are hex digits in the name)."""
    major, minor, stepping = version // 10000, (version // 100) % 100, version % 100
    return f"gfx{major}{minor:x}{stepping:x}"


def override_name(value: str) -> Optional[str]:
    """HSA_OVERRIDE_GFX_VERSION (major.minor.stepping, decimal) as a gfx name, if well formed."""
    parts = value.strip().split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    major, minor, stepping = (int(p) for p in parts)
    return gfx_name(major * 10000 + minor * 100 + stepping)


def properties(text: str) -> Dict[str, str]:
    return dict(line.split(None, 1) for line in text.splitlines() if len(line.split(None, 1)) == 2)


def gpu_nodes(box: Box) -> List[GpuNode]:
    """The KFD nodes that are GPUs (a CPU node has gfx_target_version 0), in node order."""
    nodes = box.path(TOPOLOGY)
    found = []
    names = sorted((p.name for p in nodes.iterdir()), key=lambda n: (not n.isdigit(), int(n) if n.isdigit() else 0, n)) if nodes.is_dir() else []
    for name in names:
        props = properties(box.read(f"{TOPOLOGY}/{name}/properties") or "")
        version = int(props.get("gfx_target_version", "0") or 0)
        if version:
            found.append(GpuNode(name, gfx_name(version), version, int(props.get("drm_render_minor", "-1"))))
    return found


def environment(box: Box) -> Dict[str, str]:
    """This process's environment as the kernel shows it (/proc/self/environ: what the shell
    gave it), so a fixture tree can carry one."""
    try:
        data = box.path("proc/self/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.decode(errors="replace").partition("=") for item in data.split(b"\0") if item)
    return {key: value for key, _, value in pairs}


def check_gpu(box: Box, targets: Sequence[str]) -> List[Finding]:
    rule = "gpu-target"
    nodes = gpu_nodes(box)
    wanted = ", ".join(targets)
    if not nodes:
        where = "/" + TOPOLOGY
        return [Finding(
            "FAIL", rule,
            f"no GPU: {where} has no node with a gfx_target_version (amdgpu's KFD is not loaded, or this is not the box)",
            KFD_TOPOLOGY,
            f"run this on the {wanted} machine with amdgpu loaded (`sudo modprobe amdgpu`; in a container: "
            "`--device /dev/kfd --device /dev/dri`)",
        )]  # fmt: skip
    ours = [n for n in nodes if n.gfx in targets]
    listed = ", ".join(f"node {n.node} {n.gfx} ({n.version})" for n in nodes)
    if not ours:
        return [Finding(
            "FAIL", rule, f"{listed}: none is a target of this set ({wanted}); its kernels would fail with hipErrorInvalidImage",
            INVALID_IMAGE, f"build the set for this GPU (`gpu_targets=[\"{nodes[0].gfx}\"]` on the chain's rocm_wheel targets) or run it on a {wanted} machine",
        )]  # fmt: skip
    if len(ours) < len(nodes):
        # ROCr numbers GPU agents in topology order: keep the ones the set has code for.
        visible = ",".join(str(i) for i, n in enumerate(nodes) if n.gfx in targets)
        others = ", ".join(f"node {n.node} {n.gfx}" for n in nodes if n.gfx not in targets)
        return [Finding(
            "WARN", rule, f"{listed}: {others} is not a target of this set ({wanted}); work placed there fails with hipErrorInvalidImage",
            INVALID_IMAGE, f"export ROCR_VISIBLE_DEVICES={visible}",
        )]  # fmt: skip
    return [Finding("ok", rule, f"{listed}, a target of this set ({wanted})")]


def check_override(box: Box, targets: Sequence[str]) -> List[Finding]:
    rule = "hsa-override"
    value = environment(box).get("HSA_OVERRIDE_GFX_VERSION")
    if value is None:
        return [Finding("ok", rule, "HSA_OVERRIDE_GFX_VERSION is not set")]
    posed = override_name(value)
    actual = ", ".join(n.gfx for n in gpu_nodes(box)) or "no GPU"
    if posed in targets and posed in actual.split(", "):
        return [Finding(
            "WARN", rule, f"HSA_OVERRIDE_GFX_VERSION={value} poses the GPU as {posed}, what it already is: it does nothing here but would mask another GPU",
            OVERRIDE, "unset HSA_OVERRIDE_GFX_VERSION (and remove it from ~/.bashrc, /etc/environment or the service's unit)",
        )]  # fmt: skip
    return [Finding(
        "FAIL", rule, f"HSA_OVERRIDE_GFX_VERSION={value} poses the GPU ({actual}) as {posed or 'an unreadable version'}: "
        "the runtime then loads code for that gfx, not this set's (hipErrorInvalidImage or wrong kernels)",
        OVERRIDE, "unset HSA_OVERRIDE_GFX_VERSION (and remove it from ~/.bashrc, /etc/environment or the service's unit)",
    )]  # fmt: skip


def check_access(box: Box, targets: Sequence[str]) -> List[Finding]:
    rule = "device-access"
    devices = ["/dev/kfd"] + [f"/dev/dri/renderD{n.render_minor}" for n in gpu_nodes(box) if n.gfx in targets and n.render_minor >= 0]
    missing = [d for d in devices if not box.path(d).exists()]
    denied = [d for d in devices if d not in missing and not os.access(box.path(d), os.R_OK | os.W_OK)]
    if missing:
        return [Finding(
            "FAIL", rule, f"{', '.join(missing)} does not exist: the runtime opens it to reach the GPU",
            ACCESS, "load amdgpu (`sudo modprobe amdgpu`); in a container pass `--device /dev/kfd --device /dev/dri`",
        )]  # fmt: skip
    if denied:
        return [Finding(
            "FAIL", rule, f"{', '.join(denied)} is not readable and writable by this user (the runtime opens it read-write)",
            ACCESS, 'sudo usermod -aG render,video "$USER", then log in again (in a container: `--group-add render --group-add video`)',
        )]  # fmt: skip
    return [Finding("ok", rule, f"{', '.join(devices)} readable and writable")]


def mem_total(box: Box) -> Optional[int]:
    match = re.search(r"^MemTotal:\s+(\d+)\s*kB", box.read("proc/meminfo") or "", re.M)
    return int(match.group(1)) * 1024 if match else None


def ttm_limit(box: Box) -> Optional[Tuple[str, int]]:
    """(module, bytes) of TTM's page limit: the kernel's ttm, or amdgpu-dkms's amdttm."""
    for module in ("ttm", "amdttm"):
        pages = box.number(f"sys/module/{module}/parameters/pages_limit")
        if pages:
            return module, pages * PAGE
    return None


def gib(size: int) -> str:
    return f"{size / GIB:.1f} GiB"


def check_memory(box: Box, targets: Sequence[str]) -> List[Finding]:
    nodes = [n for n in gpu_nodes(box) if n.gfx in targets and n.render_minor >= 0]
    total = mem_total(box)
    if not nodes or total is None:
        return []  # no GPU of the set (gpu-target says so) or no /proc/meminfo: nothing to compare
    device = f"sys/class/drm/renderD{nodes[0].render_minor}/device"
    gtt, vram = box.number(f"{device}/mem_info_gtt_total"), box.number(f"{device}/mem_info_vram_total")
    if gtt is None or vram is None:
        return [Finding(
            "WARN", "gpu-memory", f"/{device}/mem_info_gtt_total or mem_info_vram_total is not readable: amdgpu does not say how much memory the GPU reaches",
            GTT, f"cat /{device}/mem_info_gtt_total /{device}/mem_info_vram_total",
        )]  # fmt: skip
    findings = []
    limit = ttm_limit(box)
    reachable = min(gtt, limit[1]) if limit else gtt
    if limit and limit[1] < gtt:
        findings.append(Finding(
            "WARN", "ttm-limit", f"amdgpu reports {gib(gtt)} of GTT but {limit[0]}.pages_limit allows {gib(limit[1])}: allocations past it fail",
            TTM, f"echo 'options {limit[0]} pages_limit={gtt // PAGE}' | sudo tee /etc/modprobe.d/ttm.conf, then reboot (and drop amdgpu.gttsize)",
        ))  # fmt: skip
    # The kernel's default TTM limit is half of the memory it manages (amd-ttm shows 62.82 GB of
    # 125.65 GB; 1% of slack for page rounding): at or below it, most of a 128 GB box is out of
    # the GPU's reach.
    summary = f"the GPU reaches {gib(vram)} VRAM + {gib(reachable)} GTT of MemTotal {gib(total)}"
    if reachable * 2 <= total + total // 100:
        pages = total * 9 // 10 // PAGE  # amd-ttm's ceiling: 90% of system memory
        findings.append(Finding(
            "WARN", "gpu-memory", f"{summary}: GTT is at or below the kernel's default, half of memory",
            GTT, f"echo 'options ttm pages_limit={pages}' | sudo tee /etc/modprobe.d/ttm.conf, then reboot "
            f"(or `amd-ttm --set {total * 9 // 10 // GIB}` from amd-debug-tools)",
        ))  # fmt: skip
    else:
        findings.append(Finding("ok", "gpu-memory", summary))
    return findings


def kernel_version(release: str) -> Optional[Tuple[int, int, int]]:
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", release)
    return (int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)) if match else None


def check_kernel(box: Box, targets: Sequence[str]) -> List[Finding]:
    release = (box.read("proc/sys/kernel/osrelease") or "").strip()
    version = kernel_version(release)
    minima = [(t, KERNEL_MINIMUM[t]) for t in targets if t in KERNEL_MINIMUM]
    if version is None or not minima:
        return [Finding("ok", "kernel", f"{release or 'unknown'} (no minimum known for {', '.join(targets)})")]
    low = [(t, m) for t, m in minima if version < m]
    if low:
        named = ", ".join(f"{t} needs {'.'.join(map(str, m))}" for t, m in low)
        return [Finding(
            "WARN", "kernel", f"{release}: {named} (older kernels are unstable under AI workloads on it; a distribution may have backported the fix)",
            KERNEL, f"install a kernel >= {'.'.join(map(str, max(m for _, m in low)))} (your distribution's, or its mainline/HWE kernel) and reboot into it",
        )]  # fmt: skip
    return [Finding("ok", "kernel", f"{release}")]


def firmware_versions(box: Box) -> Dict[str, str]:
    """Installed firmware packages -> version, from package databases any user can read
    (dpkg's status file, pacman's local database); rpm's is not plain text."""
    found = {}
    for block in (box.read("var/lib/dpkg/status") or "").split("\n\n"):
        fields = dict(re.findall(r"^(Package|Version|Status): (.*)$", block, re.M))
        if fields.get("Package") in FIRMWARE_PACKAGES and "installed" in fields.get("Status", "").split():
            found[fields["Package"]] = fields.get("Version", "")
    local = box.path("var/lib/pacman/local")
    for desc in sorted(local.glob("*/desc")) if local.is_dir() else []:
        fields = re.findall(r"^%(NAME|VERSION)%\n(.*)$", desc.read_text(errors="replace"), re.M)
        values = dict(fields)
        if values.get("NAME") in FIRMWARE_PACKAGES:
            found[values["NAME"]] = values.get("VERSION", "")
    return found


def check_firmware(box: Box, targets: Sequence[str]) -> List[Finding]:
    bad = {b for t in targets for b in FIRMWARE_BAD.get(t, ())}
    if not bad:
        return []
    versions = firmware_versions(box)
    if not versions:
        return [Finding(
            "note", "firmware", f"no linux-firmware package version readable here (dpkg, pacman): {', '.join(sorted(bad))} breaks ROCm on Strix Halo",
            FIRMWARE, "rpm -q linux-firmware  (or your package manager's query): it must not be " + " or ".join(sorted(bad)),
        )]  # fmt: skip
    hits = {p: v for p, v in versions.items() if any(v.startswith(b) for b in bad)}
    listed = ", ".join(f"{p} {v}" for p, v in sorted(versions.items()))
    if hits:
        return [Finding(
            "FAIL", "firmware", f"{listed}: {', '.join(sorted(bad))} breaks ROCm on Strix Halo (instability, crashes)",
            FIRMWARE, "install linux-firmware 20260110 or newer (or downgrade to 20251111), rebuild the initramfs and reboot",
        )]  # fmt: skip
    return [Finding("ok", "firmware", listed)]


def check_box(root: Path, targets: Sequence[str]) -> List[Finding]:
    box = Box(root)
    return [
        *check_gpu(box, targets),
        *check_override(box, targets),
        *check_access(box, targets),
        *check_memory(box, targets),
        *check_kernel(box, targets),
        *check_firmware(box, targets),
    ]


def set_targets(here: Path) -> Optional[List[str]]:
    try:
        return list(json.loads((here / SET_METADATA).read_text())["gpu_targets"])
    except (OSError, ValueError, KeyError):
        return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default="/", help="the machine's root, where sys/, proc/ and dev/ are (default /)")
    parser.add_argument("--gpu-targets", help=f"comma-separated gfx names (default: `gpu_targets` of {SET_METADATA} beside this script)")
    args = parser.parse_args(argv)
    targets = args.gpu_targets.split(",") if args.gpu_targets else set_targets(Path(__file__).resolve().parent)
    if not targets:
        print(f"check_box: no gpu targets: pass --gpu-targets gfx1151 or keep {SET_METADATA} beside this script", file=sys.stderr)
        return 2
    findings = check_box(Path(args.root), targets)
    for finding in findings:
        print("\n".join(finding.lines()))
    failures = sum(f.level == "FAIL" for f in findings)
    warnings = sum(f.level == "WARN" for f in findings)
    verdict = "fix the failures before running the set" if failures else "the set can run here"
    print(f"check_box: {failures} failure(s), {warnings} warning(s): {verdict}.")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
