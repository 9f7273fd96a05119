"""Small shapes through every CUDA kernel path, for compute-sanitizer (memcheck, racecheck).

    compute-sanitizer --tool memcheck --error-exitcode 1 python tests/gpu/sanitize_driver.py

Exits non-zero when a result is wrong or a kernel path (``_kernel_paths``) was not run (each call's
path is read back with ``_last_kernel_path``); the sanitizer reports bad accesses and races itself.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_ops import load_ops  # noqa: E402

from causal_conv1d._reference import fwd_ref, packed_fwd_ref, rel_err, rel_tol, update_ref  # noqa: E402

SEEN: set[str] = set()  # the kernel paths the calls ran


def ran(ops, op: str) -> None:
    SEEN.add(ops._last_kernel_path(op))


def x_of(layout: str, B: int, D: int, L: int, dev: str, dtype: torch.dtype) -> torch.Tensor:
    """x (B, D, L): channel-first ("cf"), channel-last with a token pitch of D + 4 ("cl"), or
    channel-first at an odd offset ("cf_odd")."""
    if layout == "cf":
        return torch.randn(B, D, L, device=dev, dtype=dtype)
    if layout == "cl":
        return torch.randn(B, L, D + 4, device=dev, dtype=dtype)[:, :, 2 : 2 + D].transpose(1, 2)
    return torch.randn(B, D, L + 1, device=dev, dtype=dtype)[:, :, 1:]


def update_wrong(ops, x, state, w, cache_seqlens, indices) -> bool:
    """One update step on state against update_ref on a copy of it: whether the output or the state differs."""
    st_ref = state.clone()
    ref = update_ref(x, st_ref, w, None, True, cache_seqlens, indices)
    out = ops.update(x, state, w, None, True, cache_seqlens, indices)
    ran(ops, "update")
    return (not torch.equal(state, st_ref)) or rel_err(out, ref) >= rel_tol(x.dtype)


def spec_update_wrong(ops, x, state, w, b, indices, accepted) -> bool:
    """One spec_update step on state against causal_conv1d_update_spec_ref on a copy of it: whether the
    output or the state differs."""
    from causal_conv1d.varlen import causal_conv1d_update_spec_ref  # noqa: PLC0415

    st_ref = state.clone()
    out = ops.spec_update(x, state, w, b, True, indices, accepted, -1, None, -1, None, None, None)
    ran(ops, "spec_update")
    ref = causal_conv1d_update_spec_ref(x, st_ref, w, b, "silu", indices, accepted)
    return (not torch.equal(state, st_ref)) or rel_err(out, ref) >= rel_tol(x.dtype)


def serving_checks(ops, dev: str, dtype: torch.dtype) -> tuple[int, int]:
    """seq_idx with initial_states (fwd, bwd), varlen_fwd and spec_update on small shapes; (checks, failures)."""
    from causal_conv1d.causal_conv1d_interface import causal_conv1d_ref  # noqa: PLC0415
    from causal_conv1d.varlen import causal_conv1d_varlen_ref  # noqa: PLC0415

    n = bad = 0
    for W in (2, 4, 5):
        for layout in ("cf", "cl"):
            B, D, L = 2, 20, 70
            x = torch.randn(B, D, L, device=dev, dtype=dtype)
            if layout == "cl":
                x = torch.randn(B, L, D, device=dev, dtype=dtype).transpose(1, 2)
            w = torch.randn(D, W, device=dev, dtype=dtype)
            b = torch.randn(D, device=dev, dtype=dtype)
            init = torch.randn(B, D, W - 1, device=dev, dtype=dtype)
            seq = torch.zeros(B, L, device=dev, dtype=torch.int32)
            seq[0, 1:] = 1  # the first sequence is shorter than the window
            seq[1, 40:] = 2
            seq[1, L - 3 :] = -1
            out, _ = ops.fwd(x, w, b, seq, init, False, True)
            ran(ops, "fwd")
            ref = causal_conv1d_ref(x.float(), w.float(), b.float(), init.float(), activation="silu", seq_idx=seq)
            n += 1
            bad += rel_err(out, ref) >= rel_tol(dtype)
            ops.bwd(x, w, b, torch.randn_like(out), seq, init, None, True, True)
            # varlen prefill: a sequence starting just before the 64-token chunk edge, a padded slot
            lens = [63, 1, 0, 3, 80, 2]
            q = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), device=dev, dtype=torch.int32)
            total = int(q[-1]) + 5
            xv = (
                torch.randn(D, total, device=dev, dtype=dtype)
                if layout == "cf"
                else torch.randn(total, D, device=dev, dtype=dtype).t()
            )
            st = torch.randn(8, 5, D, device=dev, dtype=dtype).transpose(1, 2)  # (lines, D, S=5), (B, S, D) memory
            ci = torch.tensor([3, 0, 6, -1, 7, 1], device=dev, dtype=torch.int32)
            hi = torch.tensor([1, 0, 1, 1, 1, 0], device=dev, dtype=torch.bool)
            st_ref = st.clone()
            out_v = ops.varlen_fwd(xv, w, b, st, q, ci, hi, True, -1, None, None, None, None, 0)
            ran(ops, "varlen_fwd")
            ref_v = causal_conv1d_varlen_ref(xv, w, b, st_ref, q, ci, hi)
            n += 1
            bad += (not torch.equal(st, st_ref)) or rel_err(out_v, ref_v) >= rel_tol(dtype)
            # speculative decode: 1 + 3 drafts, state W - 1 + 3
            xs = torch.randn(3, D, 4, device=dev, dtype=dtype)
            ss = torch.randn(5, D, W + 2, device=dev, dtype=dtype)
            ix = torch.tensor([4, -1, 0], device=dev, dtype=torch.int32)
            na = torch.tensor([2, 1, 4], device=dev, dtype=torch.int32)
            n += 1
            bad += spec_update_wrong(ops, xs, ss, w, b, ix, na)
            # a plain decode step on a cache of state_len width - 1 (the update op's kernels)
            xd = torch.randn(3, D, device=dev, dtype=dtype)
            sd = torch.randn(5, W - 1, D, device=dev, dtype=dtype).transpose(1, 2)
            n += 1
            bad += spec_update_wrong(ops, xd, sd, w, b, ix, None)
            # the same in vLLM's layouts (x (batch, seqlen, dim) and the cache (lines, S, dim) transposed)
            xs = torch.randn(3, 4, D, device=dev, dtype=dtype).transpose(1, 2)
            ss = torch.randn(5, W + 2, D, device=dev, dtype=dtype).transpose(1, 2)
            n += 1
            bad += spec_update_wrong(ops, xs, ss, w, b, ix, na)
    return n, bad


def packed_checks(ops, dev: str, dtype: torch.dtype) -> tuple[int, int]:
    """packed_fwd / packed_bwd (cu_seqlens, per-sequence states) on small shapes; (checks, failures)."""
    n = bad = 0
    lens = [0, 2, 37, 1, 0, 60, 5]  # empty sequences, ones shorter than the window, chunk-crossing ones
    cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), device=dev, dtype=torch.int32)
    total, ns = int(cu[-1]), len(lens)
    for W in (2, 4, 5, 8):
        for layout in ("cf", "cl", "cf_odd"):
            D = 20
            x = x_of(layout, 1, D, total, dev, dtype)
            w = torch.randn(D, W, device=dev, dtype=dtype)
            b = torch.randn(D, device=dev, dtype=dtype)
            init = torch.randn(ns, D, W - 1, device=dev, dtype=dtype)
            out, fin = ops.packed_fwd(x, w, b, cu, init, True, True)
            ran(ops, "varlen_fwd")
            ref, ref_fin = packed_fwd_ref(x, w, b, cu, init, silu=True)
            n += 1
            bad += rel_err(out, ref) >= rel_tol(dtype) or not torch.equal(fin.double(), ref_fin)
            dout = torch.randn_like(out)
            dfin = torch.randn_like(fin)
            ops.packed_bwd(x, w, b, dout, cu, init, dfin, True, True)
            ran(ops, "packed_bwd")
            ops.packed_bwd(x, w, None, dout, cu, None, None, False, False)
    return n, bad


def main() -> int:
    ops = load_ops()
    dev = "cuda"
    bad = 0
    n = 0
    for dtype in (torch.float32, torch.bfloat16):  # noqa: PLR1702
        for W in (2, 4, 5):
            for L in (1, 7, 300):
                for layout in ("cf", "cl", "cf_odd"):
                    B, D = 2, 20
                    x = x_of(layout, B, D, L, dev, dtype)
                    w = torch.randn(D, W, device=dev, dtype=dtype)
                    b = torch.randn(D, device=dev, dtype=dtype)
                    init = torch.randn(B, D, W - 1, device=dev, dtype=dtype)
                    dfin = torch.randn(B, D, W - 1, device=dev, dtype=dtype)
                    out, fin = ops.fwd(x, w, b, None, init, True, True)
                    ran(ops, "fwd")
                    ref, _ = fwd_ref(x, w, b, initial_states=init, silu=True)
                    n += 1
                    bad += rel_err(out, ref) >= rel_tol(dtype)
                    dout = torch.randn_like(out)
                    dx, dw, db, di = ops.bwd(x, w, b, dout, None, init, dfin, True, True)
                    ran(ops, "bwd")
                    ops.bwd(x, w, b, dout, None, None, None, False, True)  # no states: the fast paths
                    ran(ops, "bwd")
                    seq = torch.zeros(B, L, device=dev, dtype=torch.int32)
                    seq[:, L // 2 :] = 1
                    seq[:, L - 1 :] = -1
                    out_s, _ = ops.fwd(x, w, b, seq, None, False, False)
                    ran(ops, "fwd")
                    ref_s, _ = fwd_ref(x, w, b, seq_idx=seq)
                    n += 1
                    bad += rel_err(out_s, ref_s) >= rel_tol(dtype)
                    ops.bwd(x, w, b, dout, seq, None, None, False, True)
        for S, circ, idx in ((3, False, False), (5, True, False), (4, False, True)):
            B, D, W = 3, 40, 4
            state = torch.randn(4 if idx else B, D, S, device=dev, dtype=dtype)
            x = torch.randn(B, D, 2, device=dev, dtype=dtype)
            w = torch.randn(D, W, device=dev, dtype=dtype)
            cs = torch.tensor([0, 3, 11], device=dev, dtype=torch.int32) if circ else None
            ix = torch.tensor([2, -1, 0], device=dev, dtype=torch.int32) if idx else None
            n += 1
            bad += update_wrong(ops, x, state, w, cs, ix)
            x1 = x[:, :, :1].contiguous()  # one token: the fast decode path where S is W - 1 or W
            n += 1
            bad += update_wrong(ops, x1, state, w, None, ix)
        n_s, bad_s = serving_checks(ops, dev, dtype)
        n += n_s
        bad += bad_s
        n_p, bad_p = packed_checks(ops, dev, dtype)
        n += n_p
        bad += bad_p
    torch.cuda.synchronize()
    print(f"sanitize driver: {n - bad}/{n} checks passed")
    missing = sorted(set(ops._kernel_paths().split(",")) - SEEN)
    print(f"kernel paths run: {', '.join(sorted(SEEN))}" + (f"; NOT run: {', '.join(missing)}" if missing else ""))
    return 1 if bad or missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
