"""Serving benchmark: varlen prefill over a state cache, speculative decode and decode with cache
indices, ours against vLLM's Triton kernels, kernel against kernel, on a CUDA GPU.

    python benchmarks/serving_bench.py [--vllm PATH] [--json OUT.json] [--quick] [--rows SUBSTRING ...]

PATH: vLLM's ``vllm/model_executor/layers/mamba/ops/causal_conv1d.py``, a vLLM checkout, or a folder
holding that file as ``vllm_causal_conv1d.py`` (e.g. ``../shared/peers/vllm``). The peer's code is
loaded from there, never copied into this repository; its ``vllm.*`` imports are served by small
stand-ins (PAD_SLOT_ID = -1, triton / triton.language) when vLLM itself is not installed. Without
--vllm only our kernels and the copy ceiling are timed.

Each row (vLLM's layouts: x channel-last, the cache (lines, state_len, dim) transposed; bf16, width 4,
SiLU, bias unless named) is built on rotating buffer sets (at least 4x the L2 between two uses of a
set), checked first (ours and vLLM's outputs and caches against the float64 reference of
causal_conv1d.varlen, docs/serving.md), then timed: "graph" is N calls captured in one CUDA graph,
replayed, divided by N; "eager" is CUDA events around N back-to-back calls, divided by N. "copy" is
a device-to-device copy of the row's bytes (read + written, the bytes model below) timed the same
way; "% of copy" = copy time / op time. The prefill lengths are drawn as vLLM's peer harness draws
them (the same seeds give the same token counts). vLLM's prefill gets the metadata its engine builds
once per batch on the host (otherwise every call syncs and loops in Python).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import statistics
import sys
import time
import types
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import torch

PAD = -1
BLOCK_M = 8  # vLLM's prefill chunk (its metadata is per chunk of this many tokens)
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
TOL = {torch.float32: 1e-4, torch.float16: 4e-3, torch.bfloat16: 2e-2}


# ---------------------------------------------------------------------------------------------
# the peer


def load_vllm(path: str) -> types.ModuleType:
    p = Path(path)
    candidates = (
        [p]
        if p.is_file()
        else [p / "vllm_causal_conv1d.py", p / "vllm/model_executor/layers/mamba/ops/causal_conv1d.py"]
    )
    file = next((c for c in candidates if c.is_file()), None)
    if file is None:
        raise SystemExit(
            f"--vllm {path}: no vLLM causal_conv1d.py there (looked for {', '.join(map(str, candidates))})"
        )
    try:
        import vllm.attention.backends.utils  # noqa: F401, PLC0415
        import vllm.triton_utils  # noqa: F401, PLC0415
    except ImportError:
        import triton  # noqa: PLC0415
        import triton.language as tl  # noqa: PLC0415

        for name in ("vllm", "vllm.attention", "vllm.attention.backends"):
            sys.modules.setdefault(name, types.ModuleType(name))
        utils = types.ModuleType("vllm.attention.backends.utils")
        utils.PAD_SLOT_ID = PAD  # type: ignore[attr-defined]
        tu = types.ModuleType("vllm.triton_utils")
        tu.triton, tu.tl = triton, tl  # type: ignore[attr-defined]
        sys.modules["vllm.attention.backends.utils"] = utils
        sys.modules["vllm.triton_utils"] = tu
    spec = importlib.util.spec_from_file_location("vllm_peer_causal_conv1d", file)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.__peer_file__ = str(file)  # type: ignore[attr-defined]
    return mod


def vllm_metadata(q_cpu: torch.Tensor, device: torch.device) -> types.SimpleNamespace:
    """What vLLM's engine builds once per batch for causal_conv1d_fn(metadata=...): per BLOCK_M-token chunk
    its request (batch_ptr) and its index in the request (token_chunk_offset_ptr); the grid size."""
    nums = [-(-int(n) // BLOCK_M) for n in q_cpu.to(torch.int64).diff().tolist()]
    mlist = torch.tensor([i for i, n in enumerate(nums) for _ in range(n)], dtype=torch.int32)
    offs = torch.tensor([j for n in nums for j in range(n)], dtype=torch.int32)
    size = max(1024, len(mlist)) * 2
    batch_ptr = torch.full((size,), PAD, dtype=torch.int32, device=device)
    chunk_ptr = torch.full((size,), PAD, dtype=torch.int32, device=device)
    batch_ptr[: len(mlist)].copy_(mlist)
    chunk_ptr[: len(offs)].copy_(offs)
    nd = {
        BLOCK_M: {
            "tot": sum(nums),
            "mlist": mlist,
            "mlist_len": len(mlist),
            "offsetlist": offs,
            "batch_ptr": batch_ptr,
            "token_chunk_offset_ptr": chunk_ptr,
        }
    }
    return types.SimpleNamespace(nums_dict=nd, batch_ptr=batch_ptr, token_chunk_offset_ptr=chunk_ptr)


# ---------------------------------------------------------------------------------------------
# timing


def l2_bytes() -> int:
    return int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 * 2**20))


def n_sets(footprint: int, cap: int = 20) -> int:
    return max(2, min(cap, math.ceil(4 * l2_bytes() / max(footprint, 1))))


def time_fns(fns: list[Callable[[], Any]], n_calls: int, reps: int) -> dict:
    """{"graph_us", "eager_us"}: medians per call over `reps` (graph replays / eager loops of n_calls)."""
    for f in fns + fns:  # compile, autotune, first touch
        f()
    torch.cuda.synchronize()
    ev = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
    eager = []
    for _ in range(reps):
        a, b = ev(), ev()
        a.record()
        for i in range(n_calls):
            fns[i % len(fns)]()
        b.record()
        b.synchronize()
        eager.append(a.elapsed_time(b) * 1e3 / n_calls)
    out: dict[str, Any] = {"eager_us": statistics.median(eager)}
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for f in fns:
            f()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g):
            for i in range(n_calls):
                fns[i % len(fns)]()
    except Exception as exc:  # noqa: BLE001 - a row says why it has no graph time
        out["graph_us"] = None
        out["graph_error"] = f"{type(exc).__name__}: {str(exc)[:160]}"
        torch.cuda.synchronize()
        return out
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = ev(), ev()
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / n_calls)
    out["graph_us"] = statistics.median(times)
    del g
    return out


def copy_ceiling(nbytes: int, n_calls: int, reps: int) -> dict:
    """A device-to-device copy of nbytes / 2 into a buffer allocated once (nbytes read + written)."""
    half = max(16, (nbytes // 2 + 15) // 16 * 16)
    n = half // 8
    pairs = [
        (torch.full((n,), i, dtype=torch.int64, device="cuda"), torch.empty(n, dtype=torch.int64, device="cuda"))
        for i in range(n_sets(2 * half))
    ]
    out = time_fns([lambda s=s, d=d: d.copy_(s) for s, d in pairs], n_calls, reps)
    del pairs
    torch.cuda.empty_cache()
    return out


def warm_up(seconds: float = 1.0) -> None:
    """Copies for about `seconds`, so the first row runs at the clocks the others see."""
    a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(20):
            b.copy_(a)
        torch.cuda.synchronize()
    del a, b
    torch.cuda.empty_cache()


# ---------------------------------------------------------------------------------------------
# rows


@dataclass
class Row:
    kind: str  # prefill | prefill-cf | spec | decode
    dim: int
    batch: int
    dtype: str = "bf16"
    L: int = 1  # tokens per request (decode / spec)
    W: int = 4
    core: bool = True
    result: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        if self.kind.startswith("prefill"):
            return f"{self.kind} {self.dtype} D{self.dim} B{self.batch}"
        if self.kind == "spec":
            return f"spec {self.dtype} D{self.dim} B{self.batch} L{self.L} S{self.W - 2 + self.L}"
        return f"decode {self.dtype} D{self.dim} B{self.batch}"


def rows_plan(quick: bool) -> list[Row]:
    rows = [
        Row("prefill", 8192, 64),
        Row("prefill", 4096, 8),
        Row("prefill", 5376, 64),
        Row("prefill", 8192, 64, "fp32"),
        Row("prefill", 8192, 64, "fp16"),
        Row("prefill-cf", 8192, 64),
        Row("prefill-cf", 8192, 64, "fp32"),
        Row("spec", 8192, 64, L=4),
        Row("spec", 8192, 512, L=4),
    ]
    batches = [1, 64, 512] if quick else [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    rows += [Row("decode", 8192, b) for b in batches]
    return rows


def prefill_lengths(dim: int, batch: int, fp32: bool, W: int = 4) -> torch.Tensor:
    """Request lengths in [1, 2048] with a few short ones (< width, around vLLM's 8-token chunk edges),
    drawn as vLLM's peer harness draws them for its timing rows (same seeds, same token counts)."""
    gc = torch.Generator().manual_seed(5000 + dim + batch + (1 if fp32 else 0))
    lens = torch.randint(1, 2048 + 1, (batch,), generator=gc)
    specials = [1, 2, W - 1, W, BLOCK_M, BLOCK_M + 1, 2 * BLOCK_M - 1, W]
    n_sp = min(len(specials), batch // 2)
    perm = torch.randperm(batch, generator=gc)
    if n_sp:
        lens[perm[:n_sp]] = torch.tensor(specials[:n_sp])
    return lens


def randn(shape, dtype, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(shape, device="cuda") * scale).to(dtype)


def build_prefill(r: Row, lens: torch.Tensor, q: torch.Tensor, lines: int, cf: bool) -> types.SimpleNamespace:
    dt = DTYPES[r.dtype]
    T = int(q[-1])
    x = randn((r.dim, T), dt) if cf else randn((T, r.dim), dt).t()
    cs = randn((lines, r.W - 1, r.dim), dt).transpose(1, 2)
    return types.SimpleNamespace(x=x, cs=cs)


def run_row(r: Row, V: Optional[types.ModuleType], a) -> dict:
    import causal_conv1d  # noqa: PLC0415
    from causal_conv1d import causal_conv1d_update  # noqa: PLC0415
    from causal_conv1d.varlen import (  # noqa: PLC0415
        causal_conv1d_update_spec,
        causal_conv1d_update_spec_ref,
        causal_conv1d_varlen_fn,
        causal_conv1d_varlen_ref,
    )

    ops = torch.ops.causal_conv1d
    dt = DTYPES[r.dtype]
    es = torch.empty((), dtype=dt).element_size()
    H = r.W - 1
    torch.manual_seed(zlib.crc32(r.name.encode()))
    w = randn((r.dim, r.W), dt, r.W**-0.5)
    b = randn((r.dim,), dt, 0.5)
    res: dict[str, Any] = {"row": r.name}
    checks: dict[str, bool] = {}
    if r.kind.startswith("prefill"):
        cf = r.kind == "prefill-cf"
        lens = prefill_lengths(r.dim, r.batch, r.dtype == "fp32")
        q_cpu = torch.zeros(r.batch + 1, dtype=torch.int32)
        q_cpu[1:] = lens.cumsum(0).to(torch.int32)
        T = int(q_cpu[-1])
        lines = max(128, 2 * r.batch)
        ci = torch.randperm(lines)[: r.batch].to(torch.int32).cuda()
        hi = (torch.rand(r.batch) < 0.5).cuda()
        q = q_cpu.cuda()
        n_init = int(hi.sum())
        nbytes = es * (2 * T * r.dim + n_init * H * r.dim + r.batch * H * r.dim) + es * r.dim * (r.W + 1)
        res.update(tokens=T, bytes=nbytes)
        if not a.check_only:  # before this row's inputs take memory
            res["copy"] = copy_ceiling(nbytes, a.n_calls, a.reps)
        sets = [build_prefill(r, lens, q_cpu, lines, cf) for _ in range(n_sets(nbytes))]
        d0 = sets[0]
        # checks: ours (and vLLM's) against the float64 reference, outputs and caches
        ref_cs = d0.cs.clone()
        ref = causal_conv1d_varlen_ref(d0.x.double(), w.double(), b.double(), ref_cs, q, ci, hi, "silu", PAD)
        got_cs = torch.empty_strided(d0.cs.shape, d0.cs.stride(), dtype=dt, device="cuda").copy_(d0.cs)
        got = causal_conv1d_varlen_fn(d0.x, w, b, got_cs, q, ci, hi, activation="silu")
        res["path"] = ops._last_kernel_path("varlen_fwd")
        checks["ours_out"] = bool(((got.double() - ref).abs() <= TOL[dt] * (1 + ref.abs())).all())
        checks["ours_cache"] = bool(torch.equal(got_cs, ref_cs.to(dt)))
        meta = vllm_metadata(q_cpu, torch.device("cuda"))
        fns = {
            "ours": [lambda d=d: causal_conv1d_varlen_fn(d.x, w, b, d.cs, q, ci, hi, activation="silu") for d in sets]
        }
        if V is not None and not cf:
            v_cs = torch.empty_strided(d0.cs.shape, d0.cs.stride(), dtype=dt, device="cuda").copy_(d0.cs)
            vo = V.causal_conv1d_fn(
                d0.x,
                w,
                b,
                v_cs,
                q,
                cache_indices=ci,
                has_initial_state=hi,
                activation="silu",
                pad_slot_id=PAD,
                metadata=meta,
            )
            checks["vllm_out"] = bool(((vo.double() - ref).abs() <= TOL[dt] * (1 + ref.abs())).all())
            checks["vllm_cache"] = bool(torch.equal(v_cs, ref_cs.to(dt)))
            fns["vllm"] = [
                lambda d=d: V.causal_conv1d_fn(
                    d.x,
                    w,
                    b,
                    d.cs,
                    q,
                    cache_indices=ci,
                    has_initial_state=hi,
                    activation="silu",
                    pad_slot_id=PAD,
                    metadata=meta,
                )
                for d in sets
            ]
    else:
        spec = r.kind == "spec"
        S = H - 1 + r.L if spec else H
        lines = max(1024, 2 * r.batch)
        idx = torch.randperm(lines)[: r.batch].to(torch.int32).cuda()
        nacc = torch.randint(1, r.L + 1, (r.batch,), dtype=torch.int32).cuda() if spec else None
        nbytes = es * (
            2 * r.batch * r.L * r.dim + r.batch * (H + (H - 1 + r.L if spec else H)) * r.dim
        ) + es * r.dim * (r.W + 1)
        res["bytes"] = nbytes
        if not a.check_only:
            res["copy"] = copy_ceiling(nbytes, a.n_calls, a.reps)

        def mk() -> types.SimpleNamespace:
            x = randn((r.batch, r.L, r.dim), dt).transpose(1, 2) if spec else randn((r.batch, r.dim), dt)
            return types.SimpleNamespace(x=x, cs=randn((lines, S, r.dim), dt).transpose(1, 2))

        sets = [mk() for _ in range(n_sets(nbytes))]
        d0 = sets[0]
        ref_cs = d0.cs.clone()
        ref = causal_conv1d_update_spec_ref(d0.x.double(), ref_cs, w.double(), b.double(), "silu", idx, nacc, PAD)
        got_cs = torch.empty_strided(d0.cs.shape, d0.cs.stride(), dtype=dt, device="cuda").copy_(d0.cs)
        got = causal_conv1d_update_spec(d0.x, got_cs, w, b, "silu", idx, nacc, PAD)
        res["path"] = ops._last_kernel_path("spec_update")
        checks["ours_out"] = bool(((got.double() - ref).abs() <= TOL[dt] * (1 + ref.abs())).all())
        checks["ours_cache"] = bool(torch.equal(got_cs, ref_cs.to(dt)))
        fns = {"ours": [lambda d=d: causal_conv1d_update_spec(d.x, d.cs, w, b, "silu", idx, nacc, PAD) for d in sets]}
        if not spec:  # upstream's API (the update op) on the same step: the decode row of the table
            up_cs = torch.empty_strided(d0.cs.shape, d0.cs.stride(), dtype=dt, device="cuda").copy_(d0.cs)
            up = causal_conv1d_update(d0.x, up_cs, w, b, "silu", conv_state_indices=idx)
            res["path_update"] = ops._last_kernel_path("update")
            checks["update_out"] = bool(((up.double() - ref).abs() <= TOL[dt] * (1 + ref.abs())).all())
            fns["ours_update"] = [
                lambda d=d: causal_conv1d_update(d.x, d.cs, w, b, "silu", conv_state_indices=idx) for d in sets
            ]
        if V is not None:
            v_cs = torch.empty_strided(d0.cs.shape, d0.cs.stride(), dtype=dt, device="cuda").copy_(d0.cs)
            vo = V.causal_conv1d_update(
                d0.x, v_cs, w, b, "silu", conv_state_indices=idx, num_accepted_tokens=nacc, pad_slot_id=PAD
            )
            checks["vllm_out"] = bool(((vo.double() - ref).abs() <= TOL[dt] * (1 + ref.abs())).all())
            checks["vllm_cache"] = bool(torch.equal(v_cs, ref_cs.to(dt)))
            fns["vllm"] = [
                lambda d=d: V.causal_conv1d_update(
                    d.x, d.cs, w, b, "silu", conv_state_indices=idx, num_accepted_tokens=nacc, pad_slot_id=PAD
                )
                for d in sets
            ]
    del causal_conv1d
    res["checks"] = checks
    if not a.check_only:
        for who, fl in fns.items():
            res[who] = time_fns(fl, a.n_calls, a.reps)
    torch.cuda.empty_cache()
    return res


def fmt(v: Optional[float], width: int = 8, prec: int = 1) -> str:
    return " " * (width - 3) + "n/a" if v is None else f"{v:{width}.{prec}f}"


def print_table(results: list[dict]) -> None:
    print(
        "\nµs per call; graph: N calls in one CUDA graph / N; eager: CUDA events around N calls / N; "
        "%copy = copy-ceiling time / op time (graph); vllm/ours > 1: ours faster"
    )
    hdr = (
        f"{'row':34s} {'MB':>8s} | {'ours gr':>8s} {'vllm gr':>8s} {'v/ours':>6s} | {'ours eg':>8s} {'vllm eg':>8s}"
        f" | {'copy gr':>8s} {'ours%':>6s} {'vllm%':>6s} | path, checks"
    )
    print(hdr)
    print("-" * len(hdr))
    for r in results:
        og, cg = r.get("ours", {}).get("graph_us"), r.get("copy", {}).get("graph_us")
        vg = r.get("vllm", {}).get("graph_us")
        bad = [k for k, ok in r["checks"].items() if not ok]
        print(
            f"{r['row']:34s} {r['bytes'] / 1e6:8.2f} | {fmt(og)} {fmt(vg)} {fmt(vg / og if og and vg else None, 6, 2)} | "
            f"{fmt(r.get('ours', {}).get('eager_us'))} {fmt(r.get('vllm', {}).get('eager_us'))} | {fmt(cg)} "
            f"{fmt(100 * cg / og if og and cg else None, 6, 1)} {fmt(100 * cg / vg if vg and cg else None, 6, 1)} | "
            f"{r.get('path', '?')}, {'ok' if not bad else 'FAILED ' + ','.join(bad)}"
        )
        if "ours_update" in r:
            u = r["ours_update"]
            print(
                f"{'  the same step, upstream API (update)':34s} {'':8s} | {fmt(u.get('graph_us'))} {'':8s} "
                f"{fmt(vg / u['graph_us'] if vg and u.get('graph_us') else None, 6, 2)} | {fmt(u.get('eager_us'))} "
                f"{'':8s} | {'':8s} {fmt(100 * cg / u['graph_us'] if cg and u.get('graph_us') else None, 6, 1)}"
                f" {'':6s} | {r.get('path_update', '?')}"
            )


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vllm", metavar="PATH", help="vLLM's causal_conv1d.py, a vLLM checkout, or a folder holding it")
    ap.add_argument("--json", metavar="OUT", help="write every number here")
    ap.add_argument("--quick", action="store_true", help="decode at batch 1, 64, 512 only")
    ap.add_argument("--rows", nargs="*", default=[], metavar="SUBSTRING", help="only rows whose name contains one")
    ap.add_argument("--check-only", action="store_true", help="the correctness checks, no timing")
    ap.add_argument("--n-calls", type=int, default=20)
    ap.add_argument("--reps", type=int, default=10)
    a = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("serving_bench: needs a CUDA GPU", file=sys.stderr)
        return 2
    V = load_vllm(a.vllm) if a.vllm else None
    dev = torch.cuda.get_device_properties(0)
    print(
        f"{dev.name}, {dev.multi_processor_count} SMs, L2 {l2_bytes() >> 20} MiB; torch {torch.__version__}"
        + (f"; vLLM peer {V.__peer_file__}" if V else "; no vLLM peer (--vllm PATH)"),
        flush=True,
    )
    rows = [r for r in rows_plan(a.quick) if not a.rows or any(s in r.name for s in a.rows)]
    results = []
    warm_up()
    t0 = time.perf_counter()
    for r in rows:
        res = run_row(r, V, a)
        results.append(res)
        print(f"  {r.name}: {json.dumps({k: v for k, v in res.items() if k in ('checks', 'path')})}", flush=True)
    print_table(results)
    print(f"\n{len(rows)} rows in {time.perf_counter() - t0:.0f} s")
    if a.json:
        Path(a.json).write_text(json.dumps({"device": dev.name, "torch": torch.__version__, "rows": results}, indent=1))
    return 1 if any(not ok for r in results for ok in r["checks"].values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
