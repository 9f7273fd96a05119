"""The eager benchmark of the causal-conv1d CUDA kernels (``python benchmarks/bench.py``, on any CUDA
machine): the copy ceiling (large device-to-device copy, bytes read + written), every target row,
practical Mamba shapes, decode updates, and the torch.nn.functional.conv1d baseline.

Each case is checked against a float64 reference before it is timed. Timings are the median of
CUDA-event timings after warm-up, with inputs rotated across enough buffers to exceed the L2
cache. Small shapes and decode updates are also timed inside a CUDA graph (kernel cost without
launch cost) and back to back in an eager loop ("loop µs" for the op, "api µs" for the Python API:
calls issued one after another, one synchronisation at the end, i.e. what a decode loop pays per
call); the eager targets are judged on "api µs". The table's header gives the host floor: the same
loop over a trivial torch op.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from types import ModuleType
from typing import Optional, TypedDict, Union

import bench_common as bc
import torch
import torch.nn.functional as F
from bench_common import (
    DTYPES,
    PRACTICAL_ROWS,
    UPDATE_ROWS,
    _Ops,
    fmt,
    fwd_ref,
    load_ops,
    make_x,
    n_buffers,
    rel_err,
    rel_tol,
    run_meta,
    time_fn,
    time_graph,
    time_loop,
    update_ref,
)


class HostFloor(TypedDict):
    loop_us: float
    event_us: float


class EagerRow(bc.CaseRow, total=False):
    """One row of the eager table (and of its JSON): the case, its error against float64, its times."""

    rel_err: float
    us: Optional[float]
    gbps: float
    conv1d_us: float
    frac_copy: Optional[float]
    speedup_vs_conv1d: float
    graph_us: float
    loop_us: float
    api_eager_us: float
    target: list[Union[str, float]]
    upstream_us: Optional[int]
    met: bool
    error: str


def host_floor() -> HostFloor:
    """Per-call cost of one trivial torch op (torch.add of 8 floats) on this host: the floor under
    any eager op, ours or torch's."""
    a = torch.randn(8, device="cuda")
    return {
        "loop_us": time_loop(lambda i: torch.add(a, a), 1, calls=2000),
        "event_us": time_fn(lambda i: torch.add(a, a), 1),
    }


def copy_ceiling() -> float:
    n = 1 << 30  # 1 GiB
    a = torch.empty(n, dtype=torch.uint8, device="cuda").random_()
    b = torch.empty_like(a)
    t = time_fn(lambda i: b.copy_(a), 1, warmup=5, iters=30)
    return 2 * n / (t * 1e-6) / 1e9


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


def run_case(ops: _Ops, pkg: Optional[ModuleType], case: tuple, ceiling: float, quick: bool) -> EagerRow:
    name, kind, B, D, L, dts, layout, W = case[:8]
    pitch = case[8] if len(case) > 8 else 0
    target = case[9] if len(case) > 9 else None
    upstream = case[10] if len(case) > 10 else None
    dtype = DTYPES[dts]
    esz = torch.tensor([], dtype=dtype).element_size()
    w = (torch.randn(D, W, device="cuda") / W**0.5).to(dtype)
    bias = torch.randn(D, device="cuda").to(dtype)
    row: EagerRow = {"name": name, "kind": kind, "B": B, "D": D, "L": L, "dtype": dts, "layout": layout, "W": W}
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

            def base(i: int) -> object:
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

            def base(i: int) -> object:
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


def print_table(rows: list[EagerRow], ceiling: float, floor: Optional[HostFloor] = None) -> str:
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


def main(args: argparse.Namespace) -> int:
    """The eager table (bench.py without --kernel / --cpu)."""
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run on a GPU machine (or pass --cpu)")
    ops, pkg = load_ops()
    torch.manual_seed(0)
    ceiling = copy_ceiling()
    floor = host_floor()
    rows: list[EagerRow] = []
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
        meta = {**run_meta(), "copy_ceiling_gbps": ceiling, "host_floor": floor}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=args.json.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump({"meta": meta, "rows": rows, "table": table}, f, indent=2)
        os.replace(tmp, args.json)
    return 1 if any("error" in r for r in rows) else 0
