"""The fused residual of causal_conv1d_fn (ops fwd and packed_fwd): out = act(conv(x) + bias) +
residual, against the float64 reference (causal_conv1d._reference, ``residual=``), with seq_idx,
initial / final states and packed sequences, both layouts and every dtype; its gradient (dout) and
the others' against the reference's autograd; opcheck, torch.compile, and the argument errors. On
the CPU and (marked gpu) CUDA; tests/gpu/test_residual.py checks that the CUDA fast paths run it."""

from __future__ import annotations

from typing import Optional

import pytest
import torch
from _cc1d_ref import make_bdl, make_seq_idx, raises_from_op

from causal_conv1d import causal_conv1d_fn
from causal_conv1d._reference import REL_TOL, fwd_ref, packed_fwd_ref, rel_err

ops = torch.ops.causal_conv1d

FWD_TOL = {**REL_TOL, torch.float64: 1e-12}
GRAD_TOL = {torch.float64: 1e-10, torch.float32: 1e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}
# Packed: empty sequences, ones shorter than the window, and longer ones.
LENS = [0, 1, 2, 40, 0, 3, 70, 17, 5, 0]


def dtypes_for(device: str) -> list[torch.dtype]:
    return [torch.float32, torch.float16, torch.bfloat16] + ([torch.float64] if device == "cpu" else [])


def residual_like(x: torch.Tensor, kind: str) -> torch.Tensor:
    """A residual of x's shape and dtype: "same" in x's layout, "other" in the other one (the ops copy
    it into x's layout), "strided" in neither (a view with every stride > 1)."""
    b, d, n = x.shape
    if kind == "same":
        return torch.randn_like(x)  # preserves x's strides when dense; else contiguous in x's unit axis
    if kind == "other":
        cl = x.stride(1) == 1 and x.stride(2) != 1
        layout = "cf" if cl else "cl"
        return make_bdl(b, d, n, layout, x.dtype, str(x.device))
    if kind == "strided":
        return torch.randn(b, 2 * d, 2 * n, dtype=x.dtype, device=x.device)[:, ::2, ::2]
    raise ValueError(kind)


def cu_of(lens: list[int], device: str) -> torch.Tensor:
    return torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device=device)


# --- forward --------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["cf", "cl", "cf_view", "cl_view", "strided"])
@pytest.mark.parametrize("width", [2, 3, 4, 5, 8])
@pytest.mark.parametrize("case", ["plain", "states", "seq_idx"])
def test_forward_matches_reference(device: str, layout: str, width: int, case: str) -> None:
    batch, dim, seqlen = 2, 40, 67
    for dtype in dtypes_for(device):
        for silu in (False, True):
            x = make_bdl(batch, dim, seqlen, layout, dtype, device)
            w = torch.randn(dim, width, dtype=dtype, device=device)
            b = torch.randn(dim, dtype=dtype, device=device)
            res = residual_like(x, "same")
            init = torch.randn(batch, dim, width - 1, dtype=dtype, device=device) if case == "states" else None
            seq = make_seq_idx(batch, seqlen, device) if case == "seq_idx" else None
            rfs = case == "states"
            got = causal_conv1d_fn(
                x,
                w,
                b,
                seq_idx=seq,
                initial_states=init,
                return_final_states=rfs,
                activation="silu" if silu else None,
                residual=res,
            )
            ref, ref_final = fwd_ref(x, w, b, seq, init, silu, residual=res)
            out = got[0] if rfs else got
            assert out.dtype == dtype
            assert rel_err(out, ref) < FWD_TOL[dtype], (dtype, silu)
            if rfs:
                assert torch.equal(got[1], ref_final.to(dtype)), (dtype, silu)  # exact copies


@pytest.mark.parametrize("layout", ["cf", "cl"])
@pytest.mark.parametrize("kind", ["other", "strided"])
def test_residual_in_another_layout_is_read_correctly(device: str, layout: str, kind: str) -> None:
    x = make_bdl(2, 24, 50, layout, torch.float32, device)
    w, b = torch.randn(24, 4, device=device), torch.randn(24, device=device)
    res = residual_like(x, kind)
    out = causal_conv1d_fn(x, w, b, activation="silu", residual=res)
    ref, _ = fwd_ref(x, w, b, silu=True, residual=res)
    assert rel_err(out, ref) < FWD_TOL[torch.float32]
    assert out.stride() == x.stride()  # out keeps x's layout, whatever the residual's


def test_expanded_residual_is_read_through_its_strides(device: str) -> None:
    x = torch.randn(3, 16, 40, device=device)
    w = torch.randn(16, 3, device=device)
    res = torch.randn(1, 16, 40, device=device).expand(3, 16, 40)  # batch stride 0
    out = causal_conv1d_fn(x, w, residual=res)
    ref, _ = fwd_ref(x, w, residual=res)
    assert rel_err(out, ref) < FWD_TOL[torch.float32]


@pytest.mark.parametrize("layout", ["cf", "cl"])
def test_zero_residual_gives_the_output_without_one_bit_for_bit(device: str, layout: str) -> None:
    """act(acc) + 0 in the accumulator is act(acc): the fused path rounds the same value once."""
    for dtype in dtypes_for(device):
        x = make_bdl(2, 32, 80, layout, dtype, device)
        w, b = torch.randn(32, 4, dtype=dtype, device=device), torch.randn(32, dtype=dtype, device=device)
        init = torch.randn(2, 32, 3, dtype=dtype, device=device)
        plain = causal_conv1d_fn(x, w, b, initial_states=init, return_final_states=True, activation="silu")
        fused = causal_conv1d_fn(
            x,
            w,
            b,
            initial_states=init,
            return_final_states=True,
            activation="silu",
            residual=torch.zeros_like(x),
        )
        assert torch.equal(fused[0], plain[0]), dtype
        assert torch.equal(fused[1], plain[1]), dtype


def test_residual_is_rounded_once(device: str) -> None:
    """bf16: the fused sum is the float64 sum rounded once, no worse than rounding conv and sum
    separately (the reference's error bound holds, and the fused error is not above the unfused)."""
    x = torch.randn(2, 64, 256, device=device, dtype=torch.bfloat16)
    w = torch.randn(64, 4, device=device, dtype=torch.bfloat16)
    res = torch.randn_like(x)
    ref, _ = fwd_ref(x, w, silu=True, residual=res)
    fused = causal_conv1d_fn(x, w, activation="silu", residual=res)
    unfused = causal_conv1d_fn(x, w, activation="silu") + res
    assert rel_err(fused, ref) <= rel_err(unfused, ref) * 1.05


def test_seq_idx_padding_positions_give_the_residual(device: str) -> None:
    x = torch.randn(1, 8, 30, device=device)
    w = torch.randn(8, 4, device=device)
    seq = torch.zeros(1, 30, dtype=torch.int32, device=device)
    seq[:, 10:20] = -1
    seq[:, 20:] = 1
    res = torch.randn_like(x)
    for layout_x in (x, x.transpose(1, 2).contiguous().transpose(1, 2)):
        out = causal_conv1d_fn(layout_x, w, seq_idx=seq, activation="silu", residual=res)
        assert torch.equal(out[..., 10:20], res[..., 10:20])


@pytest.mark.parametrize("layout", ["cf", "cl", "cf_view", "cl_view"])
@pytest.mark.parametrize("width", [2, 4, 5])
def test_packed_forward_matches_reference(device: str, layout: str, width: int) -> None:
    dim = 24
    cu = cu_of(LENS, device)
    total = int(cu[-1])
    for dtype in dtypes_for(device):
        x = make_bdl(1, dim, total, layout, dtype, device)
        w = torch.randn(dim, width, dtype=dtype, device=device)
        b = torch.randn(dim, dtype=dtype, device=device)
        init = torch.randn(len(LENS), dim, width - 1, dtype=dtype, device=device)
        res = residual_like(x, "same")
        out, final = causal_conv1d_fn(
            x, w, b, initial_states=init, return_final_states=True, activation="silu", cu_seqlens=cu, residual=res
        )
        ref, ref_final = packed_fwd_ref(x, w, b, cu, init, silu=True, residual=res)
        assert rel_err(out, ref) < FWD_TOL[dtype], dtype
        assert torch.equal(final, ref_final.to(dtype)), dtype
        # the residual in the other layout: copied, the same result
        res2 = residual_like(x, "other")
        out2 = causal_conv1d_fn(x, w, b, initial_states=init, cu_seqlens=cu, residual=res2)
        ref2, _ = packed_fwd_ref(x, w, b, cu, init, residual=res2)
        assert rel_err(out2, ref2) < FWD_TOL[dtype], dtype


def test_upstream_positional_calls_are_unchanged(device: str) -> None:
    """The eight upstream arguments positionally and the ops' seven-argument calls still work."""
    x = torch.randn(2, 16, 40, device=device)
    w, b = torch.randn(16, 4, device=device), torch.randn(16, device=device)
    init = torch.randn(2, 16, 3, device=device)
    out, fin = causal_conv1d_fn(x, w, b, None, init, True, None, "silu")
    ref, ref_fin = fwd_ref(x, w, b, None, init, True)
    assert rel_err(out, ref) < FWD_TOL[torch.float32] and torch.equal(fin, ref_fin.float())
    out_op, _ = ops.fwd(x, w, b, None, init, True, True)
    assert torch.equal(out_op, out)


# --- gradients ------------------------------------------------------------------------------------


def _leaves(*ts: Optional[torch.Tensor], double: bool) -> list[Optional[torch.Tensor]]:
    return [
        (t.detach().double() if double else t.detach().clone()).requires_grad_() if t is not None else None for t in ts
    ]


def _grads(x, w, b, init, res, seq, cu, silu: bool, dout, dfinal, ours: bool) -> list[Optional[torch.Tensor]]:
    xl, wl, bl, il, rl = _leaves(x, w, b, init, res, double=not ours)
    rfs = dfinal is not None
    act = "silu" if silu else None
    if ours:
        got = causal_conv1d_fn(xl, wl, bl, seq, il, rfs, activation=act, cu_seqlens=cu, residual=rl)
        out, final = got if rfs else (got, None)
    elif cu is not None:
        out, final = packed_fwd_ref(xl, wl, bl, cu, il, silu=silu, residual=rl)
    else:
        out, final = fwd_ref(xl, wl, bl, seq, il, silu, residual=rl)
    loss = (out.double() * dout.double()).sum()
    if rfs:
        loss = loss + (final.double() * dfinal.double()).sum()
    loss.backward()
    return [t.grad if t is not None else None for t in (xl, wl, bl, il, rl)]


@pytest.mark.parametrize("layout", ["cf", "cl"])
@pytest.mark.parametrize("case", ["states", "seq_idx", "packed"])
@pytest.mark.parametrize("width", [3, 4])
def test_gradients_match_reference(device: str, layout: str, case: str, width: int) -> None:
    dim = 24
    for dtype in dtypes_for(device):
        if case == "packed":
            cu = cu_of(LENS, device)
            batch, seqlen, nstates = 1, int(cu[-1]), len(LENS)
        else:
            cu, batch, seqlen, nstates = None, 2, 57, 2
        x = make_bdl(batch, dim, seqlen, layout, dtype, device)
        w = torch.randn(dim, width, dtype=dtype, device=device)
        b = torch.randn(dim, dtype=dtype, device=device)
        res = torch.randn_like(x)
        init = torch.randn(nstates, dim, width - 1, dtype=dtype, device=device)
        seq = make_seq_idx(batch, seqlen, device) if case == "seq_idx" else None
        dout = torch.randn_like(x)
        dfinal = None if case == "seq_idx" else torch.randn_like(init)
        ours = _grads(x, w, b, init, res, seq, cu, True, dout, dfinal, ours=True)
        ref = _grads(x, w, b, init, res, seq, cu, True, dout, dfinal, ours=False)
        for name, g, r in zip(("dx", "dweight", "dbias", "dinitial_states", "dresidual"), ours, ref):
            assert g is not None and r is not None, name
            assert g.dtype == dtype or name in ("dweight", "dbias"), name
            assert rel_err(g, r) < GRAD_TOL[dtype], (name, dtype)
        assert torch.equal(ours[4], dout)  # d(out)/d(residual) = 1: dresidual is dout itself


def test_residual_alone_requires_grad(device: str) -> None:
    """Only the residual requires grad: the forward goes through autograd and dresidual = dout."""
    x = torch.randn(2, 16, 30, device=device)
    w = torch.randn(16, 4, device=device)
    res = torch.randn_like(x, requires_grad=True)
    for cu in (None, cu_of([10, 20], device)):
        xx = x[:1] if cu is not None else x
        rr = res[:1].detach().requires_grad_() if cu is not None else res
        out = causal_conv1d_fn(xx, w, activation="silu", cu_seqlens=cu, residual=rr)
        assert out.requires_grad
        dout = torch.randn_like(out)
        out.backward(dout)
        assert torch.equal(rr.grad, dout)


def test_only_final_states_used_gives_no_residual_gradient(device: str) -> None:
    """dout None (only final_states in the loss): dresidual is None (zeros) and dx flows from dfinal."""
    x = torch.randn(2, 16, 30, device=device, requires_grad=True)
    w = torch.randn(16, 4, device=device)
    res = torch.randn(2, 16, 30, device=device, requires_grad=True)
    _, final = causal_conv1d_fn(x, w, return_final_states=True, residual=res)
    final.sum().backward()
    assert res.grad is None
    assert x.grad is not None and x.grad[..., -3:].abs().sum() > 0


def test_gradcheck_cpu_float64() -> None:
    x = torch.randn(2, 4, 11, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    b = torch.randn(4, dtype=torch.float64, requires_grad=True)
    init = torch.randn(2, 4, 2, dtype=torch.float64, requires_grad=True)
    res = torch.randn(2, 4, 11, dtype=torch.float64, requires_grad=True)

    def dense(x, w, b, init, res):
        return causal_conv1d_fn(x, w, b, initial_states=init, return_final_states=True, activation="silu", residual=res)

    assert torch.autograd.gradcheck(dense, (x, w, b, init, res))
    cu = torch.tensor([0, 3, 3, 11], dtype=torch.int32)
    xp = x[:1].detach().requires_grad_()
    rp = res[:1].detach().requires_grad_()
    ip = torch.randn(3, 4, 2, dtype=torch.float64, requires_grad=True)

    def packed(x, w, b, init, res):
        return causal_conv1d_fn(
            x, w, b, initial_states=init, return_final_states=True, activation="silu", cu_seqlens=cu, residual=res
        )

    assert torch.autograd.gradcheck(packed, (xp, w, b, ip, rp))


# --- opcheck and torch.compile ----------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["cf", "cl"])
@pytest.mark.parametrize("res_kind", ["same", "other"])
def test_opcheck_fwd(device: str, layout: str, res_kind: str) -> None:
    x = make_bdl(2, 16, 33, layout, torch.float32, device)
    w, b = torch.randn(16, 4, device=device), torch.randn(16, device=device)
    init = torch.randn(2, 16, 3, device=device)
    res = residual_like(x, res_kind)
    torch.library.opcheck(ops.fwd.default, (x, w, b, None, init, True, True, res))
    torch.library.opcheck(ops.fwd.default, (x, w, b, None, None, False, False), {"residual": res})


@pytest.mark.parametrize("layout", ["cf", "cl"])
def test_opcheck_packed_fwd(device: str, layout: str) -> None:
    cu = cu_of([5, 0, 20, 8], device)
    x = make_bdl(1, 16, 33, layout, torch.float32, device)
    w, b = torch.randn(16, 4, device=device), torch.randn(16, device=device)
    init = torch.randn(4, 16, 3, device=device)
    res = residual_like(x, "same")
    torch.library.opcheck(ops.packed_fwd.default, (x, w, b, cu, init, True, True, res))


@pytest.mark.parametrize("layout", ["cf", "cl"])
def test_compile_fullgraph_forward_and_backward(device: str, layout: str, compile_backend: str) -> None:
    x = make_bdl(2, 16, 40, layout, torch.float32, device)
    w, b = torch.randn(16, 4, device=device), torch.randn(16, device=device)
    init = torch.randn(2, 16, 3, device=device)
    res = torch.randn_like(x)
    cu = cu_of([7, 33], device)

    def f(x, w, b, init, res, xp, ip, rp):
        out, final = causal_conv1d_fn(
            x, w, b, initial_states=init, return_final_states=True, activation="silu", residual=res
        )
        outp, finalp = causal_conv1d_fn(
            xp, w, b, initial_states=ip, return_final_states=True, activation="silu", cu_seqlens=cu, residual=rp
        )
        return out.sum() + final.sum() + (outp * outp).sum() + finalp.sum()

    def inputs() -> list[torch.Tensor]:
        torch.manual_seed(1)
        xp = make_bdl(1, 16, 40, layout, torch.float32, device)
        ip = torch.randn(2, 16, 3, device=device)
        rp = torch.randn_like(xp)
        return [t.detach().clone().requires_grad_() for t in (x, w, b, init, res, xp, ip, rp)]

    eager_in, comp_in = inputs(), inputs()
    f(*eager_in).backward()
    compiled = torch.compile(f, fullgraph=True, backend=compile_backend)
    compiled(*comp_in).backward()
    for a, c in zip(eager_in, comp_in):
        assert a.grad is not None and c.grad is not None
        torch.testing.assert_close(c.grad, a.grad, rtol=1e-5, atol=1e-5)


# --- errors -----------------------------------------------------------------------------------------


def _ok(device: str, packed: bool) -> tuple:
    x = torch.randn(1 if packed else 2, 8, 20, device=device)
    w = torch.randn(8, 4, device=device)
    cu = cu_of([5, 15], device) if packed else None
    return x, w, cu


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize(
    "make, exc, match",
    [
        pytest.param(
            lambda x: torch.randn(*x.shape[:2], x.shape[2] + 1, device=x.device),
            ValueError,
            r"residual must have shape x\.shape = \[\d+, 8, 20\], got \[\d+, 8, 21\]",
            id="longer",
        ),
        pytest.param(
            lambda x: torch.randn(x.shape[1], x.shape[2], device=x.device),
            ValueError,
            r"residual must have shape x\.shape = \[\d+, 8, 20\], got \[8, 20\]",
            id="2-D",
        ),
        pytest.param(
            lambda x: torch.randn_like(x, dtype=torch.float64),
            TypeError,
            r"residual must have x's dtype \(Float\), got Double",
            id="float64",
        ),
        pytest.param(
            lambda x: torch.randn_like(x).to(torch.int32), TypeError, r"residual must have x's dtype", id="int32"
        ),
    ],
)
def test_bad_residual_is_refused_naming_it(device: str, packed: bool, make, exc: type, match: str) -> None:
    x, w, cu = _ok(device, packed)
    res = make(x)
    with pytest.raises(exc, match=match):
        causal_conv1d_fn(x, w, cu_seqlens=cu, residual=res)
    with raises_from_op(exc, match):  # the op refuses it too
        if packed:
            ops.packed_fwd(x, w, None, cu, None, False, False, res)
        else:
            ops.fwd(x, w, None, None, None, False, False, res)


@pytest.mark.parametrize("packed", [False, True])
def test_residual_on_another_device_is_refused(device: str, packed: bool) -> None:
    x, w, cu = _ok(device, packed)
    other = "meta" if device == "cpu" else "cpu"
    res = torch.empty(x.shape, device=other)
    with pytest.raises(RuntimeError, match=r"residual must be on the same device as x"):
        causal_conv1d_fn(x, w, cu_seqlens=cu, residual=res)


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("bad", [1.0, [[0.0]], "residual"])
def test_residual_that_is_not_a_tensor_is_refused(device: str, packed: bool, bad: object) -> None:
    x, w, cu = _ok(device, packed)
    with pytest.raises(TypeError, match=r"residual must be a torch\.Tensor of x's shape .* or None, got "):
        causal_conv1d_fn(x, w, cu_seqlens=cu, residual=bad)
