"""The fast channel-last backward (csrc/cuda/bwd_cl_fast.cu; on unless CAUSAL_CONV1D_BWD_CL_FAST=0).

The cases run with the path forced on in process (``kernel_path``, whatever the environment says)
and each asserts that the fast path ran (``_last_kernel_path``). Every case in ``cases()`` is
eligible for the fast path (channel-last x / dout / dx, width 2..4, no states, for 16-bit x an even
dim and even token pitches); ``test_seq_idx_runs_the_fast_path`` adds seq_idx (the labelled walk). x is a (B, L, P) buffer viewed as (B, D, L) with token pitch
P >= D; dout is either a dense channel-last tensor or a view with its own pitch. The shapes cover:
D = 2 and 6 (one to three lanes of a warp), D not a multiple of the block's 64 (16-bit) or 32 (fp32)
channels, odd L, L shorter than one slice, several token blocks ending inside a slice, and large
shapes where the slices are long (T ~ 110 tokens: the unchecked interior steps of the walk run; on
small grids the launcher shortens the slices to fill the GPU). dx is checked element by element,
dweight and dbias per channel against a float64 autograd reference (tolerances and reference shared
with test_bwd_cf_fast.py); every case runs twice and must give bit-identical results.
``check_path()`` asserts (the recorded path and the profiler's kernel names) that the fast kernel
runs for an eligible case and the general one for ineligible cases, and that turning the path off
turns it off.

compute-sanitizer over the small cases:
    compute-sanitizer --tool memcheck --error-exitcode 1 python tests/gpu/gpu_ops.py test_bwd_cl_fast 1048576
"""

from __future__ import annotations

import pytest
from gpu_ops import fast_grid, kernel_path, kernels_of, path_ran

pytestmark = pytest.mark.gpu

PATH = "bwd_cl_fast"
FAST_KERNEL = "bwd_cl_fast_kernel"


def cases() -> list[tuple]:
    out = []
    # (dtype, weight kind, width, B, D, L, x token pitch, dout pitch (0: dense), silu, bias)
    small = [
        (2, 2, 37, 2),  # D = 2: one lane; odd L
        (1, 6, 5, 8),  # D = 6: three lanes (16-bit); L shorter than a slice and than the width's halo
        (2, 70, 129, 72),  # D not a multiple of 64 / 32 channels; odd L
        (3, 40, 1000, 48),  # several slices per block, pitch > D
        (2, 130, 2049, 136),  # several token blocks, the last slice ends inside the row's last block
        (1, 96, 4100, 96),  # dense x, L not a multiple of the block's tokens
    ]
    for dts, wk, W, (B, D, L, P) in fast_grid(small):
        i = len(out)
        dpitch = 0 if i % 3 else D + 8
        out.append((dts, wk, W, B, D, L, P, dpitch, i % 4 != 1, i % 5 != 2))
    # larger grids: the launcher keeps longer slices (on an H200: T = 32 and 63 for the first two, with
    # one and five interior groups of steps; T = 111 for the rest), the last slice of a row ends inside
    # the walk; the Mamba2 token pitch 2 * D + 256
    out += [
        ("fp16", "same", 3, 2, 2048, 3000, 2048 + 64, 0, True, True),
        ("fp32", "fp32", 4, 2, 2048, 3000, 2048, 2048 + 4, True, True),
        ("bf16", "same", 4, 1, 8192, 6200, 8192, 0, True, True),
        ("bf16", "fp32", 3, 1, 8192, 6200, 2 * 8192 + 256, 0, False, True),
        ("fp16", "same", 4, 1, 8192, 6200, 8192 + 64, 8192 + 16, True, False),
        ("fp32", "same", 4, 1, 4096, 6200, 4096, 0, True, True),
        ("fp32", "same", 2, 1, 4096, 6200, 2 * 4096 + 256, 4096 + 8, True, True),
    ]
    return out


def _inputs(n: int, dts: str, wk: str, W: int, B: int, D: int, L: int, P: int, dpitch: int, bias: bool):
    import torch

    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dts]
    wd = dtype if wk == "same" else torch.float32
    g = torch.Generator(device="cuda").manual_seed(2000 + n)
    x = torch.randn(B, L, P, device="cuda", dtype=dtype, generator=g)[:, :, :D].transpose(1, 2)
    if dpitch:
        dout = torch.randn(B, L, dpitch, device="cuda", dtype=dtype, generator=g)[:, :, 2 : D + 2].transpose(1, 2)
    else:
        dout = torch.randn(B, L, D, device="cuda", dtype=dtype, generator=g).transpose(1, 2)
    w = (torch.randn(D, W, device="cuda", generator=g) / W**0.5).to(wd)
    b = torch.randn(D, device="cuda", generator=g).to(wd) if bias else None
    return x, dout, w, b


def run_cases(max_elems: int = 0) -> int:
    """Run every case on the GPU (only those with B * D * L <= max_elems when it is positive: the
    small ones, for compute-sanitizer); print failures; return the number failed."""
    import torch
    from gpu_ops import load_ops
    from test_bwd_cf_fast import check_bwd

    ops = load_ops()
    failed = 0
    for n, (dts, wk, W, B, D, L, P, dpitch, silu, bias) in enumerate(cases()):
        if max_elems > 0 and B * D * L > max_elems:
            continue
        x, dout, w, b = _inputs(n, dts, wk, W, B, D, L, P, dpitch, bias)
        assert x.stride(1) == 1 and dout.stride(1) == 1 and x.stride(2) == P
        msg = check_bwd(ops, x, dout, w, b, silu, dts, "fp32" if wk == "fp32" else dts, unit_axis=1, path=PATH)
        if msg:
            failed += 1
            print(
                f"FAIL {dts} w={wk} W={W} B={B} D={D} L={L} pitch={P} dout_pitch={dpitch} silu={silu} "
                f"bias={bias}: " + "; ".join(msg)
            )
        del x, dout
    torch.cuda.synchronize()
    print(f"{len(cases()) - failed}/{len(cases())} cases passed")
    return failed


def check_path(on: bool) -> int:
    """Which kernel runs (the recorded path and the profiler's kernel names), with the path forced on
    (fast where eligible) or off (never).

    Returns the number of failed checks; 0 (with a note) when the profiler records no kernels
    (no CUPTI), since the check cannot be made then.
    """
    import torch
    from gpu_ops import load_ops

    ops = load_ops()

    def cl(*shape, dtype=torch.bfloat16):  # (B, D, L) channel-last
        B, D, L = shape
        return torch.randn(B, L, D, device="cuda", dtype=dtype).transpose(1, 2)

    x = cl(2, 64, 2048)
    w = torch.randn(64, 4, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(64, device="cuda", dtype=torch.bfloat16)
    dout = cl(2, 64, 2048)
    init = torch.randn(2, 3, 64, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    xo = cl(2, 63, 512)  # odd dim: 16-bit words would straddle two tokens
    wo = torch.randn(63, 4, device="cuda", dtype=torch.bfloat16)

    def kernels(*args) -> list[str]:
        return kernels_of(ops.bwd, *args)

    eligible = kernels(x, w, b, dout, None, None, None, False, True)
    recorded = path_ran(ops, "bwd", PATH if on else "bwd_general")
    with_states = kernels(x, w, b, dout, None, init, None, True, True)
    recorded += path_ran(ops, "bwd", "bwd_general")
    odd_dim = kernels(xo, wo, None, cl(2, 63, 512), None, None, None, False, True)
    recorded += path_ran(ops, "bwd", "bwd_general")
    for m in recorded:
        print(f"FAIL {m}")
    if not eligible and not with_states and not odd_dim:
        print("note: the profiler recorded no CUDA kernels (no CUPTI?); profiler check skipped")
        return len(recorded)
    failed = len(recorded)
    if on != any(FAST_KERNEL in k for k in eligible):
        print(f"FAIL {PATH} on={on}: eligible case ran {eligible}")
        failed += 1
    for name, ks in (("initial_states", with_states), ("odd dim", odd_dim)):
        if any(FAST_KERNEL in k for k in ks):
            print(f"FAIL ineligible case ({name}) ran {FAST_KERNEL}: {ks}")
            failed += 1
    print(f"path check ({PATH} on={on}): {failed} failed")
    return failed


def test_bwd_cl_fast_path(ops):
    with kernel_path(ops, PATH, 1):
        failed = run_cases() + check_path(on=True)
    assert failed == 0, f"{failed} fast-path cases failed (printed above)"


def test_bwd_cl_fast_off(ops):
    with kernel_path(ops, PATH, 0):
        failed = check_path(on=False)
    assert failed == 0, f"{failed} checks failed with {PATH} off (printed above)"


def _seq_idx(kind: str, B: int, L: int, gen):
    """(B, L) int32: "runs" sequences of 1-40 tokens; "padding" runs with negative stretches (no
    sequence); "repeat" labels that come back after another one (upstream's rule is label equality)."""
    import torch

    rows = []
    for _ in range(B):
        lens = []
        while sum(lens) < L:
            lens.append(int(torch.randint(1, 41, (), generator=gen)))
        lab = torch.repeat_interleave(torch.arange(len(lens), dtype=torch.int32), torch.tensor(lens))[:L]
        if kind == "padding":
            lab = torch.where(lab % 4 == 3, torch.full_like(lab, -1), lab)
        elif kind == "repeat":
            lab = lab % 2
        rows.append(lab)
    return torch.stack(rows).cuda()


@pytest.mark.parametrize("kind", ["runs", "padding", "repeat"])
@pytest.mark.parametrize(
    "dts, W, B, D, L, P",
    [
        ("bf16", 4, 2, 192, 3001, 192),
        ("fp16", 3, 1, 70, 777, 80),
        ("fp32", 2, 2, 33, 1500, 40),
        ("bf16", 4, 1, 4096, 6000, 2 * 4096 + 256),
    ],
)
def test_seq_idx_runs_the_fast_path(ops, kind, dts, W, B, D, L, P):
    """seq_idx on the fast path: dx, dweight, dbias against the float64 reference (and the general
    path, switched off in process), the same bits on a second call."""
    import torch

    from causal_conv1d._reference import fwd_ref, rel_err

    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dts]
    gen = torch.Generator().manual_seed(W * 100 + D)
    x = torch.randn(B, L, P, device="cuda", dtype=dtype)[:, :, :D].transpose(1, 2)
    dout = torch.randn(B, L, D, device="cuda", dtype=dtype).transpose(1, 2)
    w = torch.randn(D, W, device="cuda", dtype=dtype) / W**0.5
    b = torch.randn(D, device="cuda", dtype=dtype)
    seq = _seq_idx(kind, B, L, gen)
    with kernel_path(ops, PATH, 1):
        got = ops.bwd(x, w, b, dout, seq, None, None, False, True)
        assert ops._last_kernel_path("bwd") == PATH
        again = ops.bwd(x, w, b, dout, seq, None, None, False, True)
    with kernel_path(ops, PATH, 0):
        general = ops.bwd(x, w, b, dout, seq, None, None, False, True)
        assert ops._last_kernel_path("bwd") == "bwd_general"
    xr, wr, br = (t.detach().double().requires_grad_() for t in (x, w, b))
    out, _ = fwd_ref(xr, wr, br, seq, None, silu=True)
    (out * dout.double()).sum().backward()
    tol = {torch.float32: 1e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}[dtype]
    for name, a, g_, r in zip(("dx", "dweight", "dbias"), got[:3], general[:3], (xr.grad, wr.grad, br.grad)):
        assert rel_err(a, r) < tol, f"{name}: {rel_err(a, r)}"
        assert rel_err(a, g_) < tol, f"{name} against the general path: {rel_err(a, g_)}"
    for a, c in zip(got, again):
        assert torch.equal(a, c)
