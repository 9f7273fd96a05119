"""The CPU benchmark (``python benchmarks/bench.py --cpu``): the CPU forward (B4 D1024 L4096 fp32, silu)
against ``F.silu(F.conv1d(...))``, median wall time of 20 calls after warm-up, checked against the
float64 reference first.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Callable, TypedDict

import torch
import torch.nn.functional as F
from bench_common import fwd_ref, load_ops, rel_err


class CpuResult(TypedDict):
    name: str
    us: float
    conv1d_us: float
    speedup: float
    threads: int


def cpu_bench() -> CpuResult:
    ops, _ = load_ops()
    B, D, L, W = 4, 1024, 4096, 4
    x = torch.randn(B, D, L)
    w = torch.randn(D, W) / 2
    b = torch.randn(D)
    out, _ = ops.fwd(x, w, b, None, None, False, True)
    ref, _ = fwd_ref(x, w, b, silu=True)
    assert rel_err(out, ref) < 1e-5

    def tm(fn: Callable[[], object], n: int = 20) -> float:
        for _ in range(3):
            fn()
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts) * 1e6

    t = tm(lambda: ops.fwd(x, w, b, None, None, False, True))
    tb = tm(lambda: F.silu(F.conv1d(x, w.unsqueeze(1), b, padding=W - 1, groups=D)[..., :L]))
    return {
        "name": "cpu fwd fp32 B4 D1024 L4096",
        "us": t,
        "conv1d_us": tb,
        "speedup": tb / t,
        "threads": torch.get_num_threads(),
    }


def main(args: argparse.Namespace) -> int:
    r = cpu_bench()
    print(
        f"{r['name']}: {r['us']:.0f} µs, F.conv1d {r['conv1d_us']:.0f} µs, {r['speedup']:.2f}x ({r['threads']} threads)"
    )
    if args.json:
        args.json.write_text(json.dumps(r, indent=2))
    return 0
