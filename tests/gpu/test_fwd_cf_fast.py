"""The fast channel-first forward (csrc/cuda/fwd_cf_fast.cu; on unless CAUSAL_CONV1D_FWD_FAST=0).

The cases run with the path forced on in process (``kernel_path``, whatever the environment says)
and each asserts that the fast path ran (``_last_kernel_path``): every case here is eligible for the
fast path (channel-first, 16-byte aligned rows, seqlen a multiple of 16 bytes, width 2..4, no
seq_idx). Rows are short (one vector), fill whole warps (L = 2048) or span several warps, the last
one partly past the row (4104, 6152, 10248); outputs are checked element by element (a wrong halo at
a lane, vector or warp boundary shows as a few bad tokens), final_states bit for bit.

``check_path()`` also asserts through the profiler's kernel names that the fast kernel ran.
"""

from __future__ import annotations

import pytest
from gpu_ops import SHORT_ROWS, fast_cases, kernel_path, path_ran

pytestmark = pytest.mark.gpu

PATH = "fwd_cf_fast"


def cases() -> list[tuple]:
    """(dtype, weight kind, width, B, D, L, strided, states, silu, bias)."""
    shapes = [*SHORT_ROWS, (1, 3, 4104), (2, 130, 520), (2, 5, 2048), (4, 96, 4104), (1, 3, 6152), (2, 4, 10248)]
    return fast_cases(shapes, lambda i: (i % 3 == 0, i % 2 == 0, i % 4 != 1, i % 5 != 2))


def _grid(dts: str, L: int, sms: int) -> tuple[int, int]:
    """fwd_cf_fast.cu's warps per row and resident warps on a GPU of `sms` SMs."""
    per = 4 if dts == "fp32" else 8
    vecs = 8 if dts != "fp32" and L >= 2048 else 4
    return -(-L // (32 * vecs * per)), sms * (8 if vecs == 8 else 10) * 4


def prefetch_rows(dts: str, B: int, D: int, L: int, batch_strided: bool, sms: int) -> int:
    """The L2 prefetch distance in rows that fwd_cf_fast.cu's launch_v picks (0: no prefetch): rows of
    3/8 of the resident warps, when x's rows are at one stride and the grid is at least 4 waves."""
    wpr, resident = _grid(dts, L, sms)
    if (batch_strided and B > 1) or wpr * B * D < 4 * resident:
        return 0
    return -(-(resident * 3 // 8) // wpr)


def tail_rows(dts: str, B: int, D: int, L: int, sms: int) -> int:
    """Rows done by the tail's warps (fwd_cf_fast.cu's grid_for): for the 8-vector kernels (16-bit
    rows of at least 2048 tokens), half a wave of resident warps at 4 vectors per lane, the grid's
    last rows; none for the 4-vector kernels."""
    if dts == "fp32" or L < 2048:
        return 0
    _, resident = _grid(dts, L, sms)
    wpr_tail = -(-L // (32 * 4 * 8))
    return min(B * D, -(-(resident * 4 // 8) // wpr_tail))


def prefetch_cases(sms: int) -> list[tuple]:
    """Grids of at least 4 waves on this GPU (D from its SM count), where each warp prefetches the
    span of the warp pf_rows rows ahead: 16-bit rows of whole and partial warp spans, fp32, and a
    batch-strided x (no prefetch: its rows are not at one stride). The rows near the end of x have
    no row pf_rows ahead (nothing prefetched) and are checked like every other row. The 16-bit
    grids hold warps of both grains (tail_rows): 8 vectors per lane, then 4 over the last rows."""
    out = []
    for dts, W, B, L, strided in [
        ("bf16", 4, 2, 4096, False),
        ("fp16", 3, 1, 4104, False),
        ("fp32", 4, 2, 1024, False),
        ("bf16", 2, 2, 2056, True),
    ]:
        wpr, resident = _grid(dts, L, sms)
        D = -(-4 * resident // (B * wpr)) + 3
        # (dtype, weight kind, width, B, D, L, strided, states, silu, bias)
        out.append((dts, "same", W, B, D, L, strided, False, True, True))
    return out


def bad_outputs(out, ref, dtype, wd) -> list[str]:
    """[] when out matches the float64 reference within the tolerance of x's and weight's dtypes, else
    a message with the count and the first bad position."""
    from causal_conv1d._reference import rel_tol

    bad = ((out.double() - ref).abs() > rel_tol(dtype, wd) * (1.0 + ref.abs())).nonzero()
    if not bad.numel():
        return []
    i = tuple(bad[0].tolist())
    return [f"{bad.shape[0]} bad outputs, first at {i}: got {out[i].item()}, want {ref[i].item()}"]


def run_cases(which: str = "small") -> int:
    """Run every case of cases() (which="small") or prefetch_cases() (which="prefetch") on the GPU
    (the path forced on); print failures; return the number failed."""
    import torch
    from gpu_ops import load_ops

    from causal_conv1d._reference import fwd_ref

    ops = load_ops()
    dts_map = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
    failed = 0
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    todo = cases() if which == "small" else prefetch_cases(sms)
    for n, (dts, wk, W, B, D, L, strided, states, silu, bias) in enumerate(todo):
        if which == "prefetch":
            want_pf = not strided
            got_pf = prefetch_rows(dts, B, D, L, strided, sms) > 0
            if got_pf != want_pf:
                failed += 1
                print(f"FAIL {dts} B={B} D={D} L={L}: prefetch {got_pf}, the case is meant to run with it {want_pf}")
            tr = tail_rows(dts, B, D, L, sms)
            if dts != "fp32" and not 0 < tr < B * D:
                failed += 1
                print(f"FAIL {dts} B={B} D={D} L={L}: {tr} of {B * D} rows at the tail's grain, meant to be some")
        dtype = dts_map[dts]
        wd = dtype if wk == "same" else torch.float32
        g = torch.Generator(device="cuda").manual_seed(n)
        if strided:  # row pitch L + 8 (still 16-byte aligned rows), batch pitch larger still
            x = torch.randn(B, D + 1, L + 8, device="cuda", dtype=dtype, generator=g)[:, :D, :L]
        else:
            x = torch.randn(B, D, L, device="cuda", dtype=dtype, generator=g)
        w = (torch.randn(D, W, device="cuda", generator=g) / W**0.5).to(wd)
        b = torch.randn(D, device="cuda", generator=g).to(wd) if bias else None
        init = torch.randn(B, D, W - 1, device="cuda", dtype=dtype, generator=g) if states else None
        out, fin = ops.fwd(x, w, b, None, init, states, silu)
        msg = path_ran(ops, "fwd", PATH)
        ref, ref_fin = fwd_ref(x, w, b, initial_states=init, silu=silu)
        msg += bad_outputs(out, ref, dtype, wd)
        if states and not torch.equal(fin, ref_fin.to(dtype)):
            msg.append("final_states differ from the last width-1 inputs")
        if not states and fin.numel() != 0:
            msg.append(f"final_states should be empty, got shape {tuple(fin.shape)}")
        if out.stride(2) != 1:
            msg.append(f"out strides {out.stride()}")
        if msg:
            failed += 1
            print(
                f"FAIL {dts} w={wk} W={W} B={B} D={D} L={L} strided={strided} states={states} "
                f"silu={silu} bias={bias}: " + "; ".join(msg)
            )
    torch.cuda.synchronize()
    print(f"{len(todo) - failed}/{len(todo)} {which} cases passed")
    return failed


def check_path() -> int:
    """An eligible case (a 16-bit row of 4096 tokens) runs fwd_cf_fast_kernel (the profiler's view).
    0 (with a note) when the profiler records no kernels (no CUPTI)."""
    import torch
    from gpu_ops import kernels_of, load_ops

    ops = load_ops()
    x = torch.randn(2, 8, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(8, 4, device="cuda", dtype=torch.bfloat16)
    names = kernels_of(ops.fwd, x, w, None, None, None, False, True)
    if not names:
        print("note: the profiler recorded no CUDA kernels (no CUPTI?); path check skipped")
        return 0
    want = "fwd_cf_fast_kernel"
    if not any(want in k for k in names):
        print(f"FAIL expected {want}: {names}")
        return 1
    print(f"path check: {want} ran")
    return 0


def test_fwd_cf_fast_path(ops):
    with kernel_path(ops, PATH, 1):
        failed = run_cases() + run_cases("prefetch") + check_path()
    assert failed == 0, f"{failed} fast-path cases failed (printed above)"


def test_fwd_cf_fast_offsets_boundary(ops):
    """fwd_cf_fast.cu addresses x by 32-bit vector offsets, so eligible() admits x only when its last
    row ends within 2^32 16-byte vectors of x's base. A bf16 x whose second batch row sits just
    inside that bound runs the fast path (offsets past 2^31: unsigned arithmetic); 8 elements further
    it runs the general path. Both must give the reference result. Needs a 64 GiB allocation."""
    import torch

    from causal_conv1d._reference import fwd_ref

    total = torch.cuda.get_device_properties(0).total_memory
    if total < 80 << 30:
        pytest.skip(f"needs a 64 GiB allocation; this GPU has {total >> 30} GiB")
    B, D, L, W = 2, 4, 2048, 4
    limit = 1 << 35  # elements: 2^32 vectors of 8 bf16
    big = torch.empty(limit + 64, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(D, W, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(D, device="cuda", dtype=torch.bfloat16)
    g = torch.Generator(device="cuda").manual_seed(7)
    failed = []
    try:
        for end, want in ((limit - 8, PATH), (limit, "fwd_general")):
            bs = end - D * L  # the last row of x ends at element `end` of big
            x = big.as_strided((B, D, L), (bs, L, 1))
            x.copy_(torch.randn(B, D, L, device="cuda", dtype=torch.bfloat16, generator=g))
            with kernel_path(ops, PATH, 1):
                out, _ = ops.fwd(x, w, b, None, None, False, True)
            msg = path_ran(ops, "fwd", want)
            ref, _ = fwd_ref(x, w, b, silu=True)
            msg += bad_outputs(out, ref, x.dtype, w.dtype)
            if msg:
                failed.append(f"x ending at element {end}: " + "; ".join(msg))
    finally:
        del big
        torch.cuda.empty_cache()
    assert not failed, failed
