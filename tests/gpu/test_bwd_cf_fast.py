"""The fast channel-first backward (csrc/cuda/bwd_cf_fast.cu; on unless CAUSAL_CONV1D_BWD_FAST=0).

The cases run with the path forced on in process (``kernel_path``, whatever the environment says)
and each asserts that the fast path ran (``_last_kernel_path``). Every case in ``cases()`` is
eligible for the fast path (channel-first, 16-byte aligned rows, seqlen a multiple of 16 bytes,
width 2..4, no seq_idx / states). Rows are short (one vector), several warps long, and end inside a
warp (lanes and vectors past the row), or exactly at a warp boundary. dx is checked element by
element (a wrong halo at a lane, vector or warp boundary shows as a few bad tokens), dweight and
dbias per channel against a float64 autograd reference; every case runs twice and must give
bit-identical results. ``check_path()`` asserts (through the profiler's kernel names) that the fast
kernel ran for an eligible case and the general one for an ineligible case.

compute-sanitizer over the same cases:
    compute-sanitizer --tool memcheck --error-exitcode 1 python tests/gpu/gpu_ops.py test_bwd_cf_fast
"""

from __future__ import annotations

import re

import pytest
from gpu_ops import SHORT_ROWS, fast_cases, kernel_path, path_ran

pytestmark = pytest.mark.gpu

PATH = "bwd_cf_fast"
FAST_KERNEL = "bwd_cf_fast_kernel"
SHORT_KERNEL = r"bwd_cf_fast_kernel<__nv_bfloat16, 4, 2>"  # the profiler's name of the short-row kernel

# rounding of the stored result (dx in x's dtype, dweight / dbias in weight's dtype), relative to |ref|
ROUND_TOL = {"fp32": 1e-5, "fp16": 2e-3, "bf16": 1.5e-2}
# fp32 arithmetic (fast exp / reciprocal, fp32 sums), relative to the sum of the absolute terms
ABS_TOL_DX = 1e-4
ABS_TOL_DW = 3e-5


def cases() -> list[tuple]:
    """(dtype, weight kind, width, B, D, L, strided, silu, bias)."""
    # Tokens per warp: 1024 (fp16 / bf16), 512 (fp32). L = 8: one vector; 24: three lanes;
    # 136: 17 lanes; 256, 512: exactly 2 vectors per lane (fp32 / 16-bit) and 520 just past them;
    # 1024: exactly one / two warps; 2056, 4104: several warps, the last one
    # holding only a vector or two (lanes and vectors past the row). 4096, 9216: whole warp spans
    # only (4 / 9 spans of bf16, 8 / 18 of fp32). Kernels: fp32 and 16-bit L <= 1024 run
    # bwd_cf_fast_kernel, at 2 vectors per lane for rows of at most that (fp32 L <= 256, 16-bit
    # L <= 512: 8 .. 512 here), else at 4; 16-bit L > 1024 run bwd_cf_fast_kernel_spans (4 spans per warp): 2056 and
    # 4104 with a partial first span (a warp of 3 spans; warps of 4 + 1), 4096 and 9216 with whole
    # spans (one warp of 4; warps of 4 + 4 + 1).
    up_to_1024 = [(3, 7, 256), (2, 9, 512), (1, 5, 520), (1, 3, 1024)]  # bwd_cf_fast_kernel
    past_1024 = [(2, 6, 2056), (1, 3, 4104), (4, 96, 4104), (2, 4, 4096), (1, 2, 9216)]  # 16-bit: the spans kernel
    return fast_cases([*SHORT_ROWS, *up_to_1024, *past_1024], lambda i: (i % 3 == 0, i % 4 != 1, i % 5 != 2))


def spans_warps_per_row(L: int) -> tuple[int, int]:
    """Warps per 16-bit row of L tokens in the spans kernel's two parts (bwd_cf_fast.cu's spans_grid):
    at up to 4 spans of 1024 tokens per warp, and at up to 2 (the drain)."""
    wpr = -(-L // 1024)
    return -(-wpr // min(wpr, 4)), -(-wpr // min(wpr, 2))


def tail_rows(sms: int, rows: int, L: int) -> int:
    """Rows walked at 2 spans per warp (spans_grid): a wave of resident warps (20 per SM) at that
    grain, the grid's last rows; none when the rows have at most 2 spans."""
    head, tail = spans_warps_per_row(L)
    return 0 if head == tail else min(rows, -(-(sms * 20) // tail))


def drain_cases(sms: int) -> list[tuple]:
    """Grids with rows of both parts of the spans kernel (tail_rows), sized from this GPU's SM count:
    whole spans (L 4096: warps of 4 spans, then of 2) and a partial last span (L 9216: warps of
    4 + 4 + 1 spans, then of 2 + 2 + 2 + 2 + 1). D is a multiple of 8 (check_graph also runs the
    first case channel-last)."""
    out = []
    for dts, W, B, L in [("bf16", 4, 2, 4096), ("fp16", 3, 1, 9216)]:
        rows = tail_rows(sms, 1 << 30, L) + 37
        D = -(-rows // (8 * B)) * 8
        # (dtype, weight kind, width, B, D, L, strided, silu, bias)
        out.append((dts, "same", W, B, D, L, False, True, True))
    return out


def _inputs(n: int, dts: str, wk: str, W: int, B: int, D: int, L: int, strided: bool, bias: bool):
    import torch

    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dts]
    wd = dtype if wk == "same" else torch.float32
    g = torch.Generator(device="cuda").manual_seed(1000 + n)
    if strided:  # row pitch L + 8 (rows stay 16-byte aligned), batch pitch larger still
        x = torch.randn(B, D + 1, L + 8, device="cuda", dtype=dtype, generator=g)[:, :D, :L]
        dout = torch.randn(B, D + 2, L + 16, device="cuda", dtype=dtype, generator=g)[:, 1 : D + 1, 8 : L + 8]
    else:
        x = torch.randn(B, D, L, device="cuda", dtype=dtype, generator=g)
        dout = torch.randn(B, D, L, device="cuda", dtype=dtype, generator=g)
    w = (torch.randn(D, W, device="cuda", generator=g) / W**0.5).to(wd)
    b = torch.randn(D, device="cuda", generator=g).to(wd) if bias else None
    return x, dout, w, b


def _reference(x, dout, w, b, silu: bool):
    """float64 (dx, dweight, dbias) by autograd, the sums of absolute terms for the tolerances, and
    the error bound that the fp32 rounding of the pre-activation z carries into dx, dweight, dbias.

    Why the last one: near the root of silu'(z) (z = -1.278...) g = dout * silu'(z) is much smaller
    than the terms that cancel in it, and the kernels' z (an fp32 sum of width products) is off by up
    to ~width * 2^-24 * (|b| + sum |w x|): g is then off by |dout| * |silu''| * that (|silu''| <= 0.5),
    far more than a relative tolerance on the tiny g allows, in any fp32 implementation."""
    import torch
    import torch.nn.functional as F

    from causal_conv1d._reference import fwd_ref

    x64 = x.double().requires_grad_(True)
    w64 = w.double().requires_grad_(True)
    b64 = b.double().requires_grad_(True) if b is not None else None
    out, _ = fwd_ref(x64, w64, b64, silu=silu)
    out.backward(dout.double())
    with torch.no_grad():
        W = w.shape[1]
        L = x.shape[2]
        z, _ = fwd_ref(x.double(), w.double(), b.double() if b is not None else None, silu=False)
        gabs = dout.double().abs()
        if silu:
            s = torch.sigmoid(z)
            gabs = gabs * (s * (1 + z * (1 - s))).abs()
        xpad = F.pad(x.double().abs(), (W - 1, 0))
        wabs = w.double().abs()

        def spread(gs):  # (dx, dweight, dbias) sums of |terms| for per-position magnitudes gs of g
            gpad = F.pad(gs, (0, W - 1))
            dx_abs = sum(wabs[None, :, W - 1 - j, None] * gpad[:, :, j : j + L] for j in range(W))
            dw_abs = torch.stack([(gs * xpad[:, :, k : k + L]).sum(dim=(0, 2)) for k in range(W)], dim=1)
            return dx_abs, dw_abs, gs.sum(dim=(0, 2))

        if silu:
            zabs = sum(wabs[None, :, k, None] * xpad[:, :, k : k + L] for k in range(W))
            if b is not None:
                zabs = zabs + b.double().abs()[None, :, None]
            zerr = spread(dout.double().abs() * 0.5 * W * 2.0**-24 * zabs)
        else:
            zerr = (0.0, 0.0, 0.0)
    db = b64.grad if b is not None else None
    return (x64.grad, w64.grad, db), spread(gabs), zerr


def _bad(got, ref, absum, rtol: float, atol: float, zerr=0.0):
    """Positions where got is off: beyond its rounding (relative, plus half the smallest subnormal of
    its dtype: fp16 flushes |values| < 3e-8 to zero), the fp32 arithmetic (relative to the sum of
    absolute terms) and the z rounding bound (see _reference)."""
    import torch

    floor = 0.5 * torch.finfo(got.dtype).smallest_normal * torch.finfo(got.dtype).eps
    return ((got.double() - ref).abs() > rtol * ref.abs() + atol * absum + zerr + floor).nonzero()


def check_bwd(ops, x, dout, w, b, silu: bool, dts: str, wts: str, unit_axis: int, path: str) -> list[str]:
    """Run the backward twice (no states) and check it: the kernel path that ran, dx, dweight, dbias
    against the float64
    reference with the tolerances above, empty dbias / dinitial_states where they must be, dx in x's
    layout (unit stride on unit_axis), gradient dtypes, and bit-identical results across the two runs.
    Returns the failure messages (empty when all is right)."""
    import torch

    dx, dw, db, dinit = ops.bwd(x, w, b, dout, None, None, None, False, silu)
    msg = path_ran(ops, "bwd", path)
    again = ops.bwd(x, w, b, dout, None, None, None, False, silu)
    (rdx, rdw, rdb), (adx, adw, adb), (zdx, zdw, zdb) = _reference(x, dout, w, b, silu)
    checks = [
        ("dx", dx, rdx, adx, zdx, ROUND_TOL[dts], ABS_TOL_DX),
        ("dweight", dw, rdw, adw, zdw, ROUND_TOL[wts], ABS_TOL_DW),
    ]
    if b is not None:
        checks.append(("dbias", db, rdb, adb, zdb, ROUND_TOL[wts], ABS_TOL_DW))
    elif db.numel() != 0:
        msg.append(f"dbias should be empty without bias, got shape {tuple(db.shape)}")
    for name, got, ref, absum, zerr, rtol, atol in checks:
        bad = _bad(got, ref, absum, rtol, atol, zerr)
        if bad.numel():
            i = tuple(bad[0].tolist())
            msg.append(f"{bad.shape[0]} bad {name}, first at {i}: got {got[i].item()}, want {ref[i].item()}")
    if dinit.numel() != 0:
        msg.append(f"dinitial_states should be empty, got shape {tuple(dinit.shape)}")
    if dx.stride(unit_axis) != 1 or dw.dtype != w.dtype or (b is not None and db.dtype != b.dtype):
        msg.append(f"dx strides {dx.stride()}, dweight dtype {dw.dtype}, dbias dtype {db.dtype}")
    for name, first, second in zip(("dx", "dweight", "dbias"), (dx, dw, db), again[:3]):
        if not torch.equal(first, second):
            msg.append(f"{name} differs between two identical calls (not deterministic)")
    return msg


def run_cases(which: str = "small") -> int:
    """Run every case of cases() (which="small") or drain_cases() (which="drain") on the GPU; print
    failures; return the number failed."""
    import torch
    from gpu_ops import load_ops

    ops = load_ops()
    failed = 0
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    todo = cases() if which == "small" else drain_cases(sms)
    for n, (dts, wk, W, B, D, L, strided, silu, bias) in enumerate(todo):
        if which == "drain" and not 0 < tail_rows(sms, B * D, L) < B * D:
            failed += 1
            print(f"FAIL {dts} B={B} D={D} L={L}: {tail_rows(sms, B * D, L)} of {B * D} rows at the tail's grain")
        x, dout, w, b = _inputs(n, dts, wk, W, B, D, L, strided, bias)
        msg = check_bwd(ops, x, dout, w, b, silu, dts, "fp32" if wk == "fp32" else dts, unit_axis=2, path=PATH)
        if msg:
            failed += 1
            print(
                f"FAIL {dts} w={wk} W={W} B={B} D={D} L={L} strided={strided} silu={silu} bias={bias}: "
                + "; ".join(msg)
            )
    torch.cuda.synchronize()
    print(f"{len(todo) - failed}/{len(todo)} {which} cases passed")
    return failed


def check_graph() -> int:
    """The backward captured in a CUDA graph gives what the eager call gives, bit for bit: the
    channel-first spans kernel (both parts of the grid) and the channel-last kernel, each followed
    by the reduce kernel, which on sm_90+ is a programmatic dependent launch (launch_bwd_fast_reduce)
    that must wait for the whole backward grid inside the graph too. Returns the number failed."""
    import torch
    from gpu_ops import load_ops

    ops = load_ops()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    dts, _, W, B, D, L, *_ = drain_cases(sms)[0]
    failed = 0
    for layout, path in (("cf", PATH), ("cl", "bwd_cl_fast")):
        x, dout, w, b = _inputs(7, dts, "same", W, B, D, L, False, True)
        if layout == "cl":
            x, dout = x.transpose(1, 2).contiguous().transpose(1, 2), dout.transpose(1, 2).contiguous().transpose(1, 2)
        want = ops.bwd(x, w, b, dout, None, None, None, False, True)[:3]
        msg = path_ran(ops, "bwd", path)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            ops.bwd(x, w, b, dout, None, None, None, False, True)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            got = ops.bwd(x, w, b, dout, None, None, None, False, True)[:3]
        for _ in range(3):
            for t in got:
                t.fill_(float("nan"))
            g.replay()
            torch.cuda.synchronize()
            for name, a, e in zip(("dx", "dweight", "dbias"), got, want):
                if not torch.equal(a, e):
                    msg.append(f"{name} from the graph differs from the eager call")
        if msg:
            failed += 1
            print(f"FAIL graph {layout} B={B} D={D} L={L}: " + "; ".join(sorted(set(msg))))
    print(f"graph check: {2 - failed}/2 passed")
    return failed


def check_path() -> int:
    """The profiler's view: the fast kernel runs for an eligible case, the general one otherwise.

    The eligible case (bf16, L 2048: two warp spans) runs bwd_cf_fast_kernel_spans, which the
    substring FAST_KERNEL matches too; test_kernel_paths.py's case (bf16, L 512) runs
    bwd_cf_fast_kernel.

    Returns the number of failed checks; 0 (with a note) when the profiler records no kernels
    (no CUPTI), since the check cannot be made then.
    """
    import torch
    from gpu_ops import kernels_of, load_ops

    ops = load_ops()
    x = torch.randn(2, 64, 2048, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(64, 4, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(64, device="cuda", dtype=torch.bfloat16)
    dout = torch.randn_like(x)
    init = torch.randn(2, 64, 3, device="cuda", dtype=torch.bfloat16)

    def kernels(*args) -> list[str]:
        return kernels_of(ops.bwd, *args)

    eligible = kernels(x, w, b, dout, None, None, None, False, True)
    xs, ds = x[:, :, :512].contiguous(), dout[:, :, :512].contiguous()
    short = kernels(xs, w, b, ds, None, None, None, False, True)  # 512 tokens: 2 vectors per lane
    recorded = path_ran(ops, "bwd", PATH)
    ineligible = kernels(x, w, b, dout, None, init, None, True, True)  # initial_states: general kernel
    recorded += path_ran(ops, "bwd", "bwd_general")
    for m in recorded:
        print(f"FAIL {m}")
    if not eligible and not ineligible:
        print("note: the profiler recorded no CUDA kernels (no CUPTI?); path check skipped")
        return 0
    failed = 0
    if not any(FAST_KERNEL in k for k in eligible):
        print(f"FAIL eligible case did not run {FAST_KERNEL}: {eligible}")
        failed += 1
    if any(FAST_KERNEL in k for k in ineligible):
        print(f"FAIL ineligible case (initial_states) ran {FAST_KERNEL}: {ineligible}")
        failed += 1
    if not any(re.search(SHORT_KERNEL, k) for k in short):
        print(f"FAIL a 512-token bf16 row did not run the 2-vector kernel ({SHORT_KERNEL}): {short}")
        failed += 1
    print(f"path check: {3 - failed}/3 passed")
    return failed + len(recorded)


def test_bwd_cf_fast_path(ops):
    with kernel_path(ops, PATH, 1):
        failed = run_cases() + run_cases("drain") + check_path() + check_graph()
    assert failed == 0, f"{failed} fast-path cases failed (printed above)"
