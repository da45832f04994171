#!/usr/bin/env python3
"""Is this machine ready for the install set beside this script? Run it before the first run:

    python3 check_box.py                      # the set's gpu targets, from install_set.json beside it
    python3 check_box.py --gpu-targets gfx1151 --root /path/to/a/copy/of/sys/and/proc

It reads only files any user can read (the KFD topology, /dev, amdgpu's and TTM's sysfs
files, /proc, /etc/os-release) under `--root` (default `/`; tests point it at fixture trees),
asks the distribution's package manager for the firmware's version, and prints one line a
rule; a rule that finds a problem also prints its source and the line that fixes it. Exit 1
when a rule fails (the set will not run), 0 when only warnings are left (it runs, with less
than the machine has), 2 when it cannot tell which gpu targets the set is for.

The GPUs are judged as the runtime will see them: ROCR_VISIBLE_DEVICES, then
HIP_VISIBLE_DEVICES (or CUDA_VISIBLE_DEVICES, as HIP reads it) choose and order them, and
HSA_OVERRIDE_GFX_VERSION_<node> or HSA_OVERRIDE_GFX_VERSION poses them as another gfx, each
read as ROCm's own code reads it (the sources below); every finding they change names them.

The box is the user's, and what it holds is not ours to trust: only regular files are read
(never a FIFO or a device, which could block), at most READ_LIMIT bytes of each; every value
goes through one parser (Box.value) that turns a bad value into a `note` naming the file or
variable; a tool gets TOOL_SECONDS. No input ends in a traceback.
Standard library only, any python3 from 3.7: it runs before anything of the set is installed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

# The install set's metadata beside this script (rules/rocm_build/install/box_check.py writes it).
SET_METADATA = "install_set.json"
TOPOLOGY = "sys/class/kfd/kfd/topology/nodes"
PAGE = 4096  # TTM counts pages_limit in the kernel's page size, 4 KiB on x86-64
GIB = 1 << 30
READ_LIMIT = 64 * 1024  # bytes read of any file (a KFD properties file is under 2 KiB)
TOOL_SECONDS = 10
MAX_NODES = 1024  # KFD topology nodes looked at
GFX = re.compile(r"gfx[0-9]{1,2}[0-9a-f]{2}")  # a gfx target name: gfx90a, gfx1151
OVERRIDE = "HSA_OVERRIDE_GFX_VERSION"
PER_NODE = re.compile(OVERRIDE + r"_(0|[1-9][0-9]{0,5})")  # the thunk formats the node id with %d

# Sources each rule cites (what a user reads to see why).
KFD_TOPOLOGY = "https://github.com/torvalds/linux/blob/master/drivers/gpu/drm/amd/amdkfd/kfd_topology.c (gfx_target_version, drm_render_minor)"
INVALID_IMAGE = "https://github.com/ROCm/TheRock/issues/7839 (no code for the GPU: hipErrorInvalidImage)"
VISIBLE = (
    "https://github.com/ROCm/ROCR-Runtime (runtime/hsa-runtime/core/runtime/amd_filter_device.cpp: ROCR_VISIBLE_DEVICES); "
    "https://github.com/ROCm/clr (rocclr/device/rocm/rocdevice.cpp: HIP_VISIBLE_DEVICES, else CUDA_VISIBLE_DEVICES)"
)
OVERRIDE_SOURCE = (
    "https://github.com/ROCm/TheRock/issues/1719 (the override poses the GPU as another gfx); "
    "https://github.com/ROCm/ROCR-Runtime (libhsakmt/src/topology.c: HSA_OVERRIDE_GFX_VERSION_<node>, then HSA_OVERRIDE_GFX_VERSION)"
)
ACCESS = "https://github.com/ROCm/ROCT-Thunk-Interface#readme (/dev/kfd and the render node: groups render, video)"
GTT = "https://rocm.docs.amd.com/en/latest/how-to/system-optimization/strixhalo.html (GTT is the pool PyTorch allocates from)"
TTM = (
    "https://github.com/ROCm/ROCm/issues/5595 (gttsize is deprecated: ttm.pages_limit caps GTT); "
    "https://mid.mail-archive.com/dri-devel@lists.freedesktop.org/msg593027.html (AMD: a carve-out is never reclaimed; "
    "a modprobe.d file does not reach a ttm built in or loaded from the initramfs)"
)
KERNEL = "https://github.com/kyuz0/amd-strix-halo-toolboxes#readme (kernel vs ROCm matrix; issue #45)"
FIRMWARE = "https://github.com/kyuz0/amd-strix-halo-toolboxes/blob/main/docs/troubleshooting-firmware.md"
OS_RELEASE = "https://www.freedesktop.org/software/systemd/man/latest/os-release.html (ID, ID_LIKE)"

# gfx1151 (Strix Halo): kernels up to 6.18.3 are unstable under AI workloads, 6.18.4 and later
# need ROCm 7.2+ or TheRock's, which is what this chain is built with (KERNEL above).
KERNEL_MINIMUM = {"gfx1151": (6, 18, 4)}
# linux-firmware 20251125 breaks ROCm on Strix Halo; 20251111 and 20260110 work (FIRMWARE above).
FIRMWARE_BAD = {"gfx1151": ("20251125",)}


@dataclass(frozen=True)
class Family:
    """A distribution family (/etc/os-release's ID and ID_LIKE name it): where its firmware is
    packaged, how to ask for the version, how to rebuild the initramfs."""

    name: str
    ids: Tuple[str, ...]
    packages: Tuple[str, ...]
    query: str  # the command a user runs
    initramfs: str


FAMILIES = (
    Family("debian", ("debian", "ubuntu"), ("linux-firmware", "firmware-amd-graphics"), "dpkg -s", "sudo update-initramfs -u"),
    Family("rpm", ("fedora", "rhel", "centos", "suse", "opensuse", "sles"), ("linux-firmware", "amd-gpu-firmware", "kernel-firmware-amdgpu"),
           "rpm -q", "sudo dracut -f"),  # fmt: skip
    Family("arch", ("arch",), ("linux-firmware", "linux-firmware-amdgpu"), "pacman -Q", "sudo mkinitcpio -P"),
)
UNKNOWN_FAMILY = Family("", (), ("linux-firmware",), "dpkg -s, rpm -q or pacman -Q", "sudo update-initramfs -u` or `sudo dracut -f")


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


class Refused(Exception):
    """A file that exists but is not read, or a value that does not parse: why, in a few words."""


T = TypeVar("T")


def shown(value: str, limit: int = 64) -> str:
    """A value from the box as it may stand in a one-line message."""
    return value if value.isprintable() and len(value) <= limit else repr(value[:limit]) + ("..." if len(value) > limit else "")


def read_bounded(path: str, limit: int = READ_LIMIT, truncate: bool = False) -> bytes:
    """At most `limit` bytes of a regular file (a FIFO or a device is refused unopened: reading
    one may block); a larger file is refused, or cut at `limit` with `truncate`."""
    kinds = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
             stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a directory"}  # fmt: skip
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise Refused(f"is {kinds.get(stat.S_IFMT(mode), 'no regular file')}, not a regular file")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced since the stat
            raise Refused("is not a regular file")
        data = b""
        while len(data) <= limit:
            piece = os.read(fd, limit + 1 - len(data))
            if not piece:
                break
            data += piece
    finally:
        os.close(fd)
    if len(data) > limit and not truncate:
        raise Refused(f"is larger than {limit // 1024} KiB, more than such a file holds")
    return data[:limit]


def decimal(text: str) -> int:
    """A count or a size as the kernel writes it."""
    text = text.strip()
    if not re.fullmatch(r"[0-9]{1,20}", text):
        raise Refused("not a decimal number")
    return int(text)


def gfx_name(version: int) -> str:
    """KFD's gfx_target_version (major*10000 + minor*100 + stepping, decimal) as a gfx name:
    110501 -> gfx1151, 90010 -> gfx90a (minor and stepping are hex digits in the name)."""
    major, minor, stepping = version // 10000, (version // 100) % 100, version % 100
    return f"gfx{major}{minor:x}{stepping:x}"


def target_version(text: str) -> int:
    version = decimal(text)
    if not 0 <= version // 10000 <= 99:
        raise Refused("not a gfx_target_version (major*10000 + minor*100 + stepping)")
    return version


def override_name(value: str) -> str:
    """HSA_OVERRIDE_GFX_VERSION as ROCm's thunk reads it (`sscanf("%u.%u.%u%c") == 3`, major at
    most 63, minor and stepping at most 255: spaces before a number, nothing after the last) as
    the gfx name the runtime then loads code for."""
    match = re.fullmatch(r"\s*\+?([0-9]{1,10})\.\s*\+?([0-9]{1,10})\.\s*\+?([0-9]{1,10})", value)
    if not match:
        raise Refused("not major.minor.stepping")
    major, minor, stepping = (int(g) for g in match.groups())
    if major > 63 or minor > 255 or stepping > 255:
        raise Refused("past what the thunk takes (major at most 63, minor and stepping at most 255)")
    return f"gfx{major}{minor:x}{stepping:x}"


def properties(text: str) -> Dict[str, str]:
    """A KFD properties file: `name value` lines (a line with no value names nothing)."""
    pairs = (line.split(None, 1) for line in text.splitlines())
    return {p[0]: p[1] for p in pairs if len(p) == 2}


def parsed(raw: str, parse: Callable[[str], T]) -> Tuple[Optional[T], str]:
    """(`parse(raw)`, "") or (None, why `raw` is refused): the one place a value of the box (a
    file's field, a variable) becomes a number or a name; the caller makes `why` a finding."""
    try:
        return parse(raw), ""
    except Refused as e:
        return None, str(e)


class Box:
    """The machine's files and this process's environment, read under a root with bounds; what
    cannot be read or parsed becomes a note of the rule that asked (`notes`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.notes: List[Finding] = []
        self._environ: Optional[Dict[str, str]] = None

    def path(self, relative: str) -> str:
        return str(self.root / relative.lstrip("/"))

    def note(self, rule: str, found: str, source: str, fix: str) -> None:
        self.notes.append(Finding("note", rule, found, source, fix))

    def take_notes(self) -> List[Finding]:
        notes, self.notes = self.notes, []
        return notes

    def data(self, relative: str, rule: str, source: str, truncate: bool = False) -> Optional[bytes]:
        """A file's bytes, None where it does not exist; one that exists but is not read is
        None and a note of `rule`."""
        try:
            return read_bounded(self.path(relative), truncate=truncate)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except Refused as e:
            self.note(rule, f"/{relative} {e}: it is not read", source, f"look at /{relative} by hand (`ls -l /{relative}`)")
        except OSError as e:
            self.note(rule, f"/{relative} cannot be read ({e.strerror or e})", source, f"ls -l /{relative}  (as this user)")
        return None

    def read(self, relative: str, rule: str, source: str) -> Optional[str]:
        data = self.data(relative, rule, source)
        return None if data is None else data.decode("utf-8", "replace")

    def value(self, rule: str, where: str, raw: str, parse: Callable[[str], T], source: str, fix: str) -> Optional[T]:
        """`parse(raw)`, or None and a note of `rule` naming `where` the value came from and why
        it is refused."""
        value, why = parsed(raw, parse)
        if why:
            self.note(rule, f"{where} is {shown(raw.strip())}: {why}", source, fix)
        return value

    def number(self, relative: str, rule: str, source: str) -> Optional[int]:
        text = self.read(relative, rule, source)
        if text is None:
            return None
        return self.value(rule, f"/{relative}", text, decimal, source, f"cat /{relative}")

    def environ(self) -> Dict[str, str]:
        """This process's environment as the kernel shows it (/proc/self/environ: what the
        shell gave it), so a fixture tree can carry one."""
        if self._environ is None:
            data = self.data("proc/self/environ", "environment", OVERRIDE_SOURCE, truncate=True) or b""
            items = data.split(b"\0")
            if len(data) >= READ_LIMIT:
                items = items[:-1]  # the one the limit cut
                self.note("environment", f"the environment is larger than {READ_LIMIT // 1024} KiB: only its first variables are read",
                          OVERRIDE_SOURCE, "env | grep -E 'VISIBLE_DEVICES|HSA_OVERRIDE'")  # fmt: skip
            pairs = (item.decode("utf-8", "replace").partition("=") for item in items if item)
            self._environ = {key: value for key, sep, value in pairs if sep}
        return self._environ


# -- the GPUs, as the runtime will see them -----------------------------------------------


@dataclass(frozen=True)
class GpuNode:
    node: int  # the KFD node's number (its directory's name): what HSA_OVERRIDE_GFX_VERSION_<n> names
    gfx: str  # gfx1151; "" when its gfx_target_version could not be read
    version: int  # gfx_target_version, 110501
    render_minor: int  # /dev/dri/renderD<minor>; -1 when unknown
    unique_id: int  # KFD's unique_id (0: none), the UUID `GPU-<16 hex digits>` visibility lists may name

    def name(self) -> str:
        return f"node {self.node} {self.gfx or '(gfx unknown)'}"

    def listed(self) -> str:
        return f"{self.name()} ({self.version})" if self.gfx else self.name()


def gpu_nodes(box: Box) -> Tuple[List[GpuNode], bool]:
    """The KFD nodes that are GPUs, in node order (the order ROCr numbers its GPUs in): a node
    with SIMDs (ROCr and the thunk count those; a CPU node has none), or, where simd_count is
    not given (a partial copy of /sys), one with a gfx_target_version; and whether every node
    could be read (if not, a note says which)."""
    rule, fix = "gpu-target", "cat /sys/class/kfd/kfd/topology/nodes/*/properties"
    try:
        names = os.listdir(box.path(TOPOLOGY))
    except (FileNotFoundError, NotADirectoryError):
        return [], True
    except OSError as e:
        box.note(rule, f"/{TOPOLOGY} cannot be listed ({e.strerror or e}): its GPUs are unknown", KFD_TOPOLOGY, f"ls -l /{TOPOLOGY}")
        return [], False
    numbers = sorted(int(n) for n in names if re.fullmatch(r"[0-9]{1,6}", n))[:MAX_NODES]
    found, complete = [], True
    for number in numbers:
        relative = f"{TOPOLOGY}/{number}/properties"
        text = box.read(relative, rule, KFD_TOPOLOGY)
        complete = complete and (text is not None or not exists(box.path(relative)))
        props = properties(text or "")

        def field(name: str, parse: Callable[[str], int], default: Optional[int]) -> Optional[int]:
            if name not in props:
                return default
            return box.value(rule, f"{name} of /{relative}", props[name], parse, KFD_TOPOLOGY, fix)

        simd = field("simd_count", decimal, None)
        version = field("gfx_target_version", target_version, 0)
        if not (simd if "simd_count" in props else version):
            continue  # a CPU node (or SIMDs unreadable: a note says so)
        render = field("drm_render_minor", decimal, -1)
        unique = field("unique_id", decimal, 0)
        found.append(GpuNode(number, gfx_name(version) if version else "", version or 0, -1 if render is None else render, unique or 0))
    return found, complete


def entries(value: str) -> List[str]:
    """The comma-separated entries of a visibility list as ROCr and HIP split it (a trailing
    comma ends the list; an empty entry elsewhere is one)."""
    items = value.split(",")
    return items[:-1] if len(items) > 1 and items[-1] == "" else items


def c_integer(text: str) -> Optional[int]:
    """`text` as C's strtol(text, &end, 0) reads it when it reads all of it (0x for hex, a
    leading 0 for octal), or None."""
    match = re.fullmatch(r"([+-]?)(0[xX][0-9a-fA-F]{1,16}|0[0-7]{0,21}|[1-9][0-9]{0,18})", text)
    if not match:
        return None
    digits = match.group(2)
    base = 16 if digits[:2] in ("0x", "0X") else 8 if digits.startswith("0") else 10
    number = int(digits, base)
    return -number if match.group(1) == "-" else number


def rocr_visible(value: str, gpus: Sequence[GpuNode]) -> Tuple[List[int], str]:
    """The GPUs (indexes into `gpus`) ROCr shows for ROCR_VISIBLE_DEVICES=`value`, in the list's
    order, and why it read no further ("" when it read what it reads). ROCr (amd_filter_device.cpp)
    shows none when the variable is set and empty; reads at most as many entries as there are
    GPUs, each trimmed and upper-cased; takes one starting with G as the unique prefix (5 to 20
    characters) of a GPU's UUID, `GPU-` and its unique_id in 16 hex digits, any other as a C
    integer; and stops at the first entry that names no GPU, or one already named."""
    if value == "":
        return [], "set and empty: ROCr shows no GPU"
    chosen: List[int] = []
    for raw in entries(value)[:len(gpus)]:
        token = raw.strip().upper()
        if not token:
            return chosen, "an empty entry: ROCr stops there"  # its token.at(0) has nothing to read
        if token.startswith("G"):
            uuids = [f"GPU-{g.unique_id:016X}" if g.unique_id else "" for g in gpus]
            matches = [i for i, u in enumerate(uuids) if u and 5 <= len(token) <= 20 and u.startswith(token)]
            index = matches[0] if len(matches) == 1 else None
            why = "no GPU's UUID (or more than one) starts so"
        else:
            index = c_integer(token)
            why = "no number" if index is None else f"there are {len(gpus)} GPU(s), 0 to {len(gpus) - 1}"
        if index is None or not 0 <= index < len(gpus) or index in chosen:
            why = "named already" if index in chosen else why
            return chosen, f"ROCr stops at its entry {shown(raw)} ({why})"
        chosen.append(index)
    return chosen, ""


def hip_visible(value: str, gpus: Sequence[GpuNode]) -> Tuple[List[int], str]:
    """The GPUs (indexes into `gpus`, the ones ROCr shows) HIP keeps for HIP_VISIBLE_DEVICES (or
    CUDA_VISIBLE_DEVICES)=`value`, in the list's order, and why it read no further. HIP
    (rocdevice.cpp) takes an entry holding `GPU-` as the index of the first GPU whose UUID (`GPU-`
    and 16 lowercase hex digits) contains it, any other as a decimal index written as C writes
    it (no sign, spaces or leading zero), skips one named already, and stops at the first that
    names no GPU."""
    chosen: List[int] = []
    for raw in entries(value):
        token = raw
        if "GPU-" in token:
            uuids = [f"GPU-{g.unique_id:016x}" if g.unique_id else "GPU-XX" for g in gpus]
            token = next((str(i) for i, u in enumerate(uuids) if token in u), token)
        if not re.fullmatch(r"0|[1-9][0-9]{0,8}", token) or int(token) >= len(gpus):
            return chosen, f"HIP stops at its entry {shown(raw)} (the runtime shows {len(gpus)} GPU(s), 0 to {len(gpus) - 1})"
        if int(token) not in chosen:
            chosen.append(int(token))
    return chosen, ""


@dataclass(frozen=True)
class Step:
    """One variable applied: what it left of the GPUs, and why it read no further."""

    variable: str
    value: str
    kept: Tuple[GpuNode, ...]
    why: str

    def says(self) -> str:
        kept = ", ".join(n.name() for n in self.kept) or "no GPU"
        return f"{self.variable}={shown(self.value)} leaves {kept}" + (f" ({self.why})" if self.why else "")


def visible(gpus: Sequence[GpuNode], environ: Dict[str, str]) -> Tuple[List[GpuNode], List[Step]]:
    """The GPUs HIP shows, in its order, and each variable that chose them."""
    seen, steps = list(gpus), []
    if "ROCR_VISIBLE_DEVICES" in environ:
        kept, why = rocr_visible(environ["ROCR_VISIBLE_DEVICES"], seen)
        seen = [seen[i] for i in kept]
        steps.append(Step("ROCR_VISIBLE_DEVICES", environ["ROCR_VISIBLE_DEVICES"], tuple(seen), why))
    # HIP reads HIP_VISIBLE_DEVICES when it is not empty, else CUDA_VISIBLE_DEVICES; an empty one is no list.
    variable = next((v for v in ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES") if environ.get(v)), None)
    if variable:
        kept, why = hip_visible(environ[variable], seen)
        seen = [seen[i] for i in kept]
        steps.append(Step(variable, environ[variable], tuple(seen), why))
    return seen, steps


@dataclass
class Context:
    box: Box
    targets: Sequence[str]
    gpus: List[GpuNode]  # every GPU of the KFD topology
    complete: bool  # whether every node of the topology could be read
    seen: List[GpuNode]  # the ones HIP shows, in its order
    steps: List[Step]  # the visibility variables applied
    family: Family


def visibility_fix(ctx: Context) -> str:
    """The line that shows the runtime the set's GPUs (ROCr numbers GPUs in topology order)."""
    keep = ",".join(str(i) for i, n in enumerate(ctx.gpus) if n.gfx in ctx.targets)
    unset = [s.variable for s in ctx.steps if s.variable != "ROCR_VISIBLE_DEVICES"]
    return (f"unset {' '.join(unset)}; " if unset else "") + f"export ROCR_VISIBLE_DEVICES={keep}"


def check_gpu(ctx: Context) -> List[Finding]:
    rule, wanted = "gpu-target", ", ".join(ctx.targets)
    if not ctx.gpus and not ctx.complete:
        return []  # the notes above say what could not be read: no verdict on what is unknown
    if not ctx.gpus:
        where = "/" + TOPOLOGY
        return [Finding(
            "FAIL", rule,
            f"no GPU: {where} has no node with a gfx_target_version (amdgpu's KFD is not loaded, or this is not the box)",
            KFD_TOPOLOGY,
            f"run this on the {wanted} machine with amdgpu loaded (`sudo modprobe amdgpu`; in a container: "
            "`--device /dev/kfd --device /dev/dri`)",
        )]  # fmt: skip
    listed = ", ".join(n.listed() for n in ctx.gpus)
    story = "; ".join(s.says() for s in ctx.steps)
    listed_story = f"{listed}: {story}" if story else listed
    source = f"{INVALID_IMAGE}; {VISIBLE}" if story else INVALID_IMAGE
    ours = [n for n in ctx.seen if n.gfx in ctx.targets]
    anywhere = [n for n in ctx.gpus if n.gfx in ctx.targets]
    if not ctx.seen:
        return [Finding("FAIL", rule, f"{listed_story}: the runtime sees no GPU", VISIBLE, visibility_fix(ctx) if anywhere else f"unset {' '.join(s.variable for s in ctx.steps)}")]
    if not ours and any(not n.gfx for n in ctx.seen):
        unknown = ", ".join(n.name() for n in ctx.seen if not n.gfx)
        return [Finding("note", rule, f"{listed_story}: whether {unknown} is a target of this set ({wanted}) cannot be told: its "
                        "gfx_target_version is unreadable (the note above)", KFD_TOPOLOGY, "cat /sys/class/kfd/kfd/topology/nodes/*/properties")]  # fmt: skip
    if not ours and anywhere:
        return [Finding(
            "FAIL", rule, f"{listed_story}: none the runtime sees is a target of this set ({wanted}); its kernels would fail with hipErrorInvalidImage",
            source, visibility_fix(ctx),
        )]  # fmt: skip
    if not ours:
        return [Finding(
            "FAIL", rule, f"{listed_story}: none is a target of this set ({wanted}); its kernels would fail with hipErrorInvalidImage",
            source, f"build the set for this GPU (`gpu_targets=[\"{ctx.seen[0].gfx}\"]` on the chain's rocm_wheel targets) or run it on a {wanted} machine",
        )]  # fmt: skip
    if len(ours) < len(ctx.seen):
        others = ", ".join(n.name() for n in ctx.seen if n.gfx not in ctx.targets)
        return [Finding(
            "WARN", rule, f"{listed_story}: {others} is not a target of this set ({wanted}); work placed there fails with hipErrorInvalidImage",
            source, visibility_fix(ctx),
        )]  # fmt: skip
    return [Finding("ok", rule, f"{listed_story}, a target of this set ({wanted})")]


def check_override(ctx: Context) -> List[Finding]:
    """HSA_OVERRIDE_GFX_VERSION_<node>, else HSA_OVERRIDE_GFX_VERSION: the thunk reads one of them
    for every GPU node (topology.c) and the runtime loads code for that gfx; a malformed one
    makes the thunk fail to read the topology, and the runtime starts no GPU."""
    rule = "hsa-override"
    environ = ctx.box.environ()
    names = sorted(k for k in environ if k == OVERRIDE or PER_NODE.fullmatch(k))
    if not names:
        return [Finding("ok", rule, f"{OVERRIDE} is not set")]
    fix = f"unset {' '.join(names)} (and remove it from ~/.bashrc, /etc/environment or the service's unit)"
    failures, idle, used = [], [], set()
    for node in ctx.gpus:
        name = next((n for n in (f"{OVERRIDE}_{node.node}", OVERRIDE) if n in environ), None)
        if name is None:
            continue
        used.add(name)
        value = environ[name]
        posed, why = parsed(value, override_name)
        if why:
            failures.append(f"{name}={shown(value)} is {why} as ROCm's thunk reads it: it refuses the topology, and the "
                            "runtime starts no GPU")  # fmt: skip
        elif node not in ctx.seen:
            idle.append(f"{name}={shown(value)} poses {node.name()}, which the runtime does not show")
        elif posed != node.gfx:
            failures.append(f"{name}={shown(value)} poses {node.name()} as {posed}: the runtime then loads code for {posed}, "
                            "not the GPU's own (hipErrorInvalidImage or wrong kernels)")  # fmt: skip
        else:
            idle.append(f"{name}={shown(value)} poses {node.name()} as {posed}, what it already is")
    idle += [f"{n}={shown(environ[n])} names no GPU node (KFD node {n.rsplit('_', 1)[1]})" for n in names if n not in used]
    if failures:
        return [Finding("FAIL", rule, "; ".join(dict.fromkeys(failures)), OVERRIDE_SOURCE, fix)]
    return [Finding("WARN", rule, "; ".join(idle) + ": it does nothing here but would mask another GPU", OVERRIDE_SOURCE, fix)]


def exists(path: str) -> bool:
    try:
        os.stat(path)
        return True
    except OSError:
        return False


def check_access(ctx: Context) -> List[Finding]:
    rule = "device-access"
    ours = [n for n in ctx.seen if n.gfx in ctx.targets and n.render_minor >= 0]
    devices = ["/dev/kfd"] + [f"/dev/dri/renderD{n.render_minor}" for n in ours]
    missing = [d for d in devices if not exists(ctx.box.path(d))]
    denied = [d for d in devices if d not in missing and not os.access(ctx.box.path(d), os.R_OK | os.W_OK)]
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


def gib(size: int) -> str:
    return f"{size / GIB:.1f} GiB"


def mem_total(box: Box) -> Optional[int]:
    text = box.read("proc/meminfo", "gpu-memory", GTT)
    match = re.search(r"^MemTotal:[ \t]*(\S*)[ \t]*kB", text or "", re.M)
    if text is None or not match:
        if text is not None:
            box.note("gpu-memory", "/proc/meminfo has no `MemTotal: <n> kB` line: the memory is unknown", GTT, "grep MemTotal /proc/meminfo")
        return None
    kib = box.value("gpu-memory", "MemTotal of /proc/meminfo", match.group(1), decimal, GTT, "grep MemTotal /proc/meminfo")
    return None if kib is None else kib * 1024


def ttm_limit(box: Box) -> Optional[Tuple[str, int]]:
    """(module, bytes) of TTM's page limit: the kernel's ttm, or amdgpu-dkms's amdttm."""
    for module in ("ttm", "amdttm"):
        pages = box.number(f"sys/module/{module}/parameters/pages_limit", "gpu-memory", TTM)
        if pages:
            return module, pages * PAGE
    return None


def ttm_fix(ctx: Context, module: str, pages: int) -> str:
    """How to set `module`.pages_limit so it holds after a reboot: a ttm built into the kernel (its
    /sys/module entry has no initstate) reads only the kernel command line; a module reads
    modprobe.d when it loads, and it loads from the initramfs, which must then be rebuilt."""
    parameter = f"{module}.pages_limit={pages}"
    module_dir = ctx.box.path(f"sys/module/{module}")
    if module == "ttm" and exists(module_dir) and not exists(os.path.join(module_dir, "initstate")):  # amdttm is always a module (DKMS)
        return f"add {parameter} to the kernel command line and reboot ({module} is built into this kernel: no modprobe.d file reaches it)"
    return (f"echo 'options {module} pages_limit={pages}' | sudo tee /etc/modprobe.d/{module}.conf, `{ctx.family.initramfs}` "
            f"({module} loads from the initramfs, which holds a copy of modprobe.d) and reboot; or add {parameter} to the "
            "kernel command line instead")  # fmt: skip


def check_memory(ctx: Context) -> List[Finding]:
    """One recommendation: the TTM limit (one value, one file, how it takes effect) or, when the
    VRAM carve-out keeps more than it leaves Linux, a smaller carve-out first."""
    rule, box = "gpu-memory", ctx.box
    nodes = [n for n in ctx.seen if n.gfx in ctx.targets and n.render_minor >= 0]
    total = mem_total(box)
    if not nodes or total is None:
        return []  # no GPU of the set (gpu-target says so) or no MemTotal (a note says so): nothing to compare
    device = f"sys/class/drm/renderD{nodes[0].render_minor}/device"
    gtt, vram = box.number(f"{device}/mem_info_gtt_total", rule, GTT), box.number(f"{device}/mem_info_vram_total", rule, GTT)
    if gtt is None or vram is None:
        return [Finding(
            "WARN", rule, f"/{device}/mem_info_gtt_total or mem_info_vram_total is not readable: amdgpu does not say how much memory the GPU reaches",
            GTT, f"cat /{device}/mem_info_gtt_total /{device}/mem_info_vram_total",
        )]  # fmt: skip
    limit = ttm_limit(box)
    reach = min(gtt, limit[1]) if limit else gtt
    summary = f"the GPU reaches {gib(vram)} VRAM + {gib(reach)} GTT of MemTotal {gib(total)}"
    if vram > total:
        return [Finding(
            "WARN", rule, f"{summary}: the VRAM carve-out keeps more than it leaves Linux, and is never given back; GTT taken from "
            f"the {gib(total)} left would starve the system",
            f"{GTT}; {TTM}", "lower the VRAM carve-out (UMA frame buffer size) in the firmware setup to its smallest and reboot: "
            "the memory returns to Linux and the GPU reaches it as GTT; then run this check again for the TTM limit",
        )]  # fmt: skip
    module = limit[0] if limit else "ttm"
    pages = total * 9 // 10 // PAGE  # amd-ttm's ceiling: 90% of the memory Linux has
    capped = limit is not None and limit[1] < gtt
    # The kernel's default TTM limit is half of the memory it manages (amd-ttm shows 62.82 GB of
    # 125.65 GB; 1% of slack for page rounding): at or below it, most of a 128 GB box is out of
    # the GPU's reach. GTT past TTM's limit is reported but not allocatable.
    if reach * 2 > total + total // 100 and not capped:
        return [Finding("ok", rule, summary)]
    why = "GTT is at or below the kernel's default, half of memory" if reach * 2 <= total + total // 100 else "allocations past it fail"
    if capped:
        why = f"amdgpu reports {gib(gtt)} of GTT but {module}.pages_limit allows {gib(limit[1])}: {why}"
    gttsize = ", and drop amdgpu.gttsize (deprecated: TTM caps GTT)" if capped or (limit and gtt < limit[1]) else ""
    if limit and gtt < limit[1] and limit[1] >= pages * PAGE:
        return [Finding("WARN", rule, f"{summary}: {why}", f"{GTT}; {TTM}",
                        "drop amdgpu.gttsize from the kernel command line and /etc/modprobe.d (deprecated: GTT then follows TTM's limit)")]  # fmt: skip
    return [Finding("WARN", rule, f"{summary}: {why}", f"{GTT}; {TTM}", ttm_fix(ctx, module, pages) + gttsize)]


def kernel_version(release: str) -> Tuple[int, int, int]:
    match = re.match(r"([0-9]{1,4})\.([0-9]{1,4})(?:\.([0-9]{1,6}))?", release.strip())
    if not match:
        raise Refused("not a kernel version (major.minor[.patch])")
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def check_kernel(ctx: Context) -> List[Finding]:
    rule = "kernel"
    minima = [(t, KERNEL_MINIMUM[t]) for t in ctx.targets if t in KERNEL_MINIMUM]
    needs = ", ".join(f"{t} needs {'.'.join(map(str, m))}" for t, m in minima) or f"no minimum known for {', '.join(ctx.targets)}"
    text = ctx.box.read("proc/sys/kernel/osrelease", rule, KERNEL)
    release = (text or "").strip()
    version = ctx.box.value(rule, "/proc/sys/kernel/osrelease", release, kernel_version, KERNEL, f"uname -r: {needs}") if release else None
    if version is None:
        if not release:
            ctx.box.note(rule, "/proc/sys/kernel/osrelease says nothing: the kernel's version is unknown", KERNEL, f"uname -r: {needs}")
        return []
    if not minima:
        return [Finding("ok", rule, f"{release} ({needs})")]
    low = [(t, m) for t, m in minima if version < m]
    if low:
        named = ", ".join(f"{t} needs {'.'.join(map(str, m))}" for t, m in low)
        return [Finding(
            "WARN", rule, f"{shown(release)}: {named} (older kernels are unstable under AI workloads on it; a distribution may have backported the fix)",
            KERNEL, f"install a kernel >= {'.'.join(map(str, max(m for _, m in low)))} (your distribution's, or its mainline/HWE kernel) and reboot into it",
        )]  # fmt: skip
    return [Finding("ok", rule, shown(release))]


def os_release(box: Box) -> Dict[str, str]:
    for relative in ("etc/os-release", "usr/lib/os-release"):
        text = box.read(relative, "firmware", OS_RELEASE)
        if text is not None:
            fields = re.findall(r"^([A-Z_]+)=(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"']*)[ \t]*$", text, re.M)
            return {k: v.strip("\"'") for k, v in fields}
    return {}


def family(box: Box) -> Family:
    """The distribution family by /etc/os-release's ID, then each of ID_LIKE."""
    fields = os_release(box)
    ids = [fields.get("ID", ""), *fields.get("ID_LIKE", "").split()]
    for name in ids:
        for fam in FAMILIES:
            if name in fam.ids or any(name.startswith(i + "-") for i in fam.ids):  # opensuse-tumbleweed
                return fam
    return UNKNOWN_FAMILY


def run_tool(argv: Sequence[str]) -> Optional[str]:
    """A tool's output (at most READ_LIMIT bytes), or None when it is not installed; a tool that
    takes longer than TOOL_SECONDS is a Refused."""
    try:
        result = subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, timeout=TOOL_SECONDS)
    except FileNotFoundError:
        return None
    except subprocess.TimeoutExpired as e:
        raise Refused(f"{argv[0]} did not answer in {TOOL_SECONDS} s") from e
    except OSError as e:
        raise Refused(f"{argv[0]} could not run ({e.strerror or e})") from e
    return result.stdout[:READ_LIMIT].decode("utf-8", "replace")


def firmware_versions(ctx: Context) -> Optional[Dict[str, str]]:
    """Installed firmware packages -> version, asked the family's package manager (its database
    under the root), or None where it cannot be asked."""
    fam, root = ctx.family, str(ctx.box.root)
    if fam.name == "debian":
        out = run_tool(["dpkg-query", f"--admindir={ctx.box.path('var/lib/dpkg')}", "-W", "-f=${Package}\t${db:Status-Abbrev}\t${Version}\n", *fam.packages])
        rows = [line.split("\t") for line in (out or "").splitlines()]
        return None if out is None else {r[0]: r[2] for r in rows if len(r) == 3 and r[1][1:2] == "i"}
    if fam.name == "rpm":
        out = run_tool(["rpm", f"--root={root}", "-q", "--qf", "%{NAME}\t%{VERSION}-%{RELEASE}\n", *fam.packages])
        rows = [line.split("\t") for line in (out or "").splitlines()]
        return None if out is None else {r[0]: r[1] for r in rows if len(r) == 2}
    if fam.name == "arch":
        # pacman -Q reads its local database: a directory per package, `desc` in plain text.
        local = "var/lib/pacman/local"
        try:
            names = os.listdir(ctx.box.path(local))
        except OSError:
            return None
        found = {}
        for name in sorted(names):
            if any(name.startswith(p + "-") and name[len(p) + 1:].count("-") == 1 for p in fam.packages):
                fields = dict(re.findall(r"^%(NAME|VERSION)%\n(.*)$", ctx.box.read(f"{local}/{name}/desc", "firmware", FIRMWARE) or "", re.M))
                if fields.get("NAME") in fam.packages:
                    found[fields["NAME"]] = fields.get("VERSION", "")
        return found
    return None


def check_firmware(ctx: Context) -> List[Finding]:
    bad = sorted({b for t in ctx.targets for b in FIRMWARE_BAD.get(t, ())})
    if not bad:
        return []
    fam = ctx.family
    query = f"{fam.query} {' '.join(fam.packages)}" if fam.name else "dpkg -s linux-firmware, rpm -q linux-firmware or pacman -Q linux-firmware"
    fix = f"{query}: it must not be {' or '.join(bad)}"
    try:
        versions = firmware_versions(ctx)
    except Refused as e:
        return [Finding("note", "firmware", f"no firmware version readable here: {e}", FIRMWARE, fix)]
    if not versions:
        where = {"debian": "dpkg", "rpm": "rpm", "arch": "pacman"}.get(fam.name)
        said = f"{where} knows none of {', '.join(fam.packages)}" if versions is not None else (
            f"{where} is not here to ask" if where else "the distribution is not one this check knows (/etc/os-release)")
        return [Finding("note", "firmware", f"no linux-firmware version readable here ({said}): {', '.join(bad)} breaks ROCm on Strix Halo", FIRMWARE, fix)]
    hits = {p: v for p, v in versions.items() if any(v.startswith(b) for b in bad)}
    listed = ", ".join(f"{p} {shown(v)}" for p, v in sorted(versions.items()))
    if hits:
        return [Finding(
            "FAIL", "firmware", f"{listed}: {', '.join(bad)} breaks ROCm on Strix Halo (instability, crashes)",
            FIRMWARE, f"install linux-firmware 20260110 or newer (or downgrade to 20251111), then `{fam.initramfs}` and reboot",
        )]  # fmt: skip
    return [Finding("ok", "firmware", listed)]


CHECKS = (check_gpu, check_override, check_access, check_memory, check_kernel, check_firmware)


def check_box(root: Path, targets: Sequence[str]) -> List[Finding]:
    box = Box(root)
    gpus, complete = gpu_nodes(box)
    seen, steps = visible(gpus, box.environ())
    ctx = Context(box, targets, gpus, complete, seen, steps, family(box))
    findings = box.take_notes()
    for check in CHECKS:
        result = check(ctx)
        findings += box.take_notes() + result
    return findings


def set_targets(here: Path) -> Tuple[Optional[List[str]], str]:
    """The gpu targets of install_set.json beside this script, or None and why not ("" when
    there is no such file)."""
    path = here / SET_METADATA
    try:
        text = read_bounded(str(path)).decode("utf-8", "replace")
    except FileNotFoundError:
        return None, ""
    except (Refused, OSError) as e:
        return None, f"{path} {e}"
    try:
        data = json.loads(text)
    except RecursionError:
        return None, f"{path} is not JSON as this reads it (it nests deeper than Python's parser goes)"
    except ValueError as e:
        return None, f"{path} is not JSON ({' '.join(str(e).split()) or type(e).__name__})"
    if not isinstance(data, dict):
        return None, f"{path} is {type(data).__name__ if data is not None else 'null'}, not an object with `gpu_targets`"
    if "gpu_targets" not in data:
        return None, f"{path} has no `gpu_targets`"
    found = data["gpu_targets"]
    if not isinstance(found, list) or not found:
        kind = "null" if found is None else "empty" if found == [] else f"a {type(found).__name__}"
        return None, f"`gpu_targets` of {path} is {kind}, not a list of gfx names such as [\"gfx1151\"]"
    for i, name in enumerate(found):
        if not isinstance(name, str) or not GFX.fullmatch(name):
            return None, f"entry {i} of `gpu_targets` of {path} is {shown(json.dumps(name))}, not a gfx name such as \"gfx1151\""
    return found, ""


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default="/", help="the machine's root, where sys/, proc/ and dev/ are (default /)")
    parser.add_argument("--gpu-targets", help=f"comma-separated gfx names (default: `gpu_targets` of {SET_METADATA} beside this script)")
    args = parser.parse_args(argv)
    if args.gpu_targets is not None:
        targets = [t.strip() for t in args.gpu_targets.split(",") if t.strip()]
        wrong = [t for t in targets if not GFX.fullmatch(t)]
        why = f"--gpu-targets: {shown(wrong[0])} is not a gfx name such as gfx1151" if wrong else "" if targets else "--gpu-targets names none"
    else:
        targets, why = set_targets(Path(__file__).resolve().parent)
    if why or not targets:
        print(f"check_box: {why or 'no gpu targets'}: pass --gpu-targets gfx1151 or keep {SET_METADATA} beside this script", file=sys.stderr)
        return 2
    findings = check_box(Path(args.root), targets)
    for finding in findings:
        print("\n".join(finding.lines()))
    failures = sum(f.level == "FAIL" for f in findings)
    warnings = sum(f.level == "WARN" for f in findings)
    notes = sum(f.level == "note" for f in findings)
    verdict = "fix the failures before running the set" if failures else "the set can run here"
    if notes and not failures:
        verdict += " as far as this could tell: check the notes by hand"
    print(f"check_box: {failures} failure(s), {warnings} warning(s){f', {notes} note(s)' if notes else ''}: {verdict}.")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
