"""Compile every Triton kernel an upstream's own Python entry points launch, for named AMD GPUs.

Usage:
    python triton_kernels.py --workload PATH/TO/workload.py --target gfx1151 [--target gfx942 ...] \
        --report report.json [--under-test expected.json] [--jobs N]

No GPU and no ROCm are needed: Triton's AMD backend (in PyPI's triton wheel) compiles and links
AMDGPU code objects in process. For each target this script installs a compile-only HIP driver
that answers what a launch asks (target, device, stream, device properties, loading the code
object) and launches nothing, so an upstream's entry points, called with CPU tensors, compile
every specialization they would run on that GPU and hit Triton's own resource checks
(`OutOfResources` for LDS and threads) as they would on the device.

The workload is a Python file defining `cases()`, which returns an iterable of
(name, callable). `cases()` is called once per target, after that target's driver is active,
so a workload can reset any arch-dependent state of its upstream there. Each case runs in
try/except: an exception is recorded as a failure of that case on that target and the next
case runs. With `--jobs N` the cases are spread over N processes and their reports merged into
the one a single process writes (kernel_shards.py), so cases must not rest on each other's state.

Each compiled kernel is reported with its arch read from the code object's ELF header and its
register, spill and scratch use read from the code object's AMDGPU metadata note (MessagePack,
decoded here), and its LDS use from Triton's metadata. The report is JSON:
    {"targets": {"gfx1151": {"kernels": [...], "failures": [...], "autotune_pruned": [...],
                             "seconds": N, "cases": [case, ...], "case_seconds": {case: N},
                             "limits": {...}}},
     "triton": VERSION, "torch": VERSION, "under_test": [...]}
`under_test` is what the test's rule says it compiles (the `under_test` of the --under-test file:
each the target, its wheel file or tree, the pin and each patch's sha256, and `line`, as
people read it): triton and torch are the venv's, the kernels are the upstream's.
Exit status: 0 whenever the workload ran (failures are data; the caller decides), 2 when the
script could not run (workload missing or not importable, unknown target).

Needs triton and torch in the running interpreter, and nothing else third-party.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import hashlib
import importlib.util
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from typing import Any, Callable, Iterable

from amdgpu_elf import amdgpu_arch
from kernel_shards import claimed_cases, merge_reports, pruned_key


# --------------------------------------------------------------------------------------------
# Per-arch limits a HIP device would report.


@dataclasses.dataclass(frozen=True)
class ArchLimits:
    lds_bytes: int  # LDS a workgroup may allocate (hipDeviceProp_t.sharedMemPerBlock)
    max_threads: int  # work-items in a workgroup (maxThreadsPerBlock)
    wavefront: int  # lanes in a wavefront as HIP and Triton use it (warpSize)
    cu_count: int  # compute units of one representative product (multiProcessorCount)
    product: str  # the product cu_count is taken from


# Sources:
# - LDS: LLVM AMDGPUUsage, "Memory Spaces" / "LDS" ("up to 64 KiB ... per work-group"; gfx950
#   has 160 KiB, as in LLVM's `FeatureAddressableLocalMemorySize163840` for gfx950); AMD's
#   RDNA3 / RDNA3.5 / RDNA4 ISA guides ("LDS ... 64 KB per work-group", 128 KB per WGP);
#   CDNA3 ISA guide (64 KB LDS per CU); CDNA4 ISA guide (160 KB LDS per CU); and ROCm's
#   hipDeviceProp_t.sharedMemPerBlock, which is 65536 on gfx1100 / gfx942 and 163840 on gfx950.
# - Threads: HIP's maxThreadsPerBlock is 1024 on every GCN/CDNA/RDNA device; LLVM AMDGPUUsage's
#   "amdgpu-flat-work-group-size" defaults to and caps at 1024.
# - Wavefront: LLVM AMDGPUUsage (GFX9 and CDNA are wave64 only; GFX10+ support wave32 and wave64,
#   and HIP compiles gfx10+ for wave32, so warpSize is 32 there); Triton's AMD backend uses the
#   same (GPUTarget("hip", arch, 32) for gfx11/gfx12, 64 for gfx9).
# - CU counts are of one product each (AMD's product specifications) and only plausible values:
#   nothing checks them; some upstreams size grids from them.
ARCHS: dict[str, ArchLimits] = {
    "gfx1151": ArchLimits(65536, 1024, 32, 40, "Ryzen AI Max+ 395 / Radeon 8060S (RDNA 3.5)"),
    "gfx1150": ArchLimits(65536, 1024, 32, 16, "Ryzen AI 9 HX 370 / Radeon 890M (RDNA 3.5)"),
    "gfx1100": ArchLimits(65536, 1024, 32, 96, "Radeon RX 7900 XTX (RDNA 3)"),
    "gfx1201": ArchLimits(65536, 1024, 32, 64, "Radeon RX 9070 XT (RDNA 4)"),
    "gfx90a": ArchLimits(65536, 1024, 64, 104, "Instinct MI210 (CDNA 2)"),
    "gfx942": ArchLimits(65536, 1024, 64, 304, "Instinct MI300X (CDNA 3)"),
    "gfx950": ArchLimits(163840, 1024, 64, 256, "Instinct MI355X (CDNA 4)"),
}


# --------------------------------------------------------------------------------------------
# AMDGPU code objects: arch from the ELF header, resource use from the metadata note.

SHT_NOTE = 7
NT_AMDGPU_METADATA = 32


def elf_arch(blob: bytes) -> str:
    """The gfx name in an AMDGPU ELF's header (e_machine, e_flags & 0xff), as the wheels'
    GPU-code audit reads it (amdgpu_elf.py, shipped beside this script)."""
    arch = amdgpu_arch(blob)
    if arch is None:
        raise ValueError("not a 64-bit AMDGPU ELF")
    return arch


def elf_notes(blob: bytes) -> Iterable[tuple[str, int, bytes]]:
    """(owner, type, descriptor) of each note in a 64-bit little-endian ELF's SHT_NOTE sections."""
    (shoff,) = struct.unpack_from("<Q", blob, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", blob, 0x3A)
    for i in range(shnum):
        _, sh_type, _, _, offset, size = struct.unpack_from("<IIQQQQ", blob, shoff + i * shentsize)
        if sh_type != SHT_NOTE:
            continue
        at, end = offset, offset + size
        while at + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", blob, at)
            name_at = at + 12
            desc_at = name_at + (namesz + 3) // 4 * 4
            owner = blob[name_at:name_at + namesz].rstrip(b"\0").decode("ascii", "replace")
            yield owner, ntype, blob[desc_at:desc_at + descsz]
            at = desc_at + (descsz + 3) // 4 * 4


def unpack_msgpack(data: bytes) -> Any:
    """Decode one MessagePack value (the subset LLVM writes, plus the rest of the format)."""
    value, _ = _msgpack_at(data, 0)
    return value


def _msgpack_at(b: bytes, i: int) -> tuple[Any, int]:
    t = b[i]
    i += 1
    if t <= 0x7F:
        return t, i
    if t >= 0xE0:
        return t - 0x100, i
    if 0x80 <= t <= 0x8F:
        return _msgpack_map(b, i, t & 0x0F)
    if 0x90 <= t <= 0x9F:
        return _msgpack_array(b, i, t & 0x0F)
    if 0xA0 <= t <= 0xBF:
        n = t & 0x1F
        return b[i:i + n].decode("utf-8", "replace"), i + n
    fixed = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h", 0xD2: ">i",
             0xD3: ">q", 0xCA: ">f", 0xCB: ">d"}  # fmt: skip
    if t in fixed:
        (v,) = struct.unpack_from(fixed[t], b, i)
        return v, i + struct.calcsize(fixed[t])
    if t in (0xC0, 0xC2, 0xC3):
        return {0xC0: None, 0xC2: False, 0xC3: True}[t], i
    lengths = {0xD9: ">B", 0xDA: ">H", 0xDB: ">I", 0xC4: ">B", 0xC5: ">H", 0xC6: ">I",
               0xDC: ">H", 0xDD: ">I", 0xDE: ">H", 0xDF: ">I", 0xC7: ">B", 0xC8: ">H", 0xC9: ">I"}  # fmt: skip
    if t in lengths:
        (n,) = struct.unpack_from(lengths[t], b, i)
        i += struct.calcsize(lengths[t])
        if t in (0xD9, 0xDA, 0xDB):
            return b[i:i + n].decode("utf-8", "replace"), i + n
        if t in (0xC4, 0xC5, 0xC6):
            return bytes(b[i:i + n]), i + n
        if t in (0xDC, 0xDD):
            return _msgpack_array(b, i, n)
        if t in (0xDE, 0xDF):
            return _msgpack_map(b, i, n)
        return ("ext", b[i], bytes(b[i + 1:i + 1 + n])), i + 1 + n  # ext 8/16/32
    if 0xD4 <= t <= 0xD8:  # fixext 1..16
        n = 1 << (t - 0xD4)
        return ("ext", b[i], bytes(b[i + 1:i + 1 + n])), i + 1 + n
    raise ValueError(f"MessagePack type byte {t:#x} at {i - 1}")


def _msgpack_array(b: bytes, i: int, n: int) -> tuple[list, int]:
    out = []
    for _ in range(n):
        v, i = _msgpack_at(b, i)
        out.append(v)
    return out, i


def _msgpack_map(b: bytes, i: int, n: int) -> tuple[dict, int]:
    out = {}
    for _ in range(n):
        k, i = _msgpack_at(b, i)
        v, i = _msgpack_at(b, i)
        out[k] = v
    return out, i


def kernel_metadata(hsaco: bytes, name: str) -> dict[str, Any]:
    """The `amdhsa.kernels` entry for kernel `name` (or the only one) in a code object."""
    for owner, ntype, desc in elf_notes(hsaco):
        if owner == "AMDGPU" and ntype == NT_AMDGPU_METADATA:
            kernels = unpack_msgpack(desc).get("amdhsa.kernels", [])
            for k in kernels:
                if k.get(".name") == name:
                    return k
            if len(kernels) == 1:
                return kernels[0]
    raise ValueError(f"no AMDGPU metadata for kernel {name}")


def resource_use(hsaco: bytes, name: str) -> dict[str, Any]:
    meta = kernel_metadata(hsaco, name)
    return {
        "arch": elf_arch(hsaco),
        "vgpr_count": meta.get(".vgpr_count"),
        "agpr_count": meta.get(".agpr_count"),
        "sgpr_count": meta.get(".sgpr_count"),
        "vgpr_spill_count": meta.get(".vgpr_spill_count", 0),
        "sgpr_spill_count": meta.get(".sgpr_spill_count", 0),
        "scratch_bytes": meta.get(".private_segment_fixed_size", 0),
        "wavefront_size": meta.get(".wavefront_size"),
        "max_flat_workgroup_size": meta.get(".max_flat_workgroup_size"),
    }


# --------------------------------------------------------------------------------------------
# What was compiled, and what failed.


@dataclasses.dataclass
class Recorder:
    target: str = ""
    case: str = ""
    kernels: list[dict] = dataclasses.field(default_factory=list)
    failures: list[dict] = dataclasses.field(default_factory=list)
    pruned: list[dict] = dataclasses.field(default_factory=list)
    seen: set[str] = dataclasses.field(default_factory=set)  # Triton's hashes, and pruned configs

    def start_target(self, target: str) -> None:
        self.target, self.case = target, ""
        self.kernels, self.failures, self.pruned, self.seen = [], [], [], set()

    def add_compiled(self, compiled: Any) -> None:
        """Record a triton CompiledKernel, once per specialization (Triton's hash of source,
        specialization, options and target: two specializations may share machine code)."""
        if compiled.hash in self.seen:
            return
        self.seen.add(compiled.hash)
        hsaco = compiled.asm["hsaco"]
        digest = hashlib.sha256(hsaco).hexdigest()
        meta = compiled.metadata
        record = {
            "name": compiled.name,
            "triton_hash": compiled.hash,  # what a specialization is, to Triton's caches
            "case": self.case,
            "target": self.target,
            "key": specialization_key(compiled),
            "signature": signature_of(compiled),
            "lds_bytes": meta.shared,
            "num_warps": meta.num_warps,
            "num_stages": getattr(meta, "num_stages", None),
            "code_object_sha256": digest,
            # Set when the driver loads it, i.e. it passed Triton's LDS check and was launched.
            "loaded": False,
        }
        record.update(resource_use(hsaco, compiled.name))
        self.kernels.append(record)

    def mark_loaded(self, hsaco: bytes) -> None:
        digest = hashlib.sha256(hsaco).hexdigest()
        for record in self.kernels:
            if record["code_object_sha256"] == digest:
                record["loaded"] = True

    def add_failure(self, exc: BaseException, during: str = "case") -> dict:
        compiled, jit_name = kernel_of(exc)
        record = {
            "case": self.case,
            "target": self.target,
            "during": during,
            "kernel": compiled.name if compiled is not None else jit_name,
            "key": specialization_key(compiled) if compiled is not None else None,
            "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
            "message": str(exc).strip()[-2000:],
        }
        for field in ("required", "limit"):
            if hasattr(exc, field):
                record[field] = getattr(exc, field)
        if hasattr(exc, "name") and type(exc).__name__ == "OutOfResources":
            record["resource"] = exc.name
        if during == "case":
            self.failures.append(record)
        elif pruned_key(record) not in self.seen:  # each config once, with the first case that tried it
            self.seen.add(pruned_key(record))
            self.pruned.append(record)
        return record


def kernel_of(exc: BaseException) -> tuple[Any, str | None]:
    """The CompiledKernel (or at least the JIT function's name) an exception came from.

    Triton raises OutOfResources from CompiledKernel._init_handles and compile errors under
    JITFunction.run; both have the object as `self` in a frame of the traceback, or a
    `kernel` local in JITFunction.run when a cached kernel re-raises its saved error.
    """
    from triton.compiler.compiler import CompiledKernel
    from triton.runtime.jit import JITFunction

    compiled, jit_name = None, None
    tb = exc.__traceback__
    while tb is not None:
        local = tb.tb_frame.f_locals
        for candidate in (local.get("self"), local.get("kernel")):
            if isinstance(candidate, CompiledKernel):
                compiled = candidate
            elif isinstance(candidate, JITFunction):
                jit_name = candidate.fn.__name__
        tb = tb.tb_next
    return compiled, jit_name


def specialization_key(compiled: Any) -> str:
    """The kernel's declared constexprs and launch options in clear, plus a short hash of
    the rest of what Triton specialized on (argument types, None and 1 arguments folded to
    constants, 16-byte alignment): readable, and distinct for distinct specializations."""
    src, meta = compiled.src, compiled.metadata
    params = getattr(getattr(src, "fn", None), "params", [])
    declared = {p.num: p.name for p in params if p.is_constexpr}
    consts = [f"{declared[path[0]]}={_short(value)}"
              for path, value in sorted(getattr(src, "constants", {}).items())
              if len(path) == 1 and path[0] in declared]
    rest = f"{signature_of(compiled)}|{sorted(getattr(src, 'constants', {}).items())}|" \
           f"{sorted(getattr(src, 'attrs', {}).items())}"
    digest = hashlib.sha256(rest.encode()).hexdigest()[:8]
    opts = f"warps={meta.num_warps} stages={getattr(meta, 'num_stages', '?')}"
    return f"{' '.join(consts)} | {opts} | sig#{digest}".strip()


def signature_of(compiled: Any) -> str:
    """Argument types in order ("constexpr" for constants), as Triton's signature has them."""
    return ",".join(str(v) for v in getattr(compiled.src, "signature", {}).values())


def _short(value: Any) -> str:
    text = getattr(value, "__name__", None) or str(value)
    return text if len(text) <= 24 else text[:21] + "..."


# --------------------------------------------------------------------------------------------
# The compile-only HIP driver.


def driver_class(arch: str, limits: ArchLimits, recorder: Recorder) -> type:
    """A Triton driver class for `arch`: default-constructible, because Triton may build its
    default driver itself from `backends[...].driver`."""
    from triton.backends.compiler import GPUTarget
    from triton.backends.driver import DriverBase
    from triton.runtime.errors import OutOfResources

    class CompileOnlyHIPUtils:
        def get_device_properties(self, device: int) -> dict[str, Any]:
            # The keys of triton/backends/amd/driver.c getDeviceProperties.
            return {
                "max_shared_mem": limits.lds_bytes,
                "max_num_regs": 65536,  # regsPerBlock; nothing in Triton's launch path reads it
                "multiprocessor_count": limits.cu_count,
                # Placeholders: only triton.testing's roofline helpers read these three.
                "sm_clock_rate": 2_000_000,
                "mem_clock_rate": 1_000_000,
                "mem_bus_width": 256,
                "arch": arch,
                "warpSize": limits.wavefront,
                "max_threads_per_sm": 2048,  # placeholder, as above
                "cooperativeLaunch": 1,
            }

        def load_binary(self, name: str, hsaco: bytes, shared: int, device: int):
            # What hipModuleLoadDataEx + hipFuncGetAttribute would say, from the code object:
            # registers (VGPRs a lane), spills (scratch dwords a lane, as the HIP driver
            # divides LOCAL_SIZE_BYTES by 4) and max threads.
            use = resource_use(hsaco, name)
            recorder.mark_loaded(hsaco)
            max_threads = min(use["max_flat_workgroup_size"] or 1024, limits.max_threads)
            return 0, 0, use["vgpr_count"] or 0, (use["scratch_bytes"] or 0) // 4, max_threads

        def launch(self, *args: Any, **kwargs: Any) -> None:
            pass

        def set_printf_fifo_size(self, size: int) -> None:
            pass

    class CompileOnlyLauncher:
        def __init__(self, src: Any, metadata: Any) -> None:
            pass

        def __call__(self, *args: Any, **kwargs: Any) -> None:
            pass  # the launch: nothing runs

    def benchmarker(kernel_call: Callable, quantiles: Any = None, **kwargs: Any) -> Any:
        # Autotuners call this per config: compile the config (that is the point), time
        # nothing. A config that does not fit is recorded and re-raised, so the autotuner
        # prunes it as it would on the device.
        try:
            kernel_call()
        except OutOfResources as exc:
            recorder.add_failure(exc, during="autotune")
            raise
        return [1.0] * len(quantiles) if quantiles else 1.0

    class CompileOnlyHIPDriver(DriverBase):
        def __init__(self) -> None:
            self.utils = CompileOnlyHIPUtils()
            self.launcher_cls = CompileOnlyLauncher

        @staticmethod
        def is_active() -> bool:
            return True

        def map_python_to_cpp_type(self, ty: str) -> str:
            from triton.backends.amd.driver import ty_to_cpp

            return ty_to_cpp(ty)

        def get_current_target(self) -> Any:
            return GPUTarget("hip", arch, limits.wavefront)

        def get_current_device(self) -> int:
            return 0

        def set_current_device(self, device: int) -> None:
            pass

        def get_current_stream(self, device: int | None = None) -> int:
            return 0

        def get_device_capability(self, device: int = 0) -> tuple[int, int]:
            return hip_capability(arch)

        def get_active_torch_device(self) -> Any:
            import torch

            return torch.device("cpu")  # where the workload's tensors live

        def get_device_interface(self) -> Any:
            import torch

            return torch.cuda

        def get_benchmarker(self) -> Callable:
            return benchmarker

        def get_empty_cache_for_benchmark(self) -> Any:
            import torch

            return torch.empty(0)

        def clear_cache(self, cache: Any) -> None:
            pass

    CompileOnlyHIPDriver.__qualname__ = f"CompileOnlyHIPDriver[{arch}]"
    return CompileOnlyHIPDriver


def hip_capability(arch: str) -> tuple[int, int]:
    """(major, minor) as HIP derives them from the gfx name: gfx942 -> (9, 4),
    gfx1151 -> (11, 5)."""
    digits = arch[3:]
    if len(digits) == 4:
        return int(digits[:2]), int(digits[2])
    return int(digits[0]), int(digits[1])


class DriverSwap:
    """Makes the compile-only driver the one active Triton driver, and undoes it."""

    def __init__(self) -> None:
        from triton.backends import backends

        self.backends = backends
        self.saved = dict(backends)

    def install(self, driver_cls: type) -> None:
        from triton.runtime import driver  # the DriverConfig instance

        for name, backend in self.saved.items():
            cls = driver_cls if name == "amd" else _inactive(backend.driver)
            self.backends[name] = dataclasses.replace(backend, driver=cls)
        # Forget a default driver built for an earlier target (Triton builds it lazily).
        driver._default = None
        driver.set_active(driver_cls())

    def restore(self) -> None:
        self.backends.clear()
        self.backends.update(self.saved)


def _inactive(cls: type) -> type:
    # A GPU host's other drivers (CUDA's) answer is_active from torch; here, whatever a
    # workload's test doubles make torch say, only the HIP driver may be active.
    return type(cls.__name__, (cls,), {"is_active": staticmethod(lambda: False)})


def clear_triton_caches() -> None:
    """Forget every in-memory compiled kernel, autotuner choice and device property, so the
    next target recompiles and is checked against its own limits: a JITFunction's
    device_caches hold the target they were built for, and Triton caches max_shared_mem per
    device index (the same index, 0, for every target here)."""
    from triton.compiler import compiler
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    compiler.max_shared_mem.cache_clear()
    with warnings.catch_warnings():  # isinstance() on torch's deprecated module attributes
        warnings.simplefilter("ignore")
        objects = [o for o in gc.get_objects() if isinstance(o, (JITFunction, Autotuner))]
    for obj in objects:
        if isinstance(obj, JITFunction):
            obj.device_caches.clear()
            obj.kernel = None
        elif isinstance(obj, Autotuner):
            obj.cache.clear()
            obj.__dict__.pop("do_bench", None)  # a cached_property holding the old benchmarker


def compile_hook(recorder: Recorder) -> Callable:
    """A jit_post_compile_hook that records the kernel JITFunction.run has just cached."""

    def hook(*, key: Any, fn: Any, compile: dict, **_: Any) -> None:
        cache = fn.jit_function.device_caches[compile["device"]][0]
        compiled = cache.get(key)
        if compiled is not None and hasattr(compiled, "asm"):
            recorder.add_compiled(compiled)
        return None

    return hook


# --------------------------------------------------------------------------------------------
# Running a workload.


def load_workload(path: str) -> Any:
    name = "triton_kernels_workload_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    if not callable(getattr(module, "cases", None)):
        raise ImportError(f"{path} defines no cases()")
    return module


def run_target(workload: Any, target: str, swap: DriverSwap, recorder: Recorder,
               scratch: str, claims: str | None = None) -> dict:
    swap.install(driver_class(target, ARCHS[target], recorder))
    clear_triton_caches()
    # A fresh file cache per target: nothing read from ~/.triton or from an earlier target,
    # and each target's time is a cold compile.
    os.environ["TRITON_CACHE_DIR"] = os.path.join(scratch, f"cache-{target}")
    recorder.start_target(target)
    started = time.monotonic()
    try:
        cases = list(workload.cases())
    except Exception as exc:  # the workload could not even list its cases on this target
        recorder.case = "cases()"
        recorder.add_failure(exc)
        cases = []
    case_seconds: dict[str, float] = {}
    for index in claimed_cases(len(cases), claims, target):  # with --claims, those no other process took
        name, call = cases[index]
        recorder.case = name
        case_started = time.monotonic()
        try:
            call()
        except Exception as exc:
            record = recorder.add_failure(exc)
            if os.environ.get("TRITON_KERNELS_TRACEBACK"):
                traceback.print_exc()
            print(f"  {target} {name}: {record['type']}: {record['message'][:200]}", file=sys.stderr)
        finally:
            case_seconds[name] = round(time.monotonic() - case_started, 2)
    return {
        "limits": dataclasses.asdict(ARCHS[target]),
        "cases": [name for name, _ in cases],
        "case_seconds": case_seconds,
        "kernels": recorder.kernels,
        "failures": recorder.failures,
        "autotune_pruned": recorder.pruned,
        "seconds": round(time.monotonic() - started, 2),
    }


def summary(target: str, result: dict) -> str:
    kernels = result["kernels"]
    # SGPR spills go to VGPR lanes, and on gfx90a+ VGPR spills may go to AGPRs: only a
    # private segment (scratch) means spills to memory.
    spilling = [k for k in kernels if k["vgpr_spill_count"] or k["sgpr_spill_count"]]
    to_scratch = [k for k in spilling if k["scratch_bytes"]]
    lines = [
        f"{target}: {len({k['name'] for k in kernels})} kernels, {len(kernels)} specializations, "
        f"{len(result['failures'])} failures, {len(spilling)} spilling "
        f"({len(to_scratch)} to scratch), {result['seconds']} s"
    ]
    for k in spilling:
        lines.append(
            f"  spills {k['name']} [{k['case']}] vgpr {k['vgpr_count']} spill {k['vgpr_spill_count']} "
            f"sgpr spill {k['sgpr_spill_count']} scratch {k['scratch_bytes']} B"
        )
    for f in result["failures"]:
        lines.append(f"  failed {f['case']} ({f['kernel']}): {f['type'].rsplit('.', 1)[-1]}: "
                     f"{f['message'].splitlines()[-1][:160] if f['message'] else ''}")
    return "\n".join(lines)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", required=True, help="a .py file defining cases()")
    parser.add_argument("--target", action="append", required=True, help="gfx arch, repeatable")
    parser.add_argument("--report", required=True, help="where to write the JSON report")
    parser.add_argument("--under-test", help="a JSON file whose `under_test` names what is compiled (expected.json)")
    parser.add_argument("--jobs", type=int, default=1, help="processes to spread the cases over (Pants' share of the cores)")
    parser.add_argument("--claims", help="a folder the processes of --jobs take each next case from (--jobs sets it)")
    return parser.parse_args(argv)


def read_under_test(path: str | None) -> list[dict[str, Any]]:
    """The `under_test` of the file the test's rule wrote (sandbox.py's expected.json); [] without one."""
    if not path:
        return []
    with open(path) as f:
        return list(json.load(f).get("under_test") or [])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    unknown = [t for t in args.target if t not in ARCHS]
    if unknown:
        print(f"unknown target(s) {', '.join(unknown)}; known: {', '.join(sorted(ARCHS))}", file=sys.stderr)
        return 2
    if not os.path.isfile(args.workload):
        print(f"no workload at {args.workload}", file=sys.stderr)
        return 2
    if args.jobs > 1:
        return run_shards(args)
    # Before triton is imported: its home (dump, override and default cache dirs) and
    # cache dir point at a scratch dir, never ~/.triton.
    scratch = tempfile.mkdtemp(prefix="triton-kernels-")
    os.environ["TRITON_HOME"] = scratch
    os.environ["TRITON_CACHE_DIR"] = os.path.join(scratch, "cache")

    import torch
    import triton
    from triton import knobs

    recorder = Recorder()
    swap = DriverSwap()
    # The workload imports its upstream, which may check for one active driver at import
    # (vLLM's triton_utils does): install the first target's driver before importing it.
    swap.install(driver_class(args.target[0], ARCHS[args.target[0]], recorder))
    knobs.runtime.jit_post_compile_hook = compile_hook(recorder)
    try:
        workload = load_workload(os.path.abspath(args.workload))
    except Exception:
        traceback.print_exc()
        print(f"could not import workload {args.workload}", file=sys.stderr)
        shutil.rmtree(scratch, ignore_errors=True)
        return 2

    report: dict[str, Any] = {
        "targets": {}, "triton": triton.__version__, "torch": torch.__version__, "under_test": read_under_test(args.under_test),
    }  # fmt: skip
    try:
        for target in args.target:
            result = run_target(workload, target, swap, recorder, scratch, args.claims)
            report["targets"][target] = result
            if not args.claims:  # one process's part is summed up by the process that merges them
                print(summary(target, result))
    finally:
        knobs.runtime.jit_post_compile_hook = None
        swap.restore()
        shutil.rmtree(scratch, ignore_errors=True)
    write_report(args.report, report)
    return 0


def run_shards(args: argparse.Namespace) -> int:
    """This script --jobs times side by side, each taking the next case from a shared folder of
    claims (kernel_shards.py) and writing its report beside args.report; then their merged
    report there, as one process writes it."""
    claims = tempfile.mkdtemp(prefix="case-claims-", dir=os.path.dirname(os.path.abspath(args.report)))
    parts = [f"{args.report}.{i}-of-{args.jobs}" for i in range(args.jobs)]
    common = [sys.executable, os.path.abspath(__file__), "--workload", args.workload, "--claims", claims]
    common += [arg for target in args.target for arg in ("--target", target)]
    common += ["--under-test", args.under_test] if args.under_test else []
    try:
        processes = [subprocess.Popen([*common, "--report", part]) for part in parts]
        codes = [process.wait() for process in processes]
    finally:
        shutil.rmtree(claims, ignore_errors=True)
    if any(codes):
        print(f"a process of the cases failed (exit codes of the {args.jobs}: {codes})", file=sys.stderr)
        return 2
    reports = []
    for part in parts:
        with open(part) as f:
            reports.append(json.load(f))
        os.remove(part)
    report = merge_reports(reports)
    for target, result in report["targets"].items():
        print(summary(target, result))
    write_report(args.report, report)
    return 0


def write_report(path: str, report: dict[str, Any]) -> None:
    with open(path, "w") as out:
        json.dump(report, out, indent=1, sort_keys=True, default=str)
        out.write("\n")


if __name__ == "__main__":
    sys.exit(main())
