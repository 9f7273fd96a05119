"""CUDA kernels against float64 references: layouts, dtypes, widths, odd lengths, states,
seq_idx, backward, determinism, decode updates (bit-exact states), >2^31-element tensors."""

from __future__ import annotations

import itertools

import pytest
import torch

from causal_conv1d._reference import fwd_ref, rel_err, rel_tol, update_ref

pytestmark = pytest.mark.gpu

DT = [torch.float32, torch.float16, torch.bfloat16]
DEV = "cuda"


def make_x(B, D, L, dtype, layout, seed=0):
    g = torch.Generator(device=DEV).manual_seed(seed)
    if layout == "cf":
        return torch.randn(B, D, L, device=DEV, dtype=dtype, generator=g)
    if layout == "cl":
        return torch.randn(B, L, D, device=DEV, dtype=dtype, generator=g).transpose(1, 2)
    if layout == "cl_pitch":  # token pitch > dim (a slice of a wider projection)
        return torch.randn(B, L, D + 24, device=DEV, dtype=dtype, generator=g)[:, :, 8 : 8 + D].transpose(1, 2)
    if layout == "cf_unaligned":  # base pointer off 16 bytes, odd row pitch
        return torch.randn(B, D, L + 3, device=DEV, dtype=dtype, generator=g)[:, :, 1 : 1 + L]
    raise ValueError(layout)


def params(D, W, wdtype, bias=True, seed=1):
    g = torch.Generator(device=DEV).manual_seed(seed)
    w = (torch.randn(D, W, device=DEV, generator=g) / W**0.5).to(wdtype)
    b = torch.randn(D, device=DEV, generator=g).to(wdtype) if bias else None
    return w, b


def check_layout(out, x):
    if x.stride(2) != 1 and x.stride(1) == 1:
        assert out.stride(1) == 1, f"channel-last x gave out strides {out.stride()}"
    else:
        assert out.stride(2) == 1


FWD_CASES = list(
    itertools.product(
        DT,
        ["same", "fp32"],
        [2, 3, 4, 5, 8],
        ["cf", "cl", "cl_pitch", "cf_unaligned"],
        [1, 3, 127, 1025],
    )
)


@pytest.mark.parametrize("dtype,wkind,W,layout,L", FWD_CASES)
def test_fwd(ops, dtype, wkind, W, layout, L):
    B, D = 2, 40 if layout != "cf" else 24
    x = make_x(B, D, L, dtype, layout, seed=L + W)
    wd = dtype if wkind == "same" else torch.float32
    w, b = params(D, W, wd, bias=(L % 2 == 1))
    silu = W % 2 == 0
    out, fin = ops.fwd(x, w, b, None, None, False, silu)
    ref, _ = fwd_ref(x, w, b, silu=silu)
    assert out.shape == x.shape and out.dtype == dtype
    check_layout(out, x)
    assert fin.numel() == 0
    err = rel_err(out, ref)
    assert err < rel_tol(dtype, wd), f"rel err {err}"


@pytest.mark.parametrize("dtype", DT)
@pytest.mark.parametrize("layout", ["cf", "cl"])
@pytest.mark.parametrize("W", [2, 4, 7])
@pytest.mark.parametrize("L", [1, 2, 5, 300])
def test_fwd_states(ops, dtype, layout, W, L):
    B, D = 3, 72
    x = make_x(B, D, L, dtype, layout, seed=7)
    w, b = params(D, W, dtype)
    init = torch.randn(B, D, W - 1, device=DEV, dtype=dtype)
    out, fin = ops.fwd(x, w, b, None, init, True, True)
    ref, ref_fin = fwd_ref(x, w, b, initial_states=init, silu=True)
    assert rel_err(out, ref) < rel_tol(dtype)
    assert fin.shape == (B, D, W - 1)
    assert torch.equal(fin, ref_fin.to(dtype)), "final_states must be exact copies of the inputs"
    out2, fin2 = ops.fwd(x, w, b, None, None, True, False)
    ref2, ref_fin2 = fwd_ref(x, w, b)
    assert rel_err(out2, ref2) < rel_tol(dtype)
    assert torch.equal(fin2, ref_fin2.to(dtype))


def make_seq(B, L, seed=0):
    g = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(B):
        cuts = sorted(torch.randint(0, L + 1, (3,), generator=g).tolist())
        ids = torch.zeros(L, dtype=torch.int32)
        for i, c in enumerate(cuts):
            ids[c:] = i + 1
        pad = int(torch.randint(0, max(1, L // 8), (1,), generator=g))
        if pad:
            ids[L - pad :] = -1  # trailing padding
        rows.append(ids)
    return torch.stack(rows).to(DEV)


@pytest.mark.parametrize("dtype", DT)
@pytest.mark.parametrize("layout", ["cf", "cl"])
@pytest.mark.parametrize("W", [3, 4, 6])
@pytest.mark.parametrize("L", [17, 1029])
def test_seq_idx_fwd_bwd(ops, dtype, layout, W, L):
    B, D = 2, 48
    x = make_x(B, D, L, dtype, layout, seed=3)
    w, b = params(D, W, dtype)
    seq = make_seq(B, L, seed=L)
    out, _ = ops.fwd(x, w, b, seq, None, False, True)
    xr = x.detach().double().requires_grad_()
    wr = w.detach().double().requires_grad_()
    br = b.detach().double().requires_grad_()
    ref, _ = fwd_ref(xr, wr, br, seq_idx=seq, silu=True)
    assert rel_err(out, ref) < rel_tol(dtype)
    dout = torch.randn_like(out)
    ref.backward(dout.double())
    dx, dw, db, dinit = ops.bwd(x, w, b, dout, seq, None, None, False, True)
    assert rel_err(dx, xr.grad) < rel_tol(dtype)
    assert rel_err(dw, wr.grad) < rel_tol(dtype)
    assert rel_err(db, br.grad) < rel_tol(dtype)
    assert dinit.numel() == 0


BWD_CASES = list(
    itertools.product(DT, ["same", "fp32"], [2, 3, 4, 8], ["cf", "cl", "cl_pitch", "cf_unaligned"], [1, 4, 129, 2051])
)


@pytest.mark.parametrize("dtype,wkind,W,layout,L", BWD_CASES)
def test_bwd(ops, dtype, wkind, W, layout, L):
    B, D = 2, 40
    x = make_x(B, D, L, dtype, layout, seed=W * L)
    wd = dtype if wkind == "same" else torch.float32
    w, b = params(D, W, wd, bias=True)
    silu = L % 2 == 1
    use_states = W != 8 or L > 100
    init = torch.randn(B, D, W - 1, device=DEV, dtype=dtype) if use_states else None
    dfin = torch.randn(B, D, W - 1, device=DEV, dtype=dtype) if use_states else None
    xr = x.detach().double().requires_grad_()
    wr = w.detach().double().requires_grad_()
    br = b.detach().double().requires_grad_()
    ir = init.detach().double().requires_grad_() if use_states else None
    ref, fin = fwd_ref(xr, wr, br, initial_states=ir, silu=silu)
    dout = torch.randn(x.shape, device=DEV, dtype=dtype)
    if layout == "cf":  # dout in the other layout than x
        dout = dout.transpose(1, 2).contiguous().transpose(1, 2)
    loss = (ref * dout.double()).sum()
    if use_states:
        loss = loss + (fin * dfin.double()).sum()
    loss.backward()
    dx, dw, db, dinit = ops.bwd(x, w, b, dout, None, init, dfin, use_states, silu)
    tol = rel_tol(dtype, wd)
    assert dx.shape == x.shape and dx.dtype == dtype
    check_layout(dx, x)
    assert rel_err(dx, xr.grad) < tol
    assert dw.dtype == wd and db.dtype == wd
    assert rel_err(dw, wr.grad) < tol
    assert rel_err(db, br.grad) < tol
    if use_states:
        assert rel_err(dinit, ir.grad) < tol
    else:
        assert dinit.numel() == 0


def test_bwd_no_bias_returns_empty_dbias(ops):
    x = make_x(2, 16, 33, torch.float32, "cf")
    w, _ = params(16, 4, torch.float32, bias=False)
    dx, dw, db, _ = ops.bwd(x, w, None, torch.randn_like(x), None, None, None, False, False)
    assert db.numel() == 0
    xr = x.double().requires_grad_()
    wr = w.double().requires_grad_()
    dout = torch.randn_like(x)
    ref, _ = fwd_ref(xr, wr)
    ref.backward(dout.double())
    dx, dw, _, _ = ops.bwd(x, w, None, dout, None, None, None, False, False)
    assert rel_err(dx, xr.grad) < 1e-5 and rel_err(dw, wr.grad) < 1e-5


@pytest.mark.parametrize("layout", ["cf", "cl"])
def test_bwd_deterministic(ops, layout):
    B, D, L, W = 4, 1024, 4096, 4
    x = make_x(B, D, L, torch.bfloat16, layout, seed=11)
    w, b = params(D, W, torch.float32)
    dout = torch.randn(x.shape, device=DEV, dtype=torch.bfloat16)
    if layout == "cl":
        dout = dout.transpose(1, 2).contiguous().transpose(1, 2)
    first = ops.bwd(x, w, b, dout, None, None, None, False, True)
    for _ in range(3):
        again = ops.bwd(x, w, b, dout, None, None, None, False, True)
        for a, c in zip(first[:3], again[:3]):
            assert torch.equal(a, c), "backward must be bit-identical across runs"


@pytest.mark.parametrize("B,D,L,W", [(8, 5376, 2048, 4), (1, 10240, 8192, 4), (2, 4096, 4096, 3)])
@pytest.mark.parametrize("layout", ["cf", "cl"])
def test_large_shapes(ops, B, D, L, W, layout):
    x = make_x(B, D, L, torch.bfloat16, layout, seed=5)
    w, b = params(D, W, torch.bfloat16)
    out, _ = ops.fwd(x, w, b, None, None, False, True)
    ref, _ = fwd_ref(x, w, b, silu=True)
    assert rel_err(out, ref) < rel_tol(torch.bfloat16)


def test_over_2_31_elements(ops):
    """2^31 + a few elements: 64-bit offsets (checks the last channels and tokens)."""
    free, _ = torch.cuda.mem_get_info()
    need = 3 * (2**31 + 2**20) * 2 + (1 << 30)
    if free < need:
        pytest.skip(f"needs {need >> 30} GiB free on the GPU, {free >> 30} GiB free")
    W = 4
    for layout in ("cf", "cl"):
        if layout == "cf":
            B, D, L = 1, 64, 2**25 + 64  # 2^31 + 4096 elements
            x = torch.randn(B, D, L, device=DEV, dtype=torch.bfloat16)
        else:
            B, D, L = 1, 8192, 2**18 + 8
            x = torch.randn(B, L, D, device=DEV, dtype=torch.bfloat16).transpose(1, 2)
        assert x.numel() > 2**31
        w, b = params(D, W, torch.bfloat16)
        out, fin = ops.fwd(x, w, b, None, None, True, True)
        tail = slice(L - 300, L)
        ref, ref_fin = fwd_ref(x[:, -5:, L - 303 :].contiguous(), w[-5:], b[-5:], silu=True)
        assert rel_err(out[:, -5:, tail], ref[:, :, 3:]) < rel_tol(torch.bfloat16)
        assert torch.equal(fin[:, -5:], ref_fin.to(torch.bfloat16))
        del x, out, fin
        torch.cuda.empty_cache()


UPD_CASES = list(itertools.product(DT, [2, 3, 4, 6], [1, 3], ["bds", "bsd"], [False, True], [False, True]))


@pytest.mark.parametrize("dtype,W,L,slayout,circular,indexed", UPD_CASES)
def test_update(ops, dtype, W, L, slayout, circular, indexed):
    B, D = 5, 96
    S = W - 1 + (2 if circular else 1)
    cache = 9 if indexed else B
    if slayout == "bds":
        state = torch.randn(cache, D, S, device=DEV, dtype=dtype)
    else:
        state = torch.randn(cache, S, D, device=DEV, dtype=dtype).transpose(1, 2)
    x = torch.randn(B, D, L, device=DEV, dtype=dtype)
    w, b = params(D, W, dtype)
    cs = torch.tensor([0, 1, 7, 2, 100][:B], device=DEV, dtype=torch.int32) if circular else None
    idx = torch.tensor([3, -1, 0, 8, 5][:B], device=DEV, dtype=torch.int32) if indexed else None
    ref_state = state.clone()
    ref = update_ref(x, ref_state, w, b, True, cs, idx)
    out = ops.update(x, state, w, b, True, cs, idx)
    assert torch.equal(state, ref_state), "conv_state must be updated bit-exactly"
    assert rel_err(out, ref) < rel_tol(dtype)
    if indexed:
        assert torch.count_nonzero(out[1]) == 0, "a negative conv_state_indices entry gives a zero output"


def test_update_strided_x_and_decode_2d(ops):
    B, D, W, S = 16, 5376, 4, 3
    state = torch.randn(B, D, S, device=DEV, dtype=torch.bfloat16)
    xbig = torch.randn(B, 2 * D, device=DEV, dtype=torch.bfloat16)
    x = xbig[:, ::2].unsqueeze(-1)  # strided channels
    w, b = params(D, W, torch.bfloat16)
    ref_state = state.clone()
    ref = update_ref(x, ref_state, w, b, False)
    out = ops.update(x, state, w, b, False, None, None)
    assert torch.equal(state, ref_state)
    assert rel_err(out, ref) < rel_tol(torch.bfloat16)
