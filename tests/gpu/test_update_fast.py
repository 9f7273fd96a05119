"""The fast decode update (csrc/cuda/update_fast.cu; on unless CAUSAL_CONV1D_UPDATE_FAST=0).

The cases run twice in process, with the fast path forced on and off (``kernel_path``: the general
kernel), and each asserts which path ran (``_last_kernel_path``, against ``expect_fast``). Every case must match the
float64 reference (states bit for bit), and the two runs must agree bit for bit (outputs and
states): the fast path accumulates in the general kernel's order. The cases mix eligible ones
(seqlen 1, width 2..4, state_len width - 1 or width, (B, D, S) or (B, S, D) states, indexed rows,
padding slots, fp32 weights with 16-bit x, no bias) with ones that must fall back (state_len width + 1,
dim not a multiple of the 16-byte vector, a state 2 bytes off alignment, strided channels, seqlen 2).
The fast path has two kernels, chosen by grid size (16-bit x, width 4, state_len 3: the loads-first
one on grids of fewer 128-thread blocks than SMs); the cases cover both, and the last test checks
by the profiler's kernel names which one ran.
"""

from __future__ import annotations

import itertools

import pytest
from gpu_ops import kernel_path, kernels_of, path_ran

pytestmark = pytest.mark.gpu

PATH = "update_fast"


def cases() -> list[tuple]:
    out = []
    # (dtype, weight kind, W, S - W, state layout, B, D, indexed, bias, silu, variant)
    for dts, W, ds, lay in itertools.product(["fp32", "fp16", "bf16"], [2, 3, 4], [-1, 0, 1], ["bds", "bsd"]):
        i = len(out)
        B, D = [(1, 8), (3, 96), (2, 4104), (5, 1032)][i % 4]
        wk = "fp32" if i % 3 == 0 else "same"
        out.append((dts, wk, W, ds, lay, B, D, i % 2 == 0, i % 5 != 1, i % 4 != 2, "plain"))
    # 16-bit x at width 4, state_len 3: two kernels by grid size (update_fast.cu, lf_threads). Fewer
    # 128-thread blocks than SMs: the loads-first kernel with 8-thread blocks (B1 D5384, B1 D10248,
    # B2 D4104, B3 D1032) or 32-thread ones (B16 D5384), all with a partial last block, indexed rows
    # with padding slots (-1 and past the cache at B > 2), no bias, silu off. fp32 weights and S4 keep
    # it off (update_fast_kernel). B192 D2048 and B160 D1032 (a partial 128-thread block): grids of at
    # least 320 blocks, update_fast_kernel on any GPU. The cases above (B <= 5) are small too.
    out += [
        ("bf16", "same", 4, -1, "bds", 1, 5384, False, True, True, "plain"),
        ("bf16", "same", 4, -1, "bsd", 1, 10248, False, True, True, "plain"),
        ("fp16", "same", 4, -1, "bds", 2, 4104, True, False, True, "plain"),
        ("bf16", "same", 4, -1, "bds", 3, 1032, True, True, False, "plain"),
        ("fp16", "same", 4, -1, "bsd", 16, 5384, True, True, True, "plain"),
        ("bf16", "same", 4, -1, "bsd", 16, 5384, True, False, False, "plain"),
        ("bf16", "fp32", 4, -1, "bds", 1, 5384, False, True, True, "plain"),
        ("bf16", "same", 4, 0, "bds", 1, 5384, False, True, True, "plain"),
        ("bf16", "same", 4, -1, "bds", 192, 2048, False, True, True, "plain"),
        ("fp16", "same", 4, -1, "bsd", 160, 1032, True, False, False, "plain"),
    ]
    for dts, variant in itertools.product(["fp32", "bf16"], ["odd_dim", "misaligned", "strided_x", "seqlen2", "x2d"]):
        out.append((dts, "same", 4, -1, "bds", 3, 36 if variant == "odd_dim" else 64, False, True, True, variant))
    return out


def expect_fast(case: tuple) -> bool:
    """Whether the fast path must take the case (update_fast.cu's eligibility, for these cases): state_len
    width - 1 or width, dim a multiple of the 16-byte vector, aligned, unit channel stride, one token."""
    dts, _, _, ds, _, _, D, _, _, _, variant = case
    per_vector = 4 if dts == "fp32" else 8
    return ds != 1 and D % per_vector == 0 and variant not in ("misaligned", "strided_x", "seqlen2")


def expected_kernel(case: tuple, num_sms: int) -> str:
    """The fast-path kernel update_fast.cu's launcher picks for an eligible case (lf_threads, lf_ok):
    the loads-first one for 16-bit x, width 4, state_len 3, weights of x's dtype, and fewer 128-thread
    blocks than SMs; update_fast_kernel otherwise."""
    dts, wk, W, ds, _, B, D, _, _, _, _ = case
    blocks = -(-(D // 8) // 128) * B
    lf = dts in ("fp16", "bf16") and wk == "same" and W == 4 and ds == -1 and blocks < num_sms
    return "::update_fast_lf_kernel<" if lf else "::update_fast_kernel<"


def run_cases(fast: bool) -> tuple[int, list]:
    """Run every case with the fast path on or off; print failures; return (failed, outputs and states)."""
    import torch
    from gpu_ops import load_ops

    from causal_conv1d._reference import rel_tol, update_ref

    ops = load_ops()
    dts_map = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
    failed = 0
    saved = []
    for n, (dts, wk, W, ds, lay, B, D, indexed, bias, silu, variant) in enumerate(cases()):
        dtype = dts_map[dts]
        wd = dtype if wk == "same" else torch.float32
        S = W + ds
        g = torch.Generator(device="cuda").manual_seed(n)
        cache = 2 * B + 1 if indexed else B
        if lay == "bds":
            state = torch.randn(cache, D, S, device="cuda", dtype=dtype, generator=g)
        else:
            state = torch.randn(cache, S, D, device="cuda", dtype=dtype, generator=g).transpose(1, 2)
        if variant == "misaligned":  # storage offset of one element: not 16-byte aligned
            buf = torch.randn(cache * D * S + 1, device="cuda", dtype=dtype, generator=g)
            state = buf[1:].view(cache, D, S)
        L = 2 if variant == "seqlen2" else 1
        if variant == "strided_x":
            x = torch.randn(B, 2 * D, L, device="cuda", dtype=dtype, generator=g)[:, ::2]
        else:
            x = torch.randn(B, D, L, device="cuda", dtype=dtype, generator=g)
        w = (torch.randn(D, W, device="cuda", generator=g) / W**0.5).to(wd)
        b = torch.randn(D, device="cuda", generator=g).to(wd) if bias else None
        idx = None
        if indexed:
            idx = torch.randperm(cache, device="cuda", generator=g)[:B].to(torch.int32)
            idx[0] = -1  # padding slot
            if B > 2:
                idx[2] = cache  # past the cache: also a padding slot
        ref_state = state.clone()
        ref = update_ref(x, ref_state, w, b, silu, None, idx)
        if variant == "x2d":  # the public API with (batch, dim) x, as decoders call it
            from causal_conv1d import causal_conv1d_update

            act = "silu" if silu else None
            out = causal_conv1d_update(x[:, :, 0], state, w, b, act, conv_state_indices=idx).unsqueeze(-1)
        else:
            out = ops.update(x, state, w, b, silu, None, idx)
        msg = path_ran(ops, "update", PATH if fast and expect_fast(cases()[n]) else "update_general")
        if not torch.equal(state, ref_state):
            msg.append("conv_state not updated bit-exactly")
        tol = rel_tol(dtype, wd)
        bad = ((out.double() - ref).abs() > tol * (1.0 + ref.abs())).nonzero()
        if bad.numel():
            i = tuple(bad[0].tolist())
            msg.append(f"{bad.shape[0]} bad outputs, first at {i}: got {out[i].item()}, want {ref[i].item()}")
        if indexed and torch.count_nonzero(out[0]) != 0:
            msg.append("a padding slot must give a zero output")
        if msg:
            failed += 1
            print(
                f"FAIL case {n} {dts} w={wk} W={W} S={S} {lay} B={B} D={D} indexed={indexed} {variant}: "
                + "; ".join(msg)
            )
        saved.append((out.cpu(), state.cpu()))
    torch.cuda.synchronize()
    print(f"fast={fast}: {len(cases()) - failed}/{len(cases())} cases passed")
    return failed, saved


def test_update_fast_path_matches_reference_and_general_kernel(ops):
    import torch

    results = {}
    for fast in (True, False):
        with kernel_path(ops, PATH, int(fast)):
            failed, results[fast] = run_cases(fast)
        assert failed == 0, f"fast={fast}: {failed} cases failed (printed above)"
    assert sum(map(expect_fast, cases())) >= len(cases()) // 2, "most cases must be eligible for the fast path"
    for n, ((o1, s1), (o0, s0)) in enumerate(zip(results[True], results[False])):
        assert torch.equal(s1, s0), f"case {n} {cases()[n]}: states differ between the fast and the general kernel"
        assert torch.equal(o1, o0), f"case {n} {cases()[n]}: outputs differ between the fast and the general kernel"


def test_update_fast_picks_its_kernel_by_grid_size(ops):
    """Both fast-path kernels are exercised: the profiler's kernel names for every eligible plain case
    (skipped without CUPTI; the recorded path is asserted above)."""
    import torch

    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    dts_map = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
    picked = []
    with kernel_path(ops, PATH, 1):
        for case in cases():
            dts, wk, W, ds, lay, B, D, _, bias, silu, variant = case
            if variant != "plain" or not expect_fast(case):
                continue
            dtype = dts_map[dts]
            wd = dtype if wk == "same" else torch.float32
            S = W + ds
            x = torch.randn(B, D, 1, device="cuda", dtype=dtype)
            state = torch.randn(B, D, S, device="cuda", dtype=dtype)
            if lay == "bsd":
                state = torch.randn(B, S, D, device="cuda", dtype=dtype).transpose(1, 2)
            w = torch.randn(D, W, device="cuda").to(wd)
            b = torch.randn(D, device="cuda").to(wd) if bias else None
            names = kernels_of(ops.update, x, state, w, b, silu, None, None)
            if not names:
                pytest.skip("the profiler recorded no CUDA kernels (no CUPTI)")
            want = expected_kernel(case, sms)
            assert any(want in k for k in names), f"{case}: want {want}, ran {names}"
            picked.append(want)
    assert "::update_fast_lf_kernel<" in picked, "no case ran the loads-first kernel"
    assert "::update_fast_kernel<" in picked, "no case ran update_fast_kernel"
