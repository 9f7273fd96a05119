"""The kernel benchmark (``python benchmarks/bench.py --kernel [--peer PATH] [--json OUT.json]``): every
row of the kernel-mode table (benchmarks/RESULTS.md) plus the practical shapes, with each op captured
in a CUDA graph (median of 20 replays; one replay runs the op over several input sets in turn,
together > 3x the L2, so no replay reads its inputs from the cache) next to the eager time (CUDA
events around each call).

Each build runs in its own child process (``bench.py --kernel-worker``) that writes JSON, so two
builds that are both ``causal_conv1d`` can be compared in one run: ours (the package this
interpreter imports) and, with ``--peer PATH``, another build -- a directory where upstream
causal-conv1d was built in place (``python setup.py build_ext --inplace``), or the site-packages it
was installed into. Upstream is called through its own Python functions
(``causal_conv1d.cpp_functions``: output allocation, the zeroed fp32 weight-gradient buffers and
their casts included, as its autograd does); ours through the ``causal_conv1d`` torch ops. The copy
ceiling (a 1 GiB device-to-device copy, bytes read + written) is measured in the same run; ``%copy``
= bytes the op must move / graph time / ceiling. benchmarks/ncu_rows.py profiles the same rows.

``--fla PATH`` adds flash-linear-attention's Triton kernels as a third column (FLA's package read
from PATH, e.g. a copy of its ``fla/`` tree: ``fla.modules.conv.triton.ops.causal_conv1d_fwd / _bwd``,
the functions its autograd calls, on (B, T, D) channel-last memory; no decode rows). The packed
rows ("pfwd" / "pbwd": sequences packed into one row of B * L tokens) run ours through
``cu_seqlens`` (packed_fwd / packed_bwd), FLA through ``cu_seqlens`` (its chunk indices prepared
once, outside the timing) and a ``--peer`` build through ``seq_idx``. The fused-residual rows
("rfwd" / "rpfwd": out = silu(conv(x) + bias) + residual, the residual in x's layout) sit next to
their no-residual shapes' rows; ours through the ops' ``residual`` argument, FLA through its
forward's ``residual``; upstream has none (its column says so).
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable, Optional, TypedDict, Union

import bench_common as bc
import torch


class Check(TypedDict, total=False):
    rel_err: float
    state_exact: bool  # update only: the state written bit for bit as the reference's


class KernelRow(bc.CaseRow, total=False):
    """One row of one build (a failed row: name and error only)."""

    pitch: int
    seqs: int  # packed rows: the number of sequences
    rel_err: float
    state_exact: bool
    tol: float
    ok: bool
    bytes: int
    nbuf: int
    eager_us: float
    graph_reps: int
    graph_us: float
    error: str


class BuildResult(TypedDict):
    """What a kernel worker writes: the build and its rows."""

    build: str
    where: str
    version: str
    rows: list[KernelRow]


class CopyCeiling(TypedDict):
    eager_gbps: float
    graph_gbps: float


# name, kind, B, D, L, dtype, layout, W, pitch: the kernel-mode table's rows first, then the practical
# shapes; each shape has a fwd and a bwd row, named "<kind> <shape's name>"
_FWD_BWD_SHAPES = [
    ("bf16 cf B4 D4096 L4096", 4, 4096, 4096, "bf16", "cf", 4, 0),
    ("bf16 cl B4 D4096 L4096", 4, 4096, 4096, "bf16", "cl", 4, 0),
    ("fp32 cf B4 D4096 L4096", 4, 4096, 4096, "fp32", "cf", 4, 0),
    ("bf16 cl Mamba2 B8 L2048 D5376 pitch 11008", 8, 5376, 2048, "bf16", "cl", 4, 11008),
    ("bf16 cf B16 D1024 L512", 16, 1024, 512, "bf16", "cf", 4, 0),
]
KERNEL_ROWS = [(f"{kind} {name}", kind, *shape) for name, *shape in _FWD_BWD_SHAPES for kind in ("fwd", "bwd")]
KERNEL_ROWS.append(("update bf16 B256 D8192", "update", 256, 8192, 1, "bf16", "plain", 4, 0))


# Packed rows: name, kind, B, D, L, dtype, layout, W, pitch, sequences ("7": 7 sequences over the
# B * L tokens; "3-16/row": each of the B rows of L tokens cut into 3 to 16 sequences); each shape
# has a forward ("pfwd") and a backward ("pbwd") row
_PACKED_SHAPES = [
    ("bf16 cl 7 seqs T16384 D4096", 1, 4096, 16384, "bf16", "cl", 4, 0, "7"),
    ("bf16 cf 7 seqs T16384 D4096", 1, 4096, 16384, "bf16", "cf", 4, 0, "7"),
    ("bf16 cl Mamba2 B8 L2048 D5376 pitch 11008 3-16/row", 8, 5376, 2048, "bf16", "cl", 4, 11008, "3-16/row"),
]
PACKED_ROWS = [(f"{kind} {name}", kind, *shape) for name, *shape in _PACKED_SHAPES for kind in ("pfwd", "pbwd")]

# Fused-residual rows: the forward of a shape above with a residual (kind "rfwd": fwd, "rpfwd":
# packed_fwd), to compare with that shape's "fwd" / "pfwd" row; each is listed right after it.
_RESIDUAL_OF = {"fwd": "rfwd", "pfwd": "rpfwd"}
_RESIDUAL_SHAPES = {
    "bf16 cf B4 D4096 L4096",
    "bf16 cl B4 D4096 L4096",
    "bf16 cl 7 seqs T16384 D4096",
    "bf16 cf 7 seqs T16384 D4096",
}


def with_residual_rows(rows: list[tuple]) -> list[tuple]:
    """rows, each fwd / pfwd row of a _RESIDUAL_SHAPES shape followed by its fused-residual row."""
    out: list[tuple] = []
    for r in rows:
        out.append(r)
        kind, shape_name = r[1], r[0].split(" ", 1)[1]
        if kind in _RESIDUAL_OF and shape_name in _RESIDUAL_SHAPES:
            out.append((f"{_RESIDUAL_OF[kind]} {shape_name}", _RESIDUAL_OF[kind], *r[2:]))
    return out


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
    extra = [r for r in bc.PRACTICAL_ROWS + bc.UPDATE_ROWS if r[6] in ("cf", "cl", "plain")]
    extra.append(("update bf16 B1 D8192", "update", 1, 8192, 1, "bf16", "plain", 4, 0))
    for r in extra:
        key = tuple(r[1:8]) + ((r[8] if len(r) > 8 else 0),)
        if key not in seen:
            seen.add(key)
            rows.append(tuple(r[:8]) + ((r[8] if len(r) > 8 else 0),))
    rows += PACKED_ROWS
    rows = with_residual_rows(rows)
    return [r for r in rows if not only or any(w in r[0] for w in only)]


def moved_bytes(kind: str, B: int, D: int, L: int, esz: int, S: int = 3) -> int:
    """Bytes the op must move: fwd x + out (+ residual); bwd x + dout + dx; update x + out + state read
    and written."""
    if kind in ("fwd", "pfwd"):
        return 2 * B * D * L * esz
    if kind in ("rfwd", "rpfwd"):
        return 3 * B * D * L * esz
    if kind in ("bwd", "pbwd"):
        return 3 * B * D * L * esz
    return (2 + 2 * S) * B * D * esz


def _import_under(path: str, package: str, option: str) -> tuple[Any, Path]:
    """``package`` imported with ``path`` first on sys.path, and its folder; SystemExit (naming the
    command-line option) when the import finds it elsewhere."""
    root = Path(path).resolve()
    sys.path.insert(0, str(root))
    module = importlib.import_module(package)
    where = Path(module.__file__).resolve().parent
    if root not in where.parents:
        raise SystemExit(f"{option} {path}: `import {package}` found {where}, not a package under {root}")
    return module, where


class _Build:
    """The three ops of one causal-conv1d build as fwd(x, w, b) -> out, bwd(x, w, b, dout) ->
    (dx, dweight, dbias), update(x (B, D, 1), state, w, b) -> out; all with silu."""

    fwd: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
    bwd: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], Sequence[torch.Tensor]]
    update: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
    # packed rows: pfwd(x, w, b, pk) -> out, pbwd(x, w, b, dout, pk) -> (dx, dweight, dbias), pk the
    # row's Packing; channel_last_only: the build reads (B, T, D) memory only (FLA)
    pfwd: Optional[Callable[..., Any]] = None
    pbwd: Optional[Callable[..., Any]] = None
    # fused-residual rows: rfwd(x, w, b, residual, pk) -> out (pk None: dense; else packed); None: the
    # build has no fused residual
    rfwd: Optional[Callable[..., Any]] = None
    channel_last_only = False
    prepare_chunk_indices: Optional[Callable[..., Any]] = None

    def __init__(self, peer: Optional[str], fla: Optional[str] = None) -> None:
        if fla is not None:
            self._init_fla(fla)
            return
        if peer is None:
            ops, pkg = bc.load_ops()
            self.name = "ours"
            self.where = str(Path(pkg.__file__).parent) if pkg is not None else "torch.ops"
            self.version = getattr(pkg, "__version__", "?")
            self._use_ops(ops)
            return
        pkg, where = _import_under(peer, "causal_conv1d", "--peer")
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
            self._use_ops(bc._Ops(torch.ops.causal_conv1d))
        else:
            raise SystemExit(f"--peer {peer}: neither causal_conv1d.cpp_functions nor torch.ops.causal_conv1d")

    def _use_ops(self, ops: bc._Ops) -> None:
        """The ops of a build of this project (its torch ops)."""
        self.fwd = lambda x, w, b: ops.fwd(x, w, b, None, None, False, True)[0]
        self.bwd = lambda x, w, b, dout: ops.bwd(x, w, b, dout, None, None, None, False, True)[:3]
        self.update = lambda x, st, w, b: ops.update(x, st, w, b, True, None, None)
        if ops.packed_fwd is not None and ops.packed_bwd is not None:
            pf, pb = ops.packed_fwd.default, ops.packed_bwd.default
            self.pfwd = lambda x, w, b, pk: pf(x, w, b, pk.cu, None, False, True)[0]
            self.pbwd = lambda x, w, b, dout, pk: pb(x, w, b, dout, pk.cu, None, None, False, True)[:3]
        fwd_op, pf_op = ops.fwd, ops.packed_fwd
        if any(a.name == "residual" for a in fwd_op._schema.arguments) and pf_op is not None:

            def rfwd(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, r: torch.Tensor, pk: Optional[Packing]) -> Any:
                if pk is None:
                    return fwd_op(x, w, b, None, None, False, True, r)[0]
                return pf_op.default(x, w, b, pk.cu, None, False, True, r)[0]

            self.rfwd = rfwd

    def _init_fla(self, path: str) -> None:
        """flash-linear-attention's Triton kernels from the package under `path` (never a copy in
        this repository): the forward and backward functions its autograd calls, on (B, T, D)."""
        fla, where = _import_under(path, "fla", "--fla")
        tops = importlib.import_module("fla.modules.conv.triton.ops")
        self.prepare_chunk_indices = importlib.import_module("fla.ops.utils").prepare_chunk_indices
        self.name, self.where, self.version = "fla", str(where), getattr(fla, "__version__", "?")
        self.channel_last_only = True
        fwd_raw, bwd_raw = tops.causal_conv1d_fwd, tops.causal_conv1d_bwd

        def fwd(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, pk: Optional[Packing] = None) -> torch.Tensor:
            # x: a (B, D, L) view of (B, L, D) memory; out in the same view
            kw = {} if pk is None else {"cu_seqlens": pk.cu, "chunk_indices": pk.chunk_indices}
            return fwd_raw(x.transpose(1, 2), w, b, None, activation="silu", **kw)[0].transpose(1, 2)

        def bwd(
            x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, dout: torch.Tensor, pk: Optional[Packing] = None
        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
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

        def rfwd(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, r: torch.Tensor, pk: Optional[Packing]) -> Any:
            kw = {} if pk is None else {"cu_seqlens": pk.cu, "chunk_indices": pk.chunk_indices}
            out = fwd_raw(x.transpose(1, 2), w, b, residual=r.transpose(1, 2), activation="silu", **kw)[0]
            return out.transpose(1, 2)

        self.fwd, self.bwd, self.update, self.pfwd, self.pbwd = fwd, bwd, update, fwd, bwd
        self.rfwd = rfwd


class Packing:
    """A packed row's side inputs: cu_seqlens (ours, FLA), seq_idx (1, B * L) (a --peer build), FLA's
    chunk indices (what its autograd would prepare on every call, with a host sync)."""

    def __init__(self, build: _Build, lens: list[int]) -> None:
        t = torch.tensor(lens, dtype=torch.int32)
        self.lens = lens
        self.cu = torch.cat([torch.zeros(1, dtype=torch.int32), t.cumsum(0).to(torch.int32)]).cuda()
        self.seq_idx = torch.repeat_interleave(torch.arange(len(lens), dtype=torch.int32), t.long())[None].cuda()
        prep = build.prepare_chunk_indices
        self.chunk_indices = prep(self.cu, 64) if prep is not None else None


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
        if kind in ("pfwd", "pbwd", "rpfwd"):  # one row of B * L tokens
            gen = torch.Generator().manual_seed(sum(name.encode()))
            self.pk = Packing(build, packed_lengths(case[9], B, L, gen))
            B, L = 1, B * L
        dtype = bc.DTYPES[dts]
        esz = torch.tensor([], dtype=dtype).element_size()
        torch.manual_seed(sum(name.encode()))
        self.build, self.kind, self.dtype = build, kind, dtype
        self.w = (torch.randn(D, W, device="cuda") / W**0.5).to(dtype)
        self.bias = torch.randn(D, device="cuda").to(dtype)
        S = W - 1
        self.bytes = moved_bytes(kind, B, D, L, esz, S)
        self.nbuf = bc.n_buffers(self.bytes) if nbuf is None else nbuf
        if kind in ("fwd", "bwd", "pfwd", "pbwd", "rfwd", "rpfwd"):
            self.xs = [bc.make_x(B, D, L, dtype, layout, pitch) for _ in range(self.nbuf)]
            if kind in ("bwd", "pbwd"):
                self.douts = [bc.make_x(B, D, L, dtype, layout) for _ in range(self.nbuf)]
            if kind in ("rfwd", "rpfwd"):  # the residual in x's layout
                self.ress = [bc.make_x(B, D, L, dtype, layout) for _ in range(self.nbuf)]
        else:
            self.xs = [torch.randn(B, D, 1, device="cuda", dtype=dtype) for _ in range(self.nbuf)]
            self.states = [torch.randn(B, D, S, device="cuda", dtype=dtype) for _ in range(self.nbuf)]

    def call(self, i: int) -> Union[torch.Tensor, Sequence[torch.Tensor]]:
        b = self.build
        if self.kind == "fwd":
            return b.fwd(self.xs[i], self.w, self.bias)
        if self.kind == "bwd":
            return b.bwd(self.xs[i], self.w, self.bias, self.douts[i])
        if self.kind in ("rfwd", "rpfwd"):
            if b.rfwd is None:
                raise NotImplementedError(f"{b.name} has no fused residual")
            return b.rfwd(self.xs[i], self.w, self.bias, self.ress[i], self.pk)
        if self.kind in ("pfwd", "pbwd"):
            if b.pfwd is None or b.pbwd is None:
                raise NotImplementedError(f"{b.name} has no packed-sequence ops")
            if self.kind == "pfwd":
                return b.pfwd(self.xs[i], self.w, self.bias, self.pk)
            return b.pbwd(self.xs[i], self.w, self.bias, self.douts[i], self.pk)
        return b.update(self.xs[i], self.states[i], self.w, self.bias)

    def check(self) -> Check:
        """rel_err against float64 (and state_exact for update) of set 0; the update's state is
        restored afterwards, so timing starts from the same inputs."""
        w, bias, x = self.w, self.bias, self.xs[0]

        def ref_of(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, r: Optional[torch.Tensor] = None) -> torch.Tensor:
            if self.pk is not None:
                return bc.packed_fwd_ref(x, w, b, self.pk.cu, None, silu=True, residual=r)[0]
            return bc.fwd_ref(x, w, b, silu=True, residual=r)[0]

        if self.kind in ("fwd", "pfwd"):
            return {"rel_err": bc.rel_err(self.call(0), ref_of(x, w, bias))}
        if self.kind in ("rfwd", "rpfwd"):
            return {"rel_err": bc.rel_err(self.call(0), ref_of(x, w, bias, self.ress[0]))}
        if self.kind in ("bwd", "pbwd"):
            dout = self.douts[0]
            xr = x.detach().double().requires_grad_()
            wr = w.detach().double().requires_grad_()
            br = bias.detach().double().requires_grad_()
            ref = ref_of(xr, wr, br)
            ref.backward(dout.double())
            dx, dw, db = self.call(0)
            return {"rel_err": max(bc.rel_err(dx, xr.grad), bc.rel_err(dw, wr.grad), bc.rel_err(db, br.grad))}
        st0 = self.states[0].clone()
        st_ref = st0.clone()
        ref = bc.update_ref(x, st_ref, w, bias, True, None, None)
        out = self.call(0)
        res: Check = {"rel_err": bc.rel_err(out, ref), "state_exact": bool(torch.equal(self.states[0], st_ref))}
        self.states[0].copy_(st0)
        return res


def kernel_case(build: _Build, case: tuple, quick: bool) -> KernelRow:
    name, kind, B, D, L, dts, layout, W, pitch = case[:9]
    row: KernelRow = {
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
    row["tol"] = bc.rel_tol(inp.dtype)
    row["ok"] = bool(row["rel_err"] < row["tol"]) and row.get("state_exact", True)
    row["bytes"] = inp.bytes
    row["nbuf"] = nbuf = inp.nbuf
    row["eager_us"] = bc.time_fn(inp.call, nbuf, iters=iters)
    reps = graph_reps(nbuf)
    row["graph_reps"] = reps
    row["graph_us"] = bc.time_graph(inp.call, nbuf, reps=reps)
    del inp
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return row


def kernel_worker(peer: Optional[str], out: Path, only: list[str], quick: bool, fla: Optional[str] = None) -> int:
    """Child process: time every kernel-mode row with one build, write JSON to `out`."""
    build = _Build(peer, fla)
    res: BuildResult = {"build": build.name, "where": build.where, "version": build.version, "rows": []}
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


def copy_ceiling_graph() -> CopyCeiling:
    """Device-to-device copy of 1 GiB (bytes read + written): eager events and inside a CUDA graph."""
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda").random_()
    b = torch.empty_like(a)
    t = bc.time_fn(lambda i: b.copy_(a), 1, warmup=5, iters=30)
    tg = bc.time_graph(lambda i: b.copy_(a), 1, reps=4)
    a = b = None  # noqa: F841 - free the 2 GiB before the workers start
    torch.cuda.empty_cache()
    return {"eager_gbps": 2 * n / (t * 1e-6) / 1e9, "graph_gbps": 2 * n / (tg * 1e-6) / 1e9}


def kernel_table(
    ours: BuildResult, peer: Optional[BuildResult], ceiling: float, fla: Optional[BuildResult] = None
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
            f"{r['name']:48s} {r['graph_us']:8.1f} {bc.fmt(po['graph_us'] if po else None, '8.1f')} "
            f"{bc.fmt(ratio, '6.3f')} {100 * frac:8.1f} {bc.fmt(None if pfrac is None else 100 * pfrac, '8.1f')} "
            f"{r['eager_us']:9.1f} {bc.fmt(po['eager_us'] if po else None, '9.1f')} {ok:>5s}"
        )
        if fla is not None:
            fr = frow.get(r["name"])
            fo = fr if fr is not None and "error" not in fr else None
            ffrac = 100 * fo["bytes"] / (fo["graph_us"] * 1e-6) / 1e9 / ceiling if fo else None
            lines[-1] += (
                f" {bc.fmt(fo['graph_us'] if fo else None, '8.1f')}"
                f" {bc.fmt(fo['graph_us'] / r['graph_us'] if fo else None, '8.3f')}"
                f" {bc.fmt(ffrac, '8.1f')} {('y' if fo['ok'] else 'NO') if fo else '-':>6s}"
            )
        if p is not None and "error" in p:
            lines[-1] += f"  (peer: {p['error'][:60]})"
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    """The kernel table: one worker per build, then the table of both."""
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: kernel mode needs a GPU")
    ceil = copy_ceiling_graph()
    # The faster of the two: a copy captured in a graph can become a copy-engine memcpy node, slower
    # than the SM copy eager runs (H200: 2764 GB/s in a graph, 4251 eager), which would
    # put kernels above 100% of "copy".
    ceiling = max(ceil["graph_gbps"], ceil["eager_gbps"])
    results: dict[str, BuildResult] = {}
    with tempfile.TemporaryDirectory() as td:
        builds = [("ours", None)] + ([("peer", args.peer)] if args.peer else []) + ([("fla", None)] if args.fla else [])
        for who, peer in builds:
            out = Path(td) / f"{who}.json"
            cmd = [
                sys.executable,
                str(Path(__file__).resolve().parent / "bench.py"),
                "--kernel-worker",
                "--out",
                str(out),
            ]
            if peer:
                cmd += ["--peer", peer]
            if who == "fla":
                cmd += ["--fla", args.fla]
            if args.only:
                cmd += ["--only", args.only]
            if args.quick:
                cmd.append("--quick")
            rc = subprocess.call(cmd, cwd=str(bc.ROOT) if who == "ours" else None)
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
        meta = {**bc.run_meta(), "copy_ceiling": ceil}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        out_json = {"meta": meta, "ours": ours, "peer": peer, "fla": fla, "table": table}
        args.json.write_text(json.dumps(out_json, indent=1))
    bad = [r["name"] for r in ours["rows"] if "error" in r or not r.get("ok", False)]
    for n in bad:
        print(f"ours FAILED or inaccurate: {n}")
    return 1 if bad else 0
