"""The packed-sequence ops on CUDA (packed_fwd on the varlen_fwd kernels, packed_bwd on
csrc/cuda/packed_bwd.cu, or channel-last without states on bwd_cl_fast.cu): forward and backward against the per-sequence float64 reference on the
training shapes, the kernel path each call runs, CUDA-graph capture, no host synchronisation,
bit-identical reruns, and memory-safe handling of lengths the kernels cannot check.
(tests/causal_conv1d/test_packed.py runs the API-level cases on CUDA as well.)"""

from __future__ import annotations

import pytest
import torch
from gpu_ops import kernel_path, kernels_of

from causal_conv1d import causal_conv1d_fn
from causal_conv1d._reference import REL_TOL, packed_fwd_ref, rel_err

pytestmark = pytest.mark.gpu

DEV = "cuda"
GRAD_TOL = {torch.float32: 1e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}


def cu_of(lens: list[int]) -> torch.Tensor:
    return torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device=DEV)


def make_x(dim: int, total: int, layout: str, dtype: torch.dtype) -> torch.Tensor:
    """(1, dim, total): "cf" contiguous; "cl" the view of a (1, total, dim) tensor; "cl_pitch" a
    column slice of a wider (1, total, 3 * dim + 8) tensor (mamba_split_conv1d_scan_combined's xBC);
    "cf_odd" a channel-first view one element off 16-byte alignment."""
    if layout == "cf":
        return torch.randn(1, dim, total, device=DEV, dtype=dtype)
    if layout == "cl":
        return torch.randn(1, total, dim, device=DEV, dtype=dtype).transpose(1, 2)
    if layout == "cl_pitch":
        return torch.randn(1, total, 3 * dim + 8, device=DEV, dtype=dtype)[:, :, dim : 2 * dim].transpose(1, 2)
    if layout == "cf_odd":
        return torch.randn(1, dim, total + 1, device=DEV, dtype=dtype)[:, :, 1:]
    raise ValueError(layout)


def lens_for(case: str, total: int, gen: torch.Generator) -> list[int]:
    if case == "seven":  # the packed row: 7 sequences
        cuts = sorted(torch.randint(1, total, (6,), generator=gen).tolist())
        return [b - a for a, b in zip([0, *cuts], [*cuts, total])]
    if case == "mamba":  # 3-16 sequences per row
        n = int(torch.randint(3, 17, (), generator=gen))
        cuts = sorted(torch.randint(0, total + 1, (n - 1,), generator=gen).tolist())
        return [b - a for a, b in zip([0, *cuts], [*cuts, total])]
    if case == "short":  # many sequences below the 16-token chunk, some empty
        lens, left = [], total
        while left > 0:
            n = min(left, int(torch.randint(0, 12, (), generator=gen)))
            lens.append(n)
            left -= n
        return [0, *lens, 0]
    raise ValueError(case)


def fwd_bwd(x, w, b, cu, init, dout, dfinal, ours: bool, silu: bool = True):
    # the reference's leaves are float64: with 16-bit leaves, autograd would round each sequence's
    # share of dweight / dbias to 16 bits and sum the shares in 16 bits (hundreds of them in the
    # short-sequence case: an error above the tolerance that is the reference's, not the kernel's)
    cast = (lambda t: t.detach().clone()) if ours else (lambda t: t.detach().double())
    leaves = [cast(t).requires_grad_() if t is not None else None for t in (x, w, b, init)]
    xl, wl, bl, il = leaves
    if ours:
        res = causal_conv1d_fn(
            xl,
            wl,
            bl,
            initial_states=il,
            return_final_states=dfinal is not None,
            activation="silu" if silu else None,
            cu_seqlens=cu,
        )
        out, final = res if dfinal is not None else (res, None)
    else:
        out, final = packed_fwd_ref(xl, wl, bl, cu, il, silu=silu)
    loss = (out.double() * dout.double()).sum()
    if dfinal is not None:  # gradients flowing back from the final states
        loss = loss + (final.double() * dfinal.double()).sum()
    loss.backward()
    return out.detach(), None if final is None else final.detach(), [t.grad if t is not None else None for t in leaves]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout", ["cf", "cl", "cl_pitch", "cf_odd"])
@pytest.mark.parametrize("case", ["seven", "mamba", "short"])
@pytest.mark.parametrize("width", [2, 3, 4, 5, 8])
@pytest.mark.parametrize("states", [True, False], ids=["states", "no_states"])
def test_forward_backward_against_reference(dtype, layout, case, width, states):
    """With states: initial states in and final-state gradients back (the token-by-token boundary
    walk); without: the register path of the boundary chunks."""
    gen = torch.Generator().manual_seed(width * 7 + len(case))
    dim, total = 96, 3000 + width  # a token count that is no multiple of 16
    lens = lens_for(case, total, gen)
    cu = cu_of(lens)
    n = len(lens)
    x = make_x(dim, total, layout, dtype)
    w = torch.randn(dim, width, device=DEV, dtype=dtype)
    b = torch.randn(dim, device=DEV, dtype=dtype)
    init = torch.randn(n, dim, width - 1, device=DEV, dtype=dtype) if states else None
    dout = torch.randn(1, dim, total, device=DEV, dtype=dtype)
    dfinal = torch.randn(n, dim, width - 1, device=DEV, dtype=dtype) if states else None
    out, final, g = fwd_bwd(x, w, b, cu, init, dout, dfinal, ours=True)
    ref, ref_final, rg = fwd_bwd(x, w, b, cu, init, dout, dfinal, ours=False)
    assert rel_err(out, ref) < REL_TOL[dtype]
    if states:
        assert torch.equal(final.double(), ref_final)
    for name, a, r in zip(("dx", "dweight", "dbias", "dinitial_states"), g, rg):
        if r is None:
            assert a is None, name
            continue
        assert rel_err(a, r) < GRAD_TOL[dtype], f"{name}: {rel_err(a, r)}"


@pytest.mark.parametrize("layout", ["cf", "cl"])
def test_no_states_no_bias_identity(layout):
    dim, width, lens = 64, 4, [700, 0, 1, 300, 15, 16, 17]
    cu, total = cu_of(lens), sum(lens)
    x = make_x(dim, total, layout, torch.bfloat16)
    w = torch.randn(dim, width, device=DEV, dtype=torch.bfloat16)
    out = causal_conv1d_fn(x, w, cu_seqlens=cu)
    ref, _ = packed_fwd_ref(x, w, None, cu)
    assert rel_err(out, ref) < REL_TOL[torch.bfloat16]
    dout = torch.randn_like(x)
    dx, dw, db, di = torch.ops.causal_conv1d.packed_bwd(x, w, None, dout, cu, None, None, False, False)
    xr, wr = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    r, _ = packed_fwd_ref(xr, wr, None, cu)
    (r * dout.double()).sum().backward()
    assert rel_err(dx, xr.grad) < GRAD_TOL[torch.bfloat16] and rel_err(dw, wr.grad) < GRAD_TOL[torch.bfloat16]
    assert db.numel() == 0 and di.numel() == 0


def test_matches_the_cpu_kernels():
    dim, width, lens = 40, 4, [100, 3, 0, 250, 9]
    cu, total, n = cu_of(lens), sum(lens), len(lens)
    x = make_x(dim, total, "cl", torch.float32)
    w, b = torch.randn(dim, width, device=DEV), torch.randn(dim, device=DEV)
    init, dfin = torch.randn(n, dim, width - 1, device=DEV), torch.randn(n, dim, width - 1, device=DEV)
    dout = torch.randn_like(x)
    ops = torch.ops.causal_conv1d
    gpu = (*ops.packed_fwd(x, w, b, cu, init, True, True), *ops.packed_bwd(x, w, b, dout, cu, init, dfin, True, True))
    cpu_args = [t.cpu() for t in (x, w, b, cu, init)]
    cpu = (
        *ops.packed_fwd(*cpu_args, True, True),
        *ops.packed_bwd(x.cpu(), w.cpu(), b.cpu(), dout.cpu(), cu.cpu(), init.cpu(), dfin.cpu(), True, True),
    )
    for a, c in zip(gpu, cpu):
        torch.testing.assert_close(a.cpu(), c, rtol=2e-5, atol=2e-5)


# --- which kernel path runs ------------------------------------------------------------------


@pytest.mark.parametrize(
    "layout, width, dtype, expect",
    [
        ("cl", 4, torch.bfloat16, "varlen_cl_fast"),
        ("cl_pitch", 4, torch.bfloat16, "varlen_cl_fast"),
        ("cf", 4, torch.bfloat16, "varlen_cf_fast"),
        ("cf", 4, torch.float32, "varlen_cf_fast"),
        ("cl", 5, torch.bfloat16, "varlen_general"),  # the fast paths take widths up to 4
    ],
)
def test_forward_runs_on_the_varlen_paths(ops, layout, width, dtype, expect):
    dim, lens = 128, [500, 0, 37, 1000]
    cu = cu_of(lens)
    x = make_x(dim, sum(lens), layout, dtype)
    w = torch.randn(dim, width, device=DEV, dtype=dtype)
    init = torch.randn(len(lens), dim, width - 1, device=DEV, dtype=dtype)
    out, _ = ops.packed_fwd(x, w, None, cu, init, True, True)
    assert ops._last_kernel_path("varlen_fwd") == expect
    if expect != "varlen_general":  # switched off: the general varlen kernel, the same result
        with kernel_path(ops, expect, 0):
            out_g, _ = ops.packed_fwd(x, w, None, cu, init, True, True)
            assert ops._last_kernel_path("varlen_fwd") == "varlen_general"
        assert rel_err(out_g, out) < REL_TOL[dtype]


def test_backward_runs_packed_bwd_general_in_one_kernel(ops):
    dim, width, lens = 128, 4, [500, 0, 37, 1000]
    cu = cu_of(lens)
    x = make_x(dim, sum(lens), "cl", torch.bfloat16)
    w = torch.randn(dim, width, device=DEV, dtype=torch.bfloat16)
    init = torch.randn(len(lens), dim, width - 1, device=DEV, dtype=torch.bfloat16)
    dout, dfin = torch.randn_like(x), torch.randn_like(init)
    kernels = kernels_of(lambda: ops.packed_bwd(x, w, None, dout, cu, init, dfin, True, True))
    assert ops._last_kernel_path("packed_bwd") == "packed_bwd_general"
    if not kernels:
        pytest.skip("the profiler recorded no CUDA kernels (no CUPTI): the recorded path was checked")
    assert len(kernels) == 1 and "packed_bwd_kernel<" in kernels[0], kernels


@pytest.mark.parametrize("layout", ["cl", "cl_pitch"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_backward_without_states_runs_the_channel_last_fast_path(ops, layout, dtype):
    """Channel-last without states: packed_bwd_cl_fast (the channel-last fast backward's kernel with
    cu_seqlens labels, and its weight-gradient reduce); switched off, packed_bwd_general gives the
    same gradients (dweight / dbias summed in another order)."""
    gen = torch.Generator().manual_seed(5)
    dim, width, total = 256, 4, 5000
    lens = lens_for("short", 600, gen) + [3000] + lens_for("mamba", 1400, gen)
    cu = cu_of(lens)
    x = make_x(dim, total, layout, dtype)
    w, b = torch.randn(dim, width, device=DEV, dtype=dtype), torch.randn(dim, device=DEV, dtype=dtype)
    dout = torch.randn_like(x)
    kernels = kernels_of(lambda: ops.packed_bwd(x, w, b, dout, cu, None, None, False, True))
    assert ops._last_kernel_path("packed_bwd") == "packed_bwd_cl_fast"
    fast = ops.packed_bwd(x, w, b, dout, cu, None, None, False, True)
    with kernel_path(ops, "packed_bwd_cl_fast", 0):
        general = ops.packed_bwd(x, w, b, dout, cu, None, None, False, True)
        assert ops._last_kernel_path("packed_bwd") == "packed_bwd_general"
    for name, a, g in zip(("dx", "dweight", "dbias"), fast[:3], general[:3]):
        assert rel_err(a, g) < GRAD_TOL[dtype], f"{name}: {rel_err(a, g)}"
    for a, c in zip(fast, ops.packed_bwd(x, w, b, dout, cu, None, None, False, True)):
        assert torch.equal(a, c)
    if not kernels:
        pytest.skip("the profiler recorded no CUDA kernels (no CUPTI): the recorded path was checked")
    assert any("bwd_cl_fast_kernel<" in k for k in kernels), kernels


def test_forward_is_one_conv_kernel_without_states(ops):
    """Channel-last without initial states and final states the forward is one kernel, the fast
    channel-last forward reading cu_seqlens (channel-first runs the varlen body and heads kernels)."""
    dim, lens = 128, [500, 0, 37, 1000]
    x = make_x(dim, sum(lens), "cl", torch.bfloat16)
    w = torch.randn(dim, 4, device=DEV, dtype=torch.bfloat16)
    cu = cu_of(lens)
    kernels = kernels_of(lambda: ops.packed_fwd(x, w, None, cu, None, False, True))
    if not kernels:
        pytest.skip("the profiler recorded no CUDA kernels (no CUPTI)")
    assert len(kernels) == 1 and "fwd_cl_fast_kernel<" in kernels[0], kernels


@pytest.mark.parametrize("layout", ["cl", "cl_pitch"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("width", [2, 3, 4])
def test_forward_without_states_runs_the_channel_last_fast_path(ops, layout, dtype, width):
    """packed_fwd_cl_fast (recorded as varlen_fwd's path) against the float64 reference and, switched
    off, the varlen kernels: sequences shorter than a load group, empty ones, one long one, and
    tokens after the last sequence (output 0)."""
    gen = torch.Generator().manual_seed(11 + width)
    dim = 192
    lens = lens_for("short", 700, gen) + [2500] + lens_for("mamba", 1300, gen)
    total = sum(lens) + 37  # tokens in no sequence at the end
    cu = cu_of(lens)
    x = make_x(dim, total, layout, dtype)
    w, b = torch.randn(dim, width, device=DEV, dtype=dtype), torch.randn(dim, device=DEV, dtype=dtype)
    out, fin = ops.packed_fwd(x, w, b, cu, None, False, True)
    assert ops._last_kernel_path("varlen_fwd") == "packed_fwd_cl_fast" and fin.numel() == 0
    with kernel_path(ops, "packed_fwd_cl_fast", 0):
        off, _ = ops.packed_fwd(x, w, b, cu, None, False, True)
        assert ops._last_kernel_path("varlen_fwd") == "varlen_cl_fast"
    ref, _ = packed_fwd_ref(x[:, :, : sum(lens)], w, b, cu, None, silu=True)
    assert rel_err(out[:, :, : sum(lens)], ref) < REL_TOL[dtype]
    assert not out[:, :, sum(lens) :].any()
    assert rel_err(out, off) < REL_TOL[dtype]


# --- no sync, CUDA graphs, determinism, unchecked values ---------------------------------------


def test_no_host_synchronisation():
    dim, width, lens = 64, 4, [300, 0, 5, 200]
    cu, n = cu_of(lens), len(lens)
    x = make_x(dim, sum(lens), "cl", torch.bfloat16).requires_grad_()
    w = torch.randn(dim, width, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn(dim, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    init = torch.randn(n, dim, width - 1, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        out, final = causal_conv1d_fn(
            x, w, b, initial_states=init, return_final_states=True, activation="silu", cu_seqlens=cu
        )
        torch.autograd.backward((out, final), (torch.ones_like(out), torch.ones_like(final)))
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert x.grad is not None and init.grad is not None and w.grad is not None


@pytest.mark.parametrize("layout", ["cf", "cl"])
def test_cuda_graph_capture_forward_and_backward(ops, layout):
    dim, width, lens = 128, 4, [700, 0, 33, 300, 1]
    cu, n, total = cu_of(lens), len(lens), sum(lens)
    dt = torch.bfloat16
    x = make_x(dim, total, layout, dt)
    w, b = torch.randn(dim, width, device=DEV, dtype=dt), torch.randn(dim, device=DEV, dtype=dt)
    init = torch.randn(n, dim, width - 1, device=DEV, dtype=dt)
    dout, dfin = torch.randn_like(x), torch.randn_like(init)

    def step():
        out, final = ops.packed_fwd(x, w, b, cu, init, True, True)
        grads = ops.packed_bwd(x, w, b, dout, cu, init, dfin, True, True)
        return (out, final, *grads)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    for _ in range(2):
        x.copy_(make_x(dim, total, layout, dt))
        init.copy_(torch.randn_like(init))
        new_cu = cu_of([total - 40, 40, 0, 0, 0])  # new lengths, same number of sequences
        cu.copy_(new_cu)
        graph.replay()
        torch.cuda.synchronize()
        eager = step()
        for a, e in zip(captured, eager):
            assert torch.equal(a, e)


def test_backward_is_bit_identical_across_runs(ops):
    dim, width, lens = 256, 4, [4000, 0, 17, 3000, 5]
    cu, n = cu_of(lens), len(lens)
    x = make_x(dim, sum(lens), "cf", torch.bfloat16)
    w, b = torch.randn(dim, width, device=DEV), torch.randn(dim, device=DEV)
    init = torch.randn(n, dim, width - 1, device=DEV, dtype=torch.bfloat16)
    dout, dfin = torch.randn_like(x), torch.randn_like(init)
    first = ops.packed_bwd(x, w, b, dout, cu, init, dfin, True, True)
    for _ in range(3):
        for a, c in zip(first, ops.packed_bwd(x, w, b, dout, cu, init, dfin, True, True)):
            assert torch.equal(a, c)


@pytest.mark.parametrize("layout", ["cf", "cl"])
def test_lengths_the_kernels_cannot_check_stay_in_bounds(ops, layout):
    """cu_seqlens is not read on the host: lengths summing to less than x's tokens leave the tokens
    after the last sequence out (output and dx 0), lengths running past x are clamped to it."""
    dim, width, total = 32, 4, 200
    x = make_x(dim, total, layout, torch.float32)
    w = torch.randn(dim, width, device=DEV)
    dout = torch.randn_like(x)
    short = torch.tensor([0, 50, 150], dtype=torch.int32, device=DEV)
    out, _ = ops.packed_fwd(x, w, None, short, None, False, False)
    dx = ops.packed_bwd(x, w, None, dout, short, None, None, False, False)[0]
    torch.cuda.synchronize()
    assert not out[:, :, 150:].any() and not dx[:, :, 150:].any()
    ref, _ = packed_fwd_ref(x[:, :, :150], w, None, short)
    assert rel_err(out[:, :, :150], ref) < REL_TOL[torch.float32]
    long = torch.tensor([0, 50, 10_000], dtype=torch.int32, device=DEV)
    out_l, _ = ops.packed_fwd(x, w, None, long, None, False, False)
    dx_l = ops.packed_bwd(x, w, None, dout, long, None, None, False, False)[0]
    torch.cuda.synchronize()
    assert torch.isfinite(out_l).all() and torch.isfinite(dx_l).all()
