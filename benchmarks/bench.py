"""Benchmark of the causal-conv1d CUDA kernels. One command, on any CUDA machine:

    python benchmarks/bench.py [--json OUT.json] [--quick]

Measures the copy ceiling (large device-to-device copy, bytes read + written), every target row
of the targets, practical Mamba shapes, decode updates, and the torch.nn.functional.conv1d baseline.
Each case is checked against a float64 reference before it is timed. Timings are the median of
CUDA-event timings after warm-up, with inputs rotated across enough buffers to exceed the L2
cache. Small shapes and decode updates are also timed inside a CUDA graph (kernel cost without
launch cost) and back to back in an eager loop ("loop µs" for the op, "api µs" for the Python API:
calls issued one after another, one synchronisation at the end, i.e. what a decode loop pays per
call); the eager targets are judged on "api µs". The table's header gives the host floor: the same
loop over a trivial torch op. `--cpu` times the CPU forward (B4 D1024 L4096 fp32) against F.conv1d
instead.

Kernel mode: `python benchmarks/bench.py --kernel [--peer PATH] [--json OUT.json]` times
every row of the kernel-mode table (benchmarks/RESULTS.md) plus the practical shapes with each op captured in a CUDA graph
(median of 20 replays; one replay runs the op over several input sets in turn, together > 3x the
L2, so no replay reads its inputs from the cache) next to the eager time (CUDA events around each
call). Each build runs in its own child process that prints JSON, so two builds that are both
`causal_conv1d` can be compared in one run: ours (the package this interpreter imports) and, with
`--peer PATH`, another build -- a directory where upstream causal-conv1d was built in place
(`python setup.py build_ext --inplace`), or the site-packages it was installed into. Upstream is
called through its own Python functions (`causal_conv1d.cpp_functions`: output allocation, the
zeroed fp32 weight-gradient buffers and their casts included, as its autograd does); ours through
the `causal_conv1d` torch ops. The copy ceiling (a 1 GiB device-to-device copy, bytes read +
written) is measured in the same run; `%copy` = bytes the op must move / graph time / ceiling.
`--fla PATH` adds flash-linear-attention's Triton kernels as a third column (FLA's package read
from PATH, e.g. a copy of its `fla/` tree: `fla.modules.conv.triton.ops.causal_conv1d_fwd / _bwd`,
the functions its autograd calls, on (B, T, D) channel-last memory; no decode rows). The packed
rows ("pfwd" / "pbwd": sequences packed into one row of B * L tokens) run ours through
`cu_seqlens` (packed_fwd / packed_bwd), FLA through `cu_seqlens` (its chunk indices prepared once,
outside the timing) and a `--peer` build through `seq_idx`.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import importlib
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable, Optional

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent


def _load_reference() -> Any:
    """causal_conv1d/_reference.py (the float64 references), loaded from its file: importing it as
    ``causal_conv1d._reference`` would import the package, and a kernel worker must be free to import
    the build it times (ours or ``--peer``'s) as ``causal_conv1d``."""
    spec = importlib.util.spec_from_file_location("causal_conv1d_reference", ROOT / "causal_conv1d" / "_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_ref = _load_reference()
fwd_ref, rel_err, rel_tol, update_ref = _ref.fwd_ref, _ref.rel_err, _ref.rel_tol, _ref.update_ref
packed_fwd_ref = _ref.packed_fwd_ref

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


class _Ops:
    """The three ops through their ``.default`` overloads (skips the packet's overload lookup)."""

    def __init__(self, ns: Any) -> None:
        self.fwd = ns.fwd.default
        self.bwd = ns.bwd.default
        self.update = ns.update.default
        self.packed_fwd = getattr(ns, "packed_fwd", None)
        self.packed_bwd = getattr(ns, "packed_bwd", None)


def load_ops() -> tuple[Any, Optional[Any]]:
    """(the causal_conv1d torch ops, the causal_conv1d package or None when it does not import)."""
    pkg = None
    try:
        pkg = importlib.import_module("causal_conv1d")
    except Exception as exc:  # noqa: BLE001
        print(f"note: `import causal_conv1d` failed ({exc!r}); timing the torch ops only", file=sys.stderr)
        libs = sorted(glob.glob(str(ROOT / "causal_conv1d" / "_C*.so")))
        libs += [f for p in sys.path if p for f in sorted(glob.glob(os.path.join(p, "causal_conv1d", "_C*.so")))]
        if not libs:
            raise SystemExit("no built causal_conv1d/_C*.so: build first (scripts/gpu-check.sh)") from exc
        torch.ops.load_library(libs[0])
    return _Ops(torch.ops.causal_conv1d), pkg


def time_fn(fn: Callable[[int], Any], nbuf: int, warmup: int = 10, iters: int = 50) -> float:
    """Median microseconds of fn(i) (i cycles over the nbuf input sets)."""
    for i in range(warmup):
        fn(i % nbuf)
    torch.cuda.synchronize()
    times = []
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        starts[i].record()
        fn(i % nbuf)
        ends[i].record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) * 1000.0 for s, e in zip(starts, ends)]
    return statistics.median(times)


def time_loop(fn: Callable[[int], Any], nbuf: int, calls: int = 400) -> float:
    """Eager microseconds per call: calls back to back, one synchronisation at the end.

    This is what a decode loop pays per call: max(host cost per call, kernel time). CUDA-event
    pairs around every call (time_fn) add the host cost of recording two events to each call.
    """
    for i in range(20):
        fn(i % nbuf)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(calls):
        fn(i % nbuf)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def host_floor() -> dict[str, float]:
    """Per-call cost of one trivial torch op (torch.add of 8 floats) on this host: the floor under
    any eager op, ours or torch's."""
    a = torch.randn(8, device="cuda")
    return {
        "loop_us": time_loop(lambda i: torch.add(a, a), 1, calls=2000),
        "event_us": time_fn(lambda i: torch.add(a, a), 1),
    }


def time_graph(fn: Callable[[int], Any], nbuf: int, reps: int = 20) -> float:
    """Per-call microseconds of fn replayed inside a CUDA graph (reps calls per replay)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for i in range(3):
            fn(i % nbuf)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(reps):
            fn(i % nbuf)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) * 1000.0 / reps)
    return statistics.median(ts)


def copy_ceiling() -> float:
    n = 1 << 30  # 1 GiB
    a = torch.empty(n, dtype=torch.uint8, device="cuda").random_()
    b = torch.empty_like(a)
    t = time_fn(lambda i: b.copy_(a), 1, warmup=5, iters=30)
    return 2 * n / (t * 1e-6) / 1e9


def n_buffers(bytes_per_set: int) -> int:
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    return max(2, min(16, math.ceil(3 * l2 / max(1, bytes_per_set))))


def make_x(B, D, L, dtype, layout, pitch=0):
    if layout == "cf":
        return torch.randn(B, D, L, device="cuda", dtype=dtype)
    P = pitch or D
    return torch.randn(B, L, P, device="cuda", dtype=dtype)[:, :, :D].transpose(1, 2)


# name, kind, B, D, L, dtype, layout, W, pitch, target (µs, or fraction of copy), upstream µs
TARGET_ROWS = [
    ("fwd bf16 cf B4 D4096 L4096", "fwd", 4, 4096, 4096, "bf16", "cf", 4, 0, ("frac", 0.90), 93),
    ("fwd bf16 cl B4 D4096 L4096", "fwd", 4, 4096, 4096, "bf16", "cl", 4, 0, ("frac", 0.85), 131),
    ("bwd bf16 cf B4 D4096 L4096", "bwd", 4, 4096, 4096, "bf16", "cf", 4, 0, ("frac", 0.75), 286),
    ("bwd bf16 cl B4 D4096 L4096", "bwd", 4, 4096, 4096, "bf16", "cl", 4, 0, ("frac", 0.70), 312),
    ("fwd fp32 cf B4 D4096 L4096", "fwd", 4, 4096, 4096, "fp32", "cf", 4, 0, ("frac", 0.93), 136),
    ("fwd bf16 cf B16 D1024 L512 (small)", "fwd", 16, 1024, 512, "bf16", "cf", 4, 0, ("eager_us", 12), 58),
    ("update bf16 B256 D8192", "update", 256, 8192, 1, "bf16", "cf", 4, 0, ("eager_us", 10), 59),
    ("update bf16 B1 D8192", "update", 1, 8192, 1, "bf16", "cf", 4, 0, ("eager_us", 8), 51),
]

PRACTICAL_ROWS = [
    ("fwd bf16 cl Mamba2-2.7B B8 L2048 D5376 pitch", "fwd", 8, 5376, 2048, "bf16", "cl", 4, 2 * 5376 + 256),
    ("bwd bf16 cl Mamba2-2.7B B8 L2048 D5376 pitch", "bwd", 8, 5376, 2048, "bf16", "cl", 4, 2 * 5376 + 256),
    ("fwd bf16 cf 7B B1 L8192 D10240", "fwd", 1, 10240, 8192, "bf16", "cf", 4, 0),
    ("fwd bf16 cl 7B B1 L8192 D10240", "fwd", 1, 10240, 8192, "bf16", "cl", 4, 0),
    ("fwd bf16 cl 7B B4 L4096 D10240", "fwd", 4, 10240, 4096, "bf16", "cl", 4, 0),
    ("bwd bf16 cl 7B B4 L4096 D10240", "bwd", 4, 10240, 4096, "bf16", "cl", 4, 0),
    ("fwd bf16 cl 32k B1 L32768 D5376", "fwd", 1, 5376, 32768, "bf16", "cl", 4, 0),
    ("fwd fp16 cf B4 D4096 L4096", "fwd", 4, 4096, 4096, "fp16", "cf", 4, 0),
    ("fwd fp32 cl B4 D4096 L4096", "fwd", 4, 4096, 4096, "fp32", "cl", 4, 0),
    ("bwd fp32 cf B4 D4096 L4096", "bwd", 4, 4096, 4096, "fp32", "cf", 4, 0),
    ("fwd bf16 cf W2 B4 D4096 L4096", "fwd", 4, 4096, 4096, "bf16", "cf", 2, 0),
    ("fwd bf16 cf W3 B4 D4096 L4096", "fwd", 4, 4096, 4096, "bf16", "cf", 3, 0),
    ("fwd bf16 cl W2 B4 D4096 L4096", "fwd", 4, 4096, 4096, "bf16", "cl", 2, 0),
    ("fwd bf16 cf W8 B4 D4096 L4096", "fwd", 4, 4096, 4096, "bf16", "cf", 8, 0),
]

UPDATE_ROWS = [
    (f"update bf16 B{b} D{d} S3{'' if m == 'plain' else ' ' + m}", "update", b, d, 1, "bf16", m, 4, 0)
    for d in (5376, 10240)
    for b in (1, 16, 64, 256, 512)
    for m in ("plain",)
] + [
    ("update bf16 B64 D5376 circular S8", "update", 64, 5376, 1, "bf16", "circular", 4, 0),
    ("update bf16 B64 D5376 indexed", "update", 64, 5376, 1, "bf16", "indexed", 4, 0),
    ("update bf16 B64 D5376 (B,S,D) state", "update", 64, 5376, 1, "bf16", "bsd", 4, 0),
]


def run_case(ops, pkg, case, ceiling: float, quick: bool) -> dict[str, Any]:
    name, kind, B, D, L, dts, layout, W = case[:8]
    pitch = case[8] if len(case) > 8 else 0
    target = case[9] if len(case) > 9 else None
    upstream = case[10] if len(case) > 10 else None
    dtype = DTYPES[dts]
    esz = torch.tensor([], dtype=dtype).element_size()
    w = (torch.randn(D, W, device="cuda") / W**0.5).to(dtype)
    bias = torch.randn(D, device="cuda").to(dtype)
    row: dict[str, Any] = {"name": name, "kind": kind, "B": B, "D": D, "L": L, "dtype": dts, "layout": layout, "W": W}
    iters = 20 if quick else 50
    if kind in ("fwd", "bwd"):
        per_set = (2 if kind == "fwd" else 3) * B * D * L * esz
        nbuf = n_buffers(per_set)
        xs = [make_x(B, D, L, dtype, layout, pitch) for _ in range(nbuf)]
        if kind == "fwd":
            out, _ = ops.fwd(xs[0], w, bias, None, None, False, True)
            ref, _ = fwd_ref(xs[0], w, bias, silu=True)
            err = rel_err(out, ref)
            row["rel_err"] = err
            assert err < rel_tol(dtype), f"{name}: rel err {err}"
            del ref
            t = time_fn(lambda i: ops.fwd(xs[i], w, bias, None, None, False, True), nbuf, iters=iters)
            moved = 2 * B * D * L * esz
            wf = w.unsqueeze(1)

            def base(i):
                return F.silu(F.conv1d(xs[i], wf, bias, padding=W - 1, groups=D)[..., :L])

            tb = time_fn(base, nbuf, iters=max(10, iters // 2))
        else:
            douts = [make_x(B, D, L, dtype, layout) for _ in range(nbuf)]
            xr = xs[0].detach().double().requires_grad_()
            wr = w.detach().double().requires_grad_()
            br = bias.detach().double().requires_grad_()
            ref, _ = fwd_ref(xr, wr, br, silu=True)
            ref.backward(douts[0].double())
            dx, dw, db, _ = ops.bwd(xs[0], w, bias, douts[0], None, None, None, False, True)
            err = max(rel_err(dx, xr.grad), rel_err(dw, wr.grad), rel_err(db, br.grad))
            row["rel_err"] = err
            assert err < rel_tol(dtype), f"{name}: rel err {err}"
            del ref, xr, wr, br
            t = time_fn(lambda i: ops.bwd(xs[i], w, bias, douts[i], None, None, None, False, True), nbuf, iters=iters)
            moved = 3 * B * D * L * esz
            wg = w.detach().unsqueeze(1).requires_grad_()
            bg = bias.detach().requires_grad_()
            xg = [x.detach().requires_grad_() for x in xs[:2]]
            outs = [F.silu(F.conv1d(x, wg, bg, padding=W - 1, groups=D)[..., :L]) for x in xg]

            def base(i):
                return torch.autograd.grad(outs[i % 2], (xg[i % 2], wg, bg), douts[i % 2], retain_graph=True)

            tb = time_fn(base, 2, iters=max(10, iters // 2))
        row.update(us=t, gbps=moved / (t * 1e-6) / 1e9, conv1d_us=tb)
        row["frac_copy"] = row["gbps"] / ceiling
        row["speedup_vs_conv1d"] = tb / t
        if kind == "fwd" and B * D * L <= 16 * 1024 * 512:
            row["graph_us"] = time_graph(lambda i: ops.fwd(xs[i], w, bias, None, None, False, True), nbuf)
            row["loop_us"] = time_loop(lambda i: ops.fwd(xs[i], w, bias, None, None, False, True), nbuf)
            if pkg is not None:
                fn = pkg.causal_conv1d_fn
                row["api_eager_us"] = time_loop(lambda i: fn(xs[i], w, bias, activation="silu"), nbuf)
    else:  # update
        S = 8 if layout == "circular" else 3
        cache = 2 * B if layout == "indexed" else B
        per_set = (2 * B * D + 2 * cache * D * S) * esz
        nbuf = n_buffers(per_set)
        xs = [torch.randn(B, D, 1, device="cuda", dtype=dtype) for _ in range(nbuf)]
        if layout == "bsd":
            states = [torch.randn(cache, S, D, device="cuda", dtype=dtype).transpose(1, 2) for _ in range(nbuf)]
        else:
            states = [torch.randn(cache, D, S, device="cuda", dtype=dtype) for _ in range(nbuf)]
        cs = torch.randint(0, 1000, (B,), device="cuda", dtype=torch.int32) if layout == "circular" else None
        idx = None
        if layout == "indexed":
            idx = torch.randperm(cache, device="cuda")[:B].to(torch.int32)
            idx[::7] = -1
        if B <= 64:
            st_ref = states[0].clone()
            ref = update_ref(xs[0], st_ref, w, bias, True, cs, idx)
            out = ops.update(xs[0], states[0], w, bias, True, cs, idx)
            assert torch.equal(states[0], st_ref), f"{name}: state not bit-exact"
            err = rel_err(out, ref)
            row["rel_err"] = err
            assert err < rel_tol(dtype), f"{name}: rel err {err}"
        t = time_fn(lambda i: ops.update(xs[i], states[i], w, bias, True, cs, idx), nbuf, iters=iters)
        moved = (2 + (2 * S if layout != "circular" else W)) * B * D * esz  # x, out, state read + written
        row.update(us=t, gbps=moved / (t * 1e-6) / 1e9, frac_copy=None)
        row["graph_us"] = time_graph(lambda i: ops.update(xs[i], states[i], w, bias, True, cs, idx), nbuf)
        row["loop_us"] = time_loop(lambda i: ops.update(xs[i], states[i], w, bias, True, cs, idx), nbuf)
        if pkg is not None and layout in ("plain", "cf"):
            fn = pkg.causal_conv1d_update
            x2 = [x.squeeze(-1) for x in xs]
            row["api_eager_us"] = time_loop(lambda i: fn(x2[i], states[i], w, bias, activation="silu"), nbuf)
    if target is not None:
        row["target"] = list(target)
        row["upstream_us"] = upstream
        if target[0] == "frac":
            row["met"] = row["frac_copy"] >= target[1]
        else:
            eager = row.get("api_eager_us", row["us"])
            row["met"] = eager <= target[1]
    torch.cuda.empty_cache()
    return row


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def print_table(rows: list[dict[str, Any]], ceiling: float, floor: Optional[dict[str, float]] = None) -> str:
    lines = [f"copy ceiling: {ceiling:.0f} GB/s (bytes read + written)"]
    if floor:
        lines.append(
            f"host floor: one trivial torch op (torch.add of 8 floats) costs {floor['loop_us']:.1f} µs per call"
            f" back to back, {floor['event_us']:.1f} µs between CUDA events"
        )
    lines.append("")
    hdr = (
        f"{'case':52s} {'µs':>8s} {'GB/s':>7s} {'%copy':>6s} {'xconv1d':>8s} {'graph µs':>9s} {'loop µs':>8s}"
        f" {'api µs':>8s} {'target':>12s} {'met':>4s}"
    )
    lines.append(hdr)
    lines.append("-" * len(hdr))
    for r in rows:
        tgt = "-"
        if "target" in r:
            tgt = f">={r['target'][1]:.0%}" if r["target"][0] == "frac" else f"<={r['target'][1]}us"
        lines.append(
            f"{r['name']:52s} {fmt(r['us'], '8.1f')} {fmt(r.get('gbps'), '7.0f')} "
            f"{fmt(None if r.get('frac_copy') is None else 100 * r['frac_copy'], '6.1f')} "
            f"{fmt(r.get('speedup_vs_conv1d'), '8.2f')} {fmt(r.get('graph_us'), '9.2f')} {fmt(r.get('loop_us'), '8.1f')} "
            f"{fmt(r.get('api_eager_us'), '8.1f')} "
            f"{tgt:>12s} {('yes' if r['met'] else 'NO') if 'met' in r else '-':>4s}"
        )
    return "\n".join(lines)


def cpu_bench() -> dict[str, Any]:
    ops, _ = load_ops()
    B, D, L, W = 4, 1024, 4096, 4
    x = torch.randn(B, D, L)
    w = torch.randn(D, W) / 2
    b = torch.randn(D)
    out, _ = ops.fwd(x, w, b, None, None, False, True)
    ref, _ = fwd_ref(x, w, b, silu=True)
    assert rel_err(out, ref) < 1e-5

    def tm(fn, n=20):
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


# ---- kernel mode -------------------------------------------------------------------

# name, kind, B, D, L, dtype, layout, W, pitch: the kernel-mode table's rows first, then the practical shapes
KERNEL_ROWS = [
    ("fwd bf16 cf B4 D4096 L4096", "fwd", 4, 4096, 4096, "bf16", "cf", 4, 0),
    ("bwd bf16 cf B4 D4096 L4096", "bwd", 4, 4096, 4096, "bf16", "cf", 4, 0),
    ("fwd bf16 cl B4 D4096 L4096", "fwd", 4, 4096, 4096, "bf16", "cl", 4, 0),
    ("bwd bf16 cl B4 D4096 L4096", "bwd", 4, 4096, 4096, "bf16", "cl", 4, 0),
    ("fwd fp32 cf B4 D4096 L4096", "fwd", 4, 4096, 4096, "fp32", "cf", 4, 0),
    ("bwd fp32 cf B4 D4096 L4096", "bwd", 4, 4096, 4096, "fp32", "cf", 4, 0),
    ("fwd bf16 cl Mamba2 B8 L2048 D5376 pitch 11008", "fwd", 8, 5376, 2048, "bf16", "cl", 4, 11008),
    ("bwd bf16 cl Mamba2 B8 L2048 D5376 pitch 11008", "bwd", 8, 5376, 2048, "bf16", "cl", 4, 11008),
    ("fwd bf16 cf B16 D1024 L512", "fwd", 16, 1024, 512, "bf16", "cf", 4, 0),
    ("bwd bf16 cf B16 D1024 L512", "bwd", 16, 1024, 512, "bf16", "cf", 4, 0),
    ("update bf16 B256 D8192", "update", 256, 8192, 1, "bf16", "plain", 4, 0),
]


# Packed rows: name, kind, B, D, L, dtype, layout, W, pitch, sequences ("7": 7 sequences over the
# B * L tokens; "3-16/row": each of the B rows of L tokens cut into 3 to 16 sequences)
PACKED_ROWS = [
    ("pfwd bf16 cl 7 seqs T16384 D4096", "pfwd", 1, 4096, 16384, "bf16", "cl", 4, 0, "7"),
    ("pbwd bf16 cl 7 seqs T16384 D4096", "pbwd", 1, 4096, 16384, "bf16", "cl", 4, 0, "7"),
    ("pfwd bf16 cf 7 seqs T16384 D4096", "pfwd", 1, 4096, 16384, "bf16", "cf", 4, 0, "7"),
    ("pbwd bf16 cf 7 seqs T16384 D4096", "pbwd", 1, 4096, 16384, "bf16", "cf", 4, 0, "7"),
    (
        "pfwd bf16 cl Mamba2 B8 L2048 D5376 pitch 11008 3-16/row",
        "pfwd",
        8,
        5376,
        2048,
        "bf16",
        "cl",
        4,
        11008,
        "3-16/row",
    ),
    (
        "pbwd bf16 cl Mamba2 B8 L2048 D5376 pitch 11008 3-16/row",
        "pbwd",
        8,
        5376,
        2048,
        "bf16",
        "cl",
        4,
        11008,
        "3-16/row",
    ),
]


def packed_lengths(spec: str, B: int, L: int, gen: torch.Generator) -> list[int]:
    """The sequence lengths of a packed row (see PACKED_ROWS), summing to B * L."""
    rows = [B * L] if spec == "7" else [L] * B
    lens: list[int] = []
    for n_tok in rows:
        n = 7 if spec == "7" else int(torch.randint(3, 17, (), generator=gen))
        cuts = sorted(torch.randperm(n_tok - 1, generator=gen)[: n - 1].add(1).tolist())
        lens += [b - a for a, b in zip([0, *cuts], [*cuts, n_tok])]
    return lens


def kernel_rows(only: Sequence[str] = ()) -> list[tuple]:
    """KERNEL_ROWS, then the practical and decode rows of the eager table not already in it; with
    `only`, just the rows whose name contains one of its strings."""
    rows = list(KERNEL_ROWS)
    seen = {r[1:9] for r in rows}
    extra = [r for r in PRACTICAL_ROWS + UPDATE_ROWS if r[6] in ("cf", "cl", "plain")]
    extra.append(("update bf16 B1 D8192", "update", 1, 8192, 1, "bf16", "plain", 4, 0))
    for r in extra:
        key = tuple(r[1:8]) + ((r[8] if len(r) > 8 else 0),)
        if key not in seen:
            seen.add(key)
            rows.append(tuple(r[:8]) + ((r[8] if len(r) > 8 else 0),))
    rows += PACKED_ROWS
    return [r for r in rows if not only or any(w in r[0] for w in only)]


def moved_bytes(kind: str, B: int, D: int, L: int, esz: int, S: int = 3) -> int:
    """Bytes the op must move: fwd x + out; bwd x + dout + dx; update x + out + state read and written."""
    if kind in ("fwd", "pfwd"):
        return 2 * B * D * L * esz
    if kind in ("bwd", "pbwd"):
        return 3 * B * D * L * esz
    return (2 + 2 * S) * B * D * esz


class _Build:
    """The three ops of one causal-conv1d build as fwd(x, w, b) -> out, bwd(x, w, b, dout) ->
    (dx, dweight, dbias), update(x (B, D, 1), state, w, b) -> out; all with silu."""

    # packed rows: pfwd(x, w, b, pk) -> out, pbwd(x, w, b, dout, pk) -> (dx, dweight, dbias), pk the
    # row's Packing; channel_last_only: the build reads (B, T, D) memory only (FLA)
    pfwd: Optional[Callable[..., Any]] = None
    pbwd: Optional[Callable[..., Any]] = None
    channel_last_only = False

    def __init__(self, peer: Optional[str], fla: Optional[str] = None) -> None:
        if fla is not None:
            self._init_fla(fla)
            return
        if peer is None:
            ops, pkg = load_ops()
            self.name = "ours"
            self.where = str(Path(pkg.__file__).parent) if pkg is not None else "torch.ops"
            self.version = getattr(pkg, "__version__", "?")
            self.fwd = lambda x, w, b: ops.fwd(x, w, b, None, None, False, True)[0]
            self.bwd = lambda x, w, b, dout: ops.bwd(x, w, b, dout, None, None, None, False, True)[:3]
            self.update = lambda x, st, w, b: ops.update(x, st, w, b, True, None, None)
            if ops.packed_fwd is not None:
                pf, pb = ops.packed_fwd.default, ops.packed_bwd.default
                self.pfwd = lambda x, w, b, pk: pf(x, w, b, pk.cu, None, False, True)[0]
                self.pbwd = lambda x, w, b, dout, pk: pb(x, w, b, dout, pk.cu, None, None, False, True)[:3]
            return
        root = Path(peer).resolve()
        sys.path.insert(0, str(root))
        pkg = importlib.import_module("causal_conv1d")
        where = Path(pkg.__file__).resolve().parent
        if root not in where.parents:
            raise SystemExit(f"--peer {peer}: `import causal_conv1d` found {where}, not a package under {root}")
        self.name = "peer"
        self.where = str(where)
        self.version = getattr(pkg, "__version__", "?")
        try:
            cf = importlib.import_module("causal_conv1d.cpp_functions")  # upstream >= 1.5
        except ImportError:
            cf = None
        if cf is not None and hasattr(cf, "causal_conv1d_fwd_function"):
            self.fwd = lambda x, w, b: cf.causal_conv1d_fwd_function(x, w, b, None, None, None, True)
            self.bwd = lambda x, w, b, dout: cf.causal_conv1d_bwd_function(
                x, w, b, dout, None, None, None, None, False, True
            )[:3]
            self.update = lambda x, st, w, b: cf.causal_conv1d_update_function(x, st, w, b, True, None, None)
            self.pfwd = lambda x, w, b, pk: cf.causal_conv1d_fwd_function(x, w, b, pk.seq_idx, None, None, True)
            self.pbwd = lambda x, w, b, dout, pk: cf.causal_conv1d_bwd_function(
                x, w, b, dout, pk.seq_idx, None, None, None, False, True
            )[:3]
        elif hasattr(torch.ops, "causal_conv1d") and hasattr(torch.ops.causal_conv1d, "fwd"):  # a build of ours
            ops = _Ops(torch.ops.causal_conv1d)
            self.fwd = lambda x, w, b: ops.fwd(x, w, b, None, None, False, True)[0]
            self.bwd = lambda x, w, b, dout: ops.bwd(x, w, b, dout, None, None, None, False, True)[:3]
            self.update = lambda x, st, w, b: ops.update(x, st, w, b, True, None, None)
        else:
            raise SystemExit(f"--peer {peer}: neither causal_conv1d.cpp_functions nor torch.ops.causal_conv1d")

    def _init_fla(self, path: str) -> None:
        """flash-linear-attention's Triton kernels from the package under `path` (never a copy in
        this repository): the forward and backward functions its autograd calls, on (B, T, D)."""
        root = Path(path).resolve()
        sys.path.insert(0, str(root))
        fla = importlib.import_module("fla")
        where = Path(fla.__file__).resolve().parent
        if root not in where.parents:
            raise SystemExit(f"--fla {path}: `import fla` found {where}, not a package under {root}")
        tops = importlib.import_module("fla.modules.conv.triton.ops")
        self.prepare_chunk_indices = importlib.import_module("fla.ops.utils").prepare_chunk_indices
        self.name, self.where, self.version = "fla", str(where), getattr(fla, "__version__", "?")
        self.channel_last_only = True
        fwd_raw, bwd_raw = tops.causal_conv1d_fwd, tops.causal_conv1d_bwd

        def fwd(x, w, b, pk=None):  # x: a (B, D, L) view of (B, L, D) memory; out in the same view
            kw = {} if pk is None else {"cu_seqlens": pk.cu, "chunk_indices": pk.chunk_indices}
            return fwd_raw(x.transpose(1, 2), w, b, None, activation="silu", **kw)[0].transpose(1, 2)

        def bwd(x, w, b, dout, pk=None):
            kw = {} if pk is None else {"cu_seqlens": pk.cu, "chunk_indices": pk.chunk_indices}
            dx, dw, db, _, _ = bwd_raw(
                x=x.transpose(1, 2),
                dy=dout.transpose(1, 2),
                dht=None,
                weight=w,
                bias=b,
                residual=None,
                initial_state=None,
                activation="silu",
                **kw,
            )
            return dx.transpose(1, 2), dw, db

        def update(*args: Any) -> Any:
            raise NotImplementedError("FLA's decode update keeps another state layout: not compared")

        self.fwd, self.bwd, self.update, self.pfwd, self.pbwd = fwd, bwd, update, fwd, bwd


class Packing:
    """A packed row's side inputs: cu_seqlens (ours, FLA), seq_idx (1, B * L) (a --peer build), FLA's
    chunk indices (what its autograd would prepare on every call, with a host sync)."""

    def __init__(self, build: _Build, lens: list[int]) -> None:
        t = torch.tensor(lens, dtype=torch.int32)
        self.lens = lens
        self.cu = torch.cat([torch.zeros(1, dtype=torch.int32), t.cumsum(0).to(torch.int32)]).cuda()
        self.seq_idx = torch.repeat_interleave(torch.arange(len(lens), dtype=torch.int32), t.long())[None].cuda()
        self.chunk_indices = build.prepare_chunk_indices(self.cu, 64) if build.name == "fla" else None


def graph_reps(nbuf: int) -> int:
    """Calls per captured graph: every input set at least twice, at least 10 calls."""
    reps = max(10, 2 * nbuf)
    return (reps + nbuf - 1) // nbuf * nbuf


class CaseInputs:
    """Inputs of one kernel-mode row for one build: `nbuf` input sets (x, and dout or the state),
    `call(i)` runs the op on set i, `check()` compares set 0's result with the float64 reference."""

    def __init__(self, build: _Build, case: tuple, nbuf: Optional[int] = None) -> None:
        name, kind, B, D, L, dts, layout, W, pitch = case[:9]
        if build.channel_last_only:
            layout = "cl"  # the same row on (B, L, D) memory
        self.pk: Optional[Packing] = None
        if kind in ("pfwd", "pbwd"):  # one row of B * L tokens
            gen = torch.Generator().manual_seed(sum(name.encode()))
            self.pk = Packing(build, packed_lengths(case[9], B, L, gen))
            B, L = 1, B * L
        dtype = DTYPES[dts]
        esz = torch.tensor([], dtype=dtype).element_size()
        torch.manual_seed(sum(name.encode()))
        self.build, self.kind, self.dtype = build, kind, dtype
        self.w = (torch.randn(D, W, device="cuda") / W**0.5).to(dtype)
        self.bias = torch.randn(D, device="cuda").to(dtype)
        S = W - 1
        self.bytes = moved_bytes(kind, B, D, L, esz, S)
        self.nbuf = n_buffers(self.bytes) if nbuf is None else nbuf
        if kind in ("fwd", "bwd", "pfwd", "pbwd"):
            self.xs = [make_x(B, D, L, dtype, layout, pitch) for _ in range(self.nbuf)]
            if kind in ("bwd", "pbwd"):
                self.douts = [make_x(B, D, L, dtype, layout) for _ in range(self.nbuf)]
        else:
            self.xs = [torch.randn(B, D, 1, device="cuda", dtype=dtype) for _ in range(self.nbuf)]
            self.states = [torch.randn(B, D, S, device="cuda", dtype=dtype) for _ in range(self.nbuf)]

    def call(self, i: int) -> Any:
        b = self.build
        if self.kind == "fwd":
            return b.fwd(self.xs[i], self.w, self.bias)
        if self.kind == "bwd":
            return b.bwd(self.xs[i], self.w, self.bias, self.douts[i])
        if self.kind in ("pfwd", "pbwd"):
            if b.pfwd is None or b.pbwd is None:
                raise NotImplementedError(f"{b.name} has no packed-sequence ops")
            if self.kind == "pfwd":
                return b.pfwd(self.xs[i], self.w, self.bias, self.pk)
            return b.pbwd(self.xs[i], self.w, self.bias, self.douts[i], self.pk)
        return b.update(self.xs[i], self.states[i], self.w, self.bias)

    def check(self) -> dict[str, Any]:
        """rel_err against float64 (and state_exact for update) of set 0; the update's state is
        restored afterwards, so timing starts from the same inputs."""
        w, bias, x = self.w, self.bias, self.xs[0]

        def ref_of(x: Any, w: Any, b: Any) -> Any:
            if self.pk is not None:
                return packed_fwd_ref(x, w, b, self.pk.cu, None, silu=True)[0]
            return fwd_ref(x, w, b, silu=True)[0]

        if self.kind in ("fwd", "pfwd"):
            return {"rel_err": rel_err(self.call(0), ref_of(x, w, bias))}
        if self.kind in ("bwd", "pbwd"):
            dout = self.douts[0]
            xr = x.detach().double().requires_grad_()
            wr = w.detach().double().requires_grad_()
            br = bias.detach().double().requires_grad_()
            ref = ref_of(xr, wr, br)
            ref.backward(dout.double())
            dx, dw, db = self.call(0)
            return {"rel_err": max(rel_err(dx, xr.grad), rel_err(dw, wr.grad), rel_err(db, br.grad))}
        st0 = self.states[0].clone()
        st_ref = st0.clone()
        ref = update_ref(x, st_ref, w, bias, True, None, None)
        out = self.call(0)
        res = {"rel_err": rel_err(out, ref), "state_exact": bool(torch.equal(self.states[0], st_ref))}
        self.states[0].copy_(st0)
        return res


def kernel_case(build: _Build, case: tuple, quick: bool) -> dict[str, Any]:
    name, kind, B, D, L, dts, layout, W, pitch = case[:9]
    row: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "B": B,
        "D": D,
        "L": L,
        "dtype": dts,
        "layout": layout,
        "W": W,
        "pitch": pitch,
    }
    iters = 20 if quick else 50
    inp = CaseInputs(build, case)
    if inp.pk is not None:
        row["seqs"] = len(inp.pk.lens)
    row.update(inp.check())
    row["tol"] = rel_tol(inp.dtype)
    row["ok"] = bool(row["rel_err"] < row["tol"]) and row.get("state_exact", True)
    row["bytes"] = inp.bytes
    row["nbuf"] = nbuf = inp.nbuf
    row["eager_us"] = time_fn(inp.call, nbuf, iters=iters)
    reps = graph_reps(nbuf)
    row["graph_reps"] = reps
    row["graph_us"] = time_graph(inp.call, nbuf, reps=reps)
    del inp
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return row


def kernel_worker(peer: Optional[str], out: Path, only: list[str], quick: bool, fla: Optional[str] = None) -> int:
    """Child process: time every kernel-mode row with one build, write JSON to `out`."""
    build = _Build(peer, fla)
    res: dict[str, Any] = {"build": build.name, "where": build.where, "version": build.version, "rows": []}
    for case in kernel_rows(only):
        try:
            res["rows"].append(kernel_case(build, case, quick))
        except Exception as exc:  # noqa: BLE001 - e.g. a width the peer does not support
            res["rows"].append({"name": case[0], "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
            torch.cuda.empty_cache()
        r = res["rows"][-1]
        print(
            f"[{build.name}] {r['name']}: "
            + (
                f"graph {r['graph_us']:.1f} us, eager {r['eager_us']:.1f} us, rel err {r['rel_err']:.2e}"
                if "error" not in r
                else r["error"]
            ),
            file=sys.stderr,
            flush=True,
        )
    out.write_text(json.dumps(res, indent=1))
    return 0


def copy_ceiling_graph() -> dict[str, float]:
    """Device-to-device copy of 1 GiB (bytes read + written): eager events and inside a CUDA graph."""
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda").random_()
    b = torch.empty_like(a)
    t = time_fn(lambda i: b.copy_(a), 1, warmup=5, iters=30)
    tg = time_graph(lambda i: b.copy_(a), 1, reps=4)
    a = b = None  # noqa: F841 - free the 2 GiB before the workers start
    torch.cuda.empty_cache()
    return {"eager_gbps": 2 * n / (t * 1e-6) / 1e9, "graph_gbps": 2 * n / (tg * 1e-6) / 1e9}


def kernel_table(
    ours: dict[str, Any], peer: Optional[dict[str, Any]], ceiling: float, fla: Optional[dict[str, Any]] = None
) -> str:
    prow = {r["name"]: r for r in (peer or {}).get("rows", [])}
    frow = {r["name"]: r for r in (fla or {}).get("rows", [])}
    hdr = (
        f"{'case':48s} {'ours µs':>8s} {'peer µs':>8s} {'ratio':>6s} {'ours %cp':>8s} {'peer %cp':>8s}"
        f" {'ours eag':>9s} {'peer eag':>9s} {'ok':>5s}"
    )
    if fla is not None:
        hdr += f" {'fla µs':>8s} {'fla/ours':>8s} {'fla %cp':>8s} {'fla ok':>6s}"
    lines = [hdr, "-" * len(hdr)]
    for r in ours["rows"]:
        p = prow.get(r["name"])
        if "error" in r:
            lines.append(f"{r['name']:48s} ERROR {r['error']}")
            continue
        po = p if p is not None and "error" not in p else None
        frac = r["bytes"] / (r["graph_us"] * 1e-6) / 1e9 / ceiling
        pfrac = po["bytes"] / (po["graph_us"] * 1e-6) / 1e9 / ceiling if po else None
        ratio = po["graph_us"] / r["graph_us"] if po else None
        ok = ("y" if r["ok"] else "NO") + ("/" + ("y" if po["ok"] else "NO") if po else "")
        lines.append(
            f"{r['name']:48s} {r['graph_us']:8.1f} {fmt(po['graph_us'] if po else None, '8.1f')} "
            f"{fmt(ratio, '6.3f')} {100 * frac:8.1f} {fmt(None if pfrac is None else 100 * pfrac, '8.1f')} "
            f"{r['eager_us']:9.1f} {fmt(po['eager_us'] if po else None, '9.1f')} {ok:>5s}"
        )
        if fla is not None:
            f = frow.get(r["name"])
            fo = f if f is not None and "error" not in f else None
            ffrac = 100 * fo["bytes"] / (fo["graph_us"] * 1e-6) / 1e9 / ceiling if fo else None
            lines[-1] += (
                f" {fmt(fo['graph_us'] if fo else None, '8.1f')} {fmt(fo['graph_us'] / r['graph_us'] if fo else None, '8.3f')}"
                f" {fmt(ffrac, '8.1f')} {('y' if fo['ok'] else 'NO') if fo else '-':>6s}"
            )
        if p is not None and "error" in p:
            lines[-1] += f"  (peer: {p['error'][:60]})"
    return "\n".join(lines)


def kernel_main(args: argparse.Namespace) -> int:
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: kernel mode needs a GPU")
    ceil = copy_ceiling_graph()
    # The faster of the two: a copy captured in a graph can become a copy-engine memcpy node, slower
    # than the SM copy eager runs (H200: 2764 GB/s in a graph, 4251 eager), which would
    # put kernels above 100% of "copy".
    ceiling = max(ceil["graph_gbps"], ceil["eager_gbps"])
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as td:
        builds = [("ours", None)] + ([("peer", args.peer)] if args.peer else []) + ([("fla", None)] if args.fla else [])
        for who, peer in builds:
            out = Path(td) / f"{who}.json"
            cmd = [sys.executable, str(Path(__file__).resolve()), "--kernel-worker", "--out", str(out)]
            if peer:
                cmd += ["--peer", peer]
            if who == "fla":
                cmd += ["--fla", args.fla]
            if args.only:
                cmd += ["--only", args.only]
            if args.quick:
                cmd.append("--quick")
            rc = subprocess.call(cmd, cwd=str(ROOT) if who == "ours" else None)
            if rc != 0 or not out.exists():
                raise SystemExit(f"kernel worker for {who} failed (exit {rc})")
            results[who] = json.loads(out.read_text())
    ours, peer, fla = results["ours"], results.get("peer"), results.get("fla")
    head = [
        f"date {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}, "
        f"card {torch.cuda.get_device_name(0)}, torch {torch.__version__}",
        f"copy ceiling: {ceiling:.0f} GB/s (the faster of {ceil['graph_gbps']:.0f} in a CUDA graph and "
        f"{ceil['eager_gbps']:.0f} eager), 1 GiB, bytes read + written",
        f"ours: {ours['version']} at {ours['where']}"
        + (f"; peer: {peer['version']} at {peer['where']}" if peer else "")
        + (f"; fla: {fla['version']} at {fla['where']} (Triton, on (B, L, D) memory)" if fla else ""),
        "µs: per call in a CUDA graph (median of 20 replays); ratio = peer µs / ours µs (> 1: ours faster);"
        " %cp = bytes moved / graph time / copy ceiling; eag = eager µs (CUDA events per call);"
        " ok = rel err vs float64 below tolerance (ours/peer)",
        "",
    ]
    table = "\n".join(head) + kernel_table(ours, peer, ceiling, fla)
    print(table)
    if args.json:
        meta = {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "card": torch.cuda.get_device_name(0),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "copy_ceiling": ceil,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps({"meta": meta, "ours": ours, "peer": peer, "fla": fla, "table": table}, indent=1)
        )
    bad = [r["name"] for r in ours["rows"] if "error" in r or not r.get("ok", False)]
    for n in bad:
        print(f"ours FAILED or inaccurate: {n}")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=None, help="write all rows as JSON here")
    ap.add_argument("--quick", action="store_true", help="fewer iterations")
    ap.add_argument("--cpu", action="store_true", help="the CPU forward row only")
    ap.add_argument("--only", default="", help="comma-separated substrings: time only the rows whose name has one")
    ap.add_argument("--kernel", action="store_true", help="kernel mode: CUDA-graph times, ours vs --peer")
    ap.add_argument("--peer", default=None, help="kernel mode: path of another causal-conv1d build to compare")
    ap.add_argument("--fla", default=None, help="kernel mode: path holding flash-linear-attention's `fla` package")
    ap.add_argument("--kernel-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.kernel_worker:
        return kernel_worker(args.peer, args.out, [w for w in args.only.split(",") if w], args.quick, args.fla)
    if args.kernel:
        return kernel_main(args)
    if args.cpu:
        r = cpu_bench()
        print(
            f"{r['name']}: {r['us']:.0f} µs, F.conv1d {r['conv1d_us']:.0f} µs, {r['speedup']:.2f}x ({r['threads']} threads)"
        )
        if args.json:
            args.json.write_text(json.dumps(r, indent=2))
        return 0
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run on a GPU machine (or pass --cpu)")
    ops, pkg = load_ops()
    torch.manual_seed(0)
    ceiling = copy_ceiling()
    floor = host_floor()
    rows = []
    only = [w for w in args.only.split(",") if w]
    for case in TARGET_ROWS + PRACTICAL_ROWS + UPDATE_ROWS:
        if only and not any(w in case[0] for w in only):
            continue
        try:
            rows.append(run_case(ops, pkg, case, ceiling, args.quick))
        except Exception as exc:  # noqa: BLE001 - report and keep going; the table says FAILED
            print(f"FAILED {case[0]}: {exc!r}", file=sys.stderr)
            rows.append({"name": case[0], "us": None, "error": repr(exc)})
    rows_ok = [r for r in rows if r.get("us") is not None]
    table = print_table(rows_ok, ceiling, floor)
    print(table)
    for r in rows:
        if "error" in r:
            print(f"FAILED {r['name']}: {r['error']}")
    if args.json:
        meta = {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "card": torch.cuda.get_device_name(0),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "copy_ceiling_gbps": ceiling,
            "host_floor": floor,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=args.json.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump({"meta": meta, "rows": rows, "table": table}, f, indent=2)
        os.replace(tmp, args.json)
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
