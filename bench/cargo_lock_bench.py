#!/usr/bin/env python3
"""vLLM 0.31.0's real rust/Cargo.lock, from its sdist on PyPI (pinned in components/archives.toml,
mirrored by ./setup), turned into the pinned crate set a build fetches (rust/cargo_lock.py, what
`cargo_lock` does before any download): how many crates by checksum, how many git crates by
commit, from which repositories, and how long reading the lock takes.

Usage: ./pants run bench/cargo_lock_bench.py [-- SDIST]
Sizes are not in a Cargo.lock, and crates.io is out of reach here, so the bytes are not measured.
"""

from __future__ import annotations

import os
import sys
import tarfile
import time
from collections import Counter
from pathlib import Path

from rocm_build.rust.cargo_lock import read_lock

CACHE = Path(os.environ.get("ROCM_PANTS_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rocm-pants")
SDIST = CACHE / "kernel-mirror/files/vllm-0.31.0.tar.gz"


def main() -> int:
    sdist = Path(sys.argv[1]) if len(sys.argv) > 1 else SDIST
    if not sdist.is_file():
        print(f"{sdist} is missing: run ./setup (it mirrors vLLM's sdist by its pinned sha256)", file=sys.stderr)
        return 1
    with tarfile.open(sdist) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/rust/Cargo.lock"))
        text = tar.extractfile(member).read().decode()
    start = time.perf_counter()
    locked = read_lock("rust/Cargo.lock", text, "components/vllm:wheel")
    seconds = time.perf_counter() - start
    print(f"{sdist.name} rust/Cargo.lock: {text.count('[[package]]')} packages")
    print(f"  crates.io crates, each a download by its sha256: {len(locked.registry)}")
    print(f"  git crates, each its repository at a commit: {len(locked.git)}")
    for url, n in sorted(Counter(c.url for c in locked.git).items()):
        commits = sorted({c.commit[:12] for c in locked.git if c.url == url})
        print(f"    {url} @ {', '.join(commits)}: {n} crate(s)")
    print(f"  problems: {len(locked.problems)}")
    print(f"  read in {seconds * 1000:.1f} ms")
    return 1 if locked.problems else 0


if __name__ == "__main__":
    sys.exit(main())
