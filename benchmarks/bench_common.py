"""What the CUDA benchmarks share (benchmarks/bench.py runs them): the float64 references, the ops of
this build, CUDA-event / eager-loop / CUDA-graph timers, input sets sized past the L2 cache, and the
practical and decode rows that the eager and the kernel benchmark both time. Nothing here imports
``causal_conv1d``: a kernel worker must be free to import the build it times as that name.
"""

from __future__ import annotations

import datetime
import glob
import importlib
import importlib.util
import math
import os
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Callable, Optional, TypedDict

import torch

ROOT = Path(__file__).resolve().parent.parent


def _load_reference() -> ModuleType:
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


class CaseRow(TypedDict, total=False):
    """The case a result row is of (its name alone when it failed)."""

    name: str
    kind: str
    B: int
    D: int
    L: int
    dtype: str
    layout: str
    W: int


DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


class _Ops:
    """The three ops through their ``.default`` overloads (skips the packet's overload lookup)."""

    def __init__(self, ns: torch._ops._OpNamespace) -> None:
        self.fwd = ns.fwd.default
        self.bwd = ns.bwd.default
        self.update = ns.update.default
        self.packed_fwd = getattr(ns, "packed_fwd", None)  # builds without packed sequences: None
        self.packed_bwd = getattr(ns, "packed_bwd", None)


def load_ops() -> tuple[_Ops, Optional[ModuleType]]:
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


def time_fn(fn: Callable[[int], object], nbuf: int, warmup: int = 10, iters: int = 50) -> float:
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


def time_loop(fn: Callable[[int], object], nbuf: int, calls: int = 400) -> float:
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


def time_graph(fn: Callable[[int], object], nbuf: int, reps: int = 20) -> float:
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


def run_meta() -> dict[str, Optional[str]]:
    """The head of a benchmark's JSON: when, on which card, with which torch and CUDA."""
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "card": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }


def n_buffers(bytes_per_set: int) -> int:
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    return max(2, min(16, math.ceil(3 * l2 / max(1, bytes_per_set))))


def make_x(B: int, D: int, L: int, dtype: torch.dtype, layout: str, pitch: int = 0) -> torch.Tensor:
    if layout == "cf":
        return torch.randn(B, D, L, device="cuda", dtype=dtype)
    P = pitch or D
    return torch.randn(B, L, P, device="cuda", dtype=dtype)[:, :, :D].transpose(1, 2)


def fmt(v: Optional[float], spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _row(
    kind: str, dtype: str, layout: str, B: int, D: int, L: int, *, W: int = 4, pitch: int = 0, model: str = ""
) -> tuple:
    """One ``(name, kind, B, D, L, dtype, layout, W, pitch)`` row, named after its parameters: a model's
    shape reads ``<model> B L D`` (and ``pitch`` when x is a slice of a wider buffer), any other
    ``B D L``; ``W`` is named when it is not 4."""
    shape = f"{model} B{B} L{L} D{D}" if model else f"B{B} D{D} L{L}"
    parts = [kind, dtype, layout, f"W{W}" if W != 4 else "", shape, "pitch" if pitch else ""]
    return (" ".join(p for p in parts if p), kind, B, D, L, dtype, layout, W, pitch)


PRACTICAL_ROWS = [
    _row("fwd", "bf16", "cl", 8, 5376, 2048, model="Mamba2-2.7B", pitch=2 * 5376 + 256),
    _row("bwd", "bf16", "cl", 8, 5376, 2048, model="Mamba2-2.7B", pitch=2 * 5376 + 256),
    _row("fwd", "bf16", "cf", 1, 10240, 8192, model="7B"),
    _row("fwd", "bf16", "cl", 1, 10240, 8192, model="7B"),
    _row("fwd", "bf16", "cl", 4, 10240, 4096, model="7B"),
    _row("bwd", "bf16", "cl", 4, 10240, 4096, model="7B"),
    _row("fwd", "bf16", "cl", 1, 5376, 32768, model="32k"),
    _row("fwd", "fp16", "cf", 4, 4096, 4096),
    _row("fwd", "fp32", "cl", 4, 4096, 4096),
    _row("bwd", "fp32", "cf", 4, 4096, 4096),
    _row("fwd", "bf16", "cf", 4, 4096, 4096, W=2),
    _row("fwd", "bf16", "cf", 4, 4096, 4096, W=3),
    _row("fwd", "bf16", "cl", 4, 4096, 4096, W=2),
    _row("fwd", "bf16", "cf", 4, 4096, 4096, W=8),
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
