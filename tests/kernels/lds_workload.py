"""A tiny workload for triton_kernels.py that proves the LDS check is the device's.

    python rules/rocm_build/scripts/triton_kernels.py --workload tests/kernels/lds_workload.py \
        --target gfx1151 --target gfx950 --report lds.json

Two cases launch one tiled fp16 matmul kernel:
- "fits_64k": 64 x 64 tiles, BLOCK_K 32, two stages: a few KiB of LDS, compiles everywhere.
- "needs_128k": 256 x 256 tiles, BLOCK_K 128, two stages: the A and B tiles take 128 KiB of
  LDS, so Triton raises OutOfResources (shared memory, 131072 > 65536) on gfx1151 and every
  64 KiB arch, and the kernel loads on gfx950 (160 KiB).
"""

from __future__ import annotations

from typing import Callable, Iterable

import torch
import triton
import triton.language as tl


@triton.jit
def tiled_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                 stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a_tile = tl.load(a, mask=(rm[:, None] < M) & (rk[None, :] < k_left), other=0.0)
        b_tile = tl.load(b, mask=(rk[:, None] < k_left) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a_tile, b_tile)
        a += BLOCK_K * stride_ak
        b += BLOCK_K * stride_bk
    c = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c, acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(block_m: int, block_n: int, block_k: int, num_stages: int, size: int = 512) -> None:
    a = torch.empty((size, size), dtype=torch.float16)
    b = torch.empty((size, size), dtype=torch.float16)
    c = torch.empty((size, size), dtype=torch.float16)
    grid = (triton.cdiv(size, block_m), triton.cdiv(size, block_n))
    tiled_matmul[grid](a, b, c, size, size, size, a.stride(0), a.stride(1), b.stride(0),
                       b.stride(1), c.stride(0), c.stride(1), BLOCK_M=block_m, BLOCK_N=block_n,
                       BLOCK_K=block_k, num_warps=8, num_stages=num_stages)


def cases() -> Iterable[tuple[str, Callable[[], None]]]:
    return [
        ("fits_64k", lambda: matmul(64, 64, 32, num_stages=2)),
        ("needs_128k", lambda: matmul(256, 256, 128, num_stages=2)),
    ]
