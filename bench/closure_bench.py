#!/usr/bin/env python3
"""The install-set load check on about 1 GiB of real ELF files: the CPU torch 2.13.0, PyPI's
torchvision 0.28.0 and triton 3.7.1 that ./setup mirrors (components/kernels/pins.toml).

Usage: ./pants run bench/closure_bench.py -- PYTHON
  PYTHON: an interpreter with auditwheel and pyelftools, and msgpack and zstandard for the
  kpack reader elf_links.py imports (`pip install auditwheel==6.8.2 msgpack==1.1.0 zstandard==0.23.0`)

As `package` runs it: scripts/elf_links.py once a wheel, two at a time (Pants runs processes in
parallel, one a core here), then closure.py over all of them. Prints the wall time of each
step and the bytes of ELF files read. Goal (issue 40): <= 10 s on this 2-core machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from rocm_build.install.closure import check_closure, elves_of, glibc_names, system_libraries

CACHE = Path(os.environ.get("ROCM_PANTS_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rocm-pants")
WHEELS = (
    "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
    "torchvision-0.28.0-cp311-cp311-manylinux_2_28_x86_64.whl",
    "triton-3.7.1-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
)


def elf_bytes(wheel: Path) -> int:
    with zipfile.ZipFile(wheel) as z:
        return sum(i.file_size for i in z.infolist() if i.filename.endswith((".so",)) or ".so." in i.filename)


def main() -> int:
    python = sys.argv[1]
    paths = [CACHE / "kernel-mirror/files" / name for name in WHEELS]
    start = time.monotonic()
    with ThreadPoolExecutor(2) as pool:
        outputs = list(pool.map(lambda p: subprocess.run([python, str(ROOT / "rules/rocm_build/scripts/elf_links.py"), str(p)],
                                                           check=True, capture_output=True).stdout, paths))
    read = time.monotonic() - start
    found = {p.name: json.loads(out) for p, out in zip(paths, outputs)}
    start = time.monotonic()
    elves = [e for name, f in found.items() for e in elves_of(name, f["elves"])]
    script = str(ROOT / "rules/rocm_build/scripts/elf_links.py")
    policy = json.loads(subprocess.run([python, script, "--policy"], check=True, capture_output=True).stdout)
    closure = check_closure(elves, system_libraries(policy, ()), {}, {n: f["requires"] for n, f in found.items()}, glibc_names())
    decide = time.monotonic() - start
    size = sum(elf_bytes(p) for p in paths)
    print(f"{len(paths)} wheels, {size / 2**30:.2f} GiB of shared objects, {closure.elves} ELF files, {closure.links} "
          f"DT_NEEDED, {closure.symbols} undefined symbols: read {read:.1f} s, decided {decide:.1f} s, "
          f"total {read + decide:.1f} s; {len(closure.problems)} problem(s)")
    print("\n".join(f"  - {p[:200]}" for p in closure.problems))
    return 0


if __name__ == "__main__":
    sys.exit(main())
