"""Host cost per call of the eager path (target: the Python wrapper adds no tens of µs).

    python benchmarks/host_overhead.py [--device cpu|cuda] [--calls N] [--rounds R] [--json OUT.json]

Times, on tiny tensors (so that the kernels are shorter than the host work), the per-call wall
time of: torch.add and torch.empty_like on the same tensors (the floor of one torch op on this
machine and torch build), torch.add again through ``torch.ops.aten.add.Tensor`` (the OpOverload
binding that every ``torch.ops`` call, ours included, goes through: arguments parsed against the
schema into a stack), the ``torch.ops.causal_conv1d`` ops through their ``.default`` overloads
(``fwd`` with no input requiring grad, with x requiring grad, and under ``torch.inference_mode``),
and the Python API (``causal_conv1d_fn`` without and with x requiring grad, ``causal_conv1d_update``
with 2-D and 3-D x). torch.add with x requiring grad is the floor of an op that records an autograd
node. ``torch.ops.aten.add.Tensor._op`` is the C++ callable behind OpOverload.__call__ (what the
Python API calls in eager mode): the floor of any ``torch.ops`` call. The
``vs add`` column is each row over torch.add: what our op or wrapper costs in units of torch's own
cheapest op. Each row: ``--calls`` calls timed with time.perf_counter after a warm-up, the median
of ``--repeats`` repetitions; on CUDA the device is synchronised only at the end of a repetition
(the calls queue as in eager inference; if the GPU were slower than the host, the GPU time
would show instead, which the tiny shapes avoid). With ``--rounds R`` (for a shared, noisy host)
the whole table is timed R times, each round in a rotated order, and each cell is the median over
the rounds: µs, and the ratio to torch.add of the same round, with the best µs in brackets.
On a GPU host (``--device cuda``) every row includes a kernel launch, torch.add's too, so the
ratio is the one a user sees.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any, Callable

import torch

import causal_conv1d
from causal_conv1d import _ops, causal_conv1d_fn, causal_conv1d_update


def _time(f: Callable[[], Any], calls: int, repeats: int, sync: Callable[[], None]) -> float:
    """Median over ``repeats`` of the mean µs per call of ``calls`` calls of ``f``."""
    for _ in range(max(calls // 10, 100)):
        f()
    sync()
    per_call = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            f()
        sync()
        per_call.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(per_call)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default=None, help="default: fp32 on cpu, bf16 on cuda")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--dim", type=int, default=8)
    p.add_argument("--seqlen", type=int, default=4, help="fwd's seqlen (update: one token)")
    p.add_argument("--width", type=int, default=4)
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--rounds", type=int, default=1, help="time the whole table this many times (rotated order)")
    p.add_argument("--json", help="also write the rows to this file")
    args = p.parse_args(argv)

    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but torch.cuda.is_available() is False", file=sys.stderr)
        return 2
    dtype_name = args.dtype or ("bf16" if args.device == "cuda" else "fp32")
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
    dev = torch.device(args.device)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)

    b, d, seqlen, w = args.batch, args.dim, args.seqlen, args.width
    x = torch.randn(b, d, seqlen, device=dev, dtype=dtype)
    x_rg = x.clone().requires_grad_()
    weight = torch.randn(d, w, device=dev, dtype=dtype)
    bias = torch.randn(d, device=dev, dtype=dtype)
    state = torch.randn(b, d, w - 1, device=dev, dtype=dtype)
    xu3 = torch.randn(b, d, 1, device=dev, dtype=dtype)
    xu2 = xu3[:, :, 0].clone()
    ops = torch.ops.causal_conv1d
    fwd, update = ops.fwd.default, ops.update.default
    aten_add = torch.ops.aten.add.Tensor  # torch.add through the OpOverload path our ops take
    aten_add_op = aten_add._op  # its C++ callable: what OpOverload.__call__ calls

    cases: list[tuple[str, Callable[[], Any], bool]] = [  # (name, call, under inference_mode)
        ("torch.add(x, x)", lambda: torch.add(x, x), False),
        ("torch.add(x, x), x requires grad", lambda: torch.add(x_rg, x), False),
        ("torch.empty_like(x)", lambda: torch.empty_like(x), False),
        ("torch.ops.aten.add.Tensor(x, x)", lambda: aten_add(x, x), False),
        ("torch.ops.aten.add.Tensor._op(x, x)", lambda: aten_add_op(x, x), False),
        ("ops.update.default", lambda: update(xu3, state, weight, bias, True, None, None), False),
        ("ops.fwd.default", lambda: fwd(x, weight, bias, None, None, False, True), False),
        ("ops.fwd.default, x requires grad", lambda: fwd(x_rg, weight, bias, None, None, False, True), False),
        ("ops.fwd.default, inference_mode", lambda: fwd(x, weight, bias, None, None, False, True), True),
        ("causal_conv1d_fn", lambda: causal_conv1d_fn(x, weight, bias, activation="silu"), False),
        ("causal_conv1d_fn, x requires grad", lambda: causal_conv1d_fn(x_rg, weight, bias, activation="silu"), False),
        ("causal_conv1d_update, x (B, D)", lambda: causal_conv1d_update(xu2, state, weight, bias, "silu"), False),
        ("causal_conv1d_update, x (B, D, 1)", lambda: causal_conv1d_update(xu3, state, weight, bias, "silu"), False),
    ]

    rounds = max(1, args.rounds)
    print(
        f"causal_conv1d {causal_conv1d.__version__}, torch {torch.__version__}, device {args.device}"
        + (f" ({torch.cuda.get_device_name()})" if args.device == "cuda" else f" ({torch.get_num_threads()} threads)")
        + f", {dtype_name}, x ({b}, {d}, {seqlen}), width {w}, {args.calls} calls x {args.repeats} (median)"
        + (f", {rounds} rounds (median; best in brackets)" if rounds > 1 else "")
    )
    layer = "stable ABI (Python autograd)" if _ops.PYTHON_AUTOGRAD else "legacy ATen (C++ autograd)"
    print(f"op layer: {layer}; package {causal_conv1d.__file__}")
    per_round: list[dict[str, float]] = []
    for r in range(rounds):
        k = r % len(cases)
        times: dict[str, float] = {}
        for name, f, inference in cases[k:] + cases[:k]:
            if inference:
                with torch.inference_mode():
                    times[name] = _time(f, args.calls, args.repeats, sync)
            else:
                times[name] = _time(f, args.calls, args.repeats, sync)
        per_round.append(times)
    floor_name = cases[0][0]
    print(f"{'call':40s} {'µs/call':>8s} {'vs add':>7s}" + (f" {'best µs':>8s}" if rounds > 1 else ""))
    rows = []
    for name, _, _ in cases:
        us = statistics.median(t[name] for t in per_round)
        ratio = statistics.median(t[name] / t[floor_name] for t in per_round)
        best = min(t[name] for t in per_round)
        rows.append({"case": name, "us_per_call": round(us, 3), "vs_add": round(ratio, 3), "best_us": round(best, 3)})
        print(f"{name:40s} {us:8.2f} {ratio:6.1f}x" + (f" {best:8.2f}" if rounds > 1 else ""))
    if args.json:
        meta = {
            "device": args.device,
            "device_name": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
            "torch": torch.__version__,
            "causal_conv1d": causal_conv1d.__version__,
            "dtype": dtype_name,
            "shape": [b, d, seqlen],
            "width": w,
            "calls": args.calls,
            "repeats": args.repeats,
            "rounds": rounds,
        }
        with open(args.json, "w") as fh:
            json.dump({"meta": meta, "rows": rows}, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
