"""A built wheel to inspect: what the gpu-code audit (gpu_audit.py) and the manylinux policy
check (portable.py) are each asked about."""

from __future__ import annotations

from dataclasses import dataclass

from pants.engine.fs import Digest


@dataclass(frozen=True)
class BuiltWheel:
    wheel: Digest  # the wheel alone, at the digest root
    wheel_name: str
