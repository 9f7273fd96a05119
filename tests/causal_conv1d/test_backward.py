"""Gradients: the bwd op and autograd through causal_conv1d_fn against float64 autograd, gradcheck."""

from __future__ import annotations

import os
from typing import Optional

import pytest
import torch
from _cc1d_ref import OP_LAYER, fp32_inputs, make_bdl, make_seq_idx

from causal_conv1d import causal_conv1d_fn
from causal_conv1d._reference import fwd_ref
from causal_conv1d.cpp_functions import causal_conv1d_bwd_function

# Gradient tolerances (sums over batch * seqlen terms): (rtol, atol).
GRAD_TOL = {torch.float32: (1e-4, 1e-4), torch.float16: (1e-2, 1e-2), torch.bfloat16: (5e-2, 5e-2)}


def _grads(x, weight, bias, init, seq_idx, silu, dout, dfinal, use_ours: bool):
    leaves = [t.detach().clone().requires_grad_() if t is not None else None for t in (x, weight, bias, init)]
    xl, wl, bl, il = leaves
    if use_ours:
        want_final = dfinal is not None
        res = causal_conv1d_fn(
            xl,
            wl,
            bl,
            seq_idx=seq_idx,
            initial_states=il,
            return_final_states=want_final,
            activation="silu" if silu else None,
        )
        out, final = res if want_final else (res, None)
    else:
        out, final = fwd_ref(xl, wl, bl, seq_idx=seq_idx, initial_states=il, silu=silu)
    loss = (out.double() * dout.double()).sum()
    if dfinal is not None:
        loss = loss + (final.double() * dfinal.double()).sum()
    loss.backward()
    return [t.grad if t is not None else None for t in leaves]


def _compare(ours, ref, dtype) -> None:
    rtol, atol = GRAD_TOL[dtype]
    for name, g, r in zip(("dx", "dweight", "dbias", "dinitial_states"), ours, ref):
        if r is None:
            assert g is None, name
            continue
        scale = max(1.0, float(r.abs().max()))
        torch.testing.assert_close(
            g.double(), r.double(), rtol=rtol, atol=atol * scale, msg=lambda m, n=name: f"{n}: {m}"
        )


@pytest.mark.parametrize("seqlen", [1, 2, 3, 127, 129])
@pytest.mark.parametrize("layout", ["cf", "cl", "cf_view", "cl_view"])
@pytest.mark.parametrize("width", [2, 3, 4, 5, 8])
@pytest.mark.parametrize("silu", [False, True])
def test_bwd_grid(device: str, seqlen: int, layout: str, width: int, silu: bool) -> None:
    batch, dim = 2, 10
    x, weight, bias = fp32_inputs(batch, dim, seqlen, layout, width, device)
    with_states = (seqlen + width) % 2 == 1
    init = torch.randn(batch, dim, width - 1, device=device) if with_states else None
    dfinal = torch.randn(batch, dim, width - 1, device=device) if with_states else None
    dout = torch.randn(batch, dim, seqlen, device=device)
    ours = _grads(x, weight, bias, init, None, silu, dout, dfinal, use_ours=True)
    ref = _grads(x, weight, bias, init, None, silu, dout, dfinal, use_ours=False)
    _compare(ours, ref, torch.float32)


@pytest.mark.parametrize("x_dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("w_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("layout", ["cf", "cl"])
def test_bwd_dtypes(device: str, x_dtype: torch.dtype, w_dtype: torch.dtype, layout: str) -> None:
    batch, dim, seqlen, width = 2, 16, 65, 4
    x = make_bdl(batch, dim, seqlen, layout, x_dtype, device)
    weight = torch.randn(dim, width, device=device, dtype=w_dtype)
    bias = torch.randn(dim, device=device, dtype=w_dtype)
    init = torch.randn(batch, dim, width - 1, device=device, dtype=x_dtype)
    dfinal = torch.randn(batch, dim, width - 1, device=device, dtype=x_dtype)
    dout = torch.randn(batch, dim, seqlen, device=device, dtype=x_dtype)
    ours = _grads(x, weight, bias, init, None, True, dout, dfinal, use_ours=True)
    assert ours[0].dtype == x_dtype and ours[1].dtype == w_dtype and ours[2].dtype == w_dtype
    ref = _grads(x, weight, bias, init, None, True, dout, dfinal, use_ours=False)
    _compare(ours, ref, x_dtype if x_dtype != torch.float32 else w_dtype)


@pytest.mark.parametrize("seqlen", [1, 4, 129])
@pytest.mark.parametrize("layout", ["cf", "cl"])
@pytest.mark.parametrize("width", [2, 4, 7])
def test_bwd_seq_idx(device: str, seqlen: int, layout: str, width: int) -> None:
    batch, dim = 3, 8
    x, weight, bias = fp32_inputs(batch, dim, seqlen, layout, width, device)
    seq_idx = make_seq_idx(batch, seqlen, device)
    dout = torch.randn(batch, dim, seqlen, device=device)
    ours = _grads(x, weight, bias, None, seq_idx, True, dout, None, use_ours=True)
    ref = _grads(x, weight, bias, None, seq_idx, True, dout, None, use_ours=False)
    _compare(ours, ref, torch.float32)


@pytest.mark.parametrize("layout", ["cf", "cl"])
@pytest.mark.parametrize("width", [2, 4])
@pytest.mark.parametrize("silu", [False, True])
def test_gradcheck_fp64(layout: str, width: int, silu: bool) -> None:
    batch, dim, seqlen = 2, 3, 6
    x = make_bdl(batch, dim, seqlen, layout, torch.float64, "cpu").requires_grad_()
    weight = torch.randn(dim, width, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(dim, dtype=torch.float64, requires_grad=True)
    init = torch.randn(batch, dim, width - 1, dtype=torch.float64, requires_grad=True)
    act = "silu" if silu else None

    def f(x, weight, bias, init):
        return causal_conv1d_fn(x, weight, bias, initial_states=init, return_final_states=True, activation=act)

    assert torch.autograd.gradcheck(f, (x, weight, bias, init))
    seq_idx = torch.tensor([[0, 0, 1, 1, 1, -1], [0, 0, 0, 0, 2, 2]], dtype=torch.int32)
    assert torch.autograd.gradcheck(
        lambda x, w, b: causal_conv1d_fn(x, w, b, seq_idx=seq_idx, activation=act), (x, weight, bias)
    )


@pytest.mark.parametrize("layout", ["cf", "cl"])
def test_bwd_function_preallocated_dx(device: str, layout: str) -> None:
    batch, dim, seqlen, width = 2, 6, 33, 4
    x, weight, bias = fp32_inputs(batch, dim, seqlen, layout, width, device)
    init = torch.randn(batch, dim, width - 1, device=device)
    dout = torch.randn(batch, dim, seqlen, device=device)
    dfinal = torch.randn(batch, dim, width - 1, device=device)
    base = torch.zeros(batch, seqlen, 3 * dim, device=device)
    dx = base[:, :, dim : 2 * dim].transpose(1, 2)  # strided, channel-last view
    res = causal_conv1d_bwd_function(x, weight, bias, dout, None, init, dfinal, dx, True, True)
    assert res[0] is dx
    ref = _grads(x, weight, bias, init, None, True, dout, dfinal, use_ours=False)
    _compare(list(res), ref, torch.float32)
    assert torch.all(base[:, :, :dim] == 0) and torch.all(base[:, :, 2 * dim :] == 0)  # only the view is written
    no_bias = causal_conv1d_bwd_function(x, weight, None, dout, None, None, None, None, False, False)
    assert no_bias[2] is None and no_bias[3] is None


def test_bwd_deterministic(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    batch, dim, seqlen, width = 4, 64, 2049, 4
    x = torch.randn(batch, dim, seqlen, device=device)
    weight, bias = torch.randn(dim, width, device=device), torch.randn(dim, device=device)
    dout = torch.randn_like(x)

    def run():
        return torch.ops.causal_conv1d.bwd.default(x, weight, bias, dout, None, None, None, False, True)

    monkeypatch.setenv("CAUSAL_CONV1D_DETERMINISTIC", "1")
    first = run()
    for _ in range(3):
        again = run()
        for a, b in zip(first, again):
            assert torch.equal(a, b)
    monkeypatch.delenv("CAUSAL_CONV1D_DETERMINISTIC")
    prev = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        again = run()
    finally:
        torch.use_deterministic_algorithms(prev)
    for a, b in zip(first, again):
        assert torch.equal(a, b)
    assert os.environ.get("CAUSAL_CONV1D_DETERMINISTIC") is None


def test_cpu_bwd_independent_of_threads() -> None:
    x = torch.randn(3, 40, 1000)
    weight, bias = torch.randn(40, 4), torch.randn(40)
    dout = torch.randn_like(x)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = torch.ops.causal_conv1d.bwd.default(x, weight, bias, dout, None, None, None, False, False)
        torch.set_num_threads(max(2, threads))
        many = torch.ops.causal_conv1d.bwd.default(x, weight, bias, dout, None, None, None, False, False)
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(one, many):
        assert torch.equal(a, b)


def _leaf(t: Optional[torch.Tensor], requires_grad: bool = True) -> Optional[torch.Tensor]:
    return None if t is None else t.detach().clone().requires_grad_(requires_grad)


# Which outputs the loss uses (the C++ autograd gets the others undefined: set_materialize_grads(false)).
@pytest.mark.parametrize("used", ["out", "final", "both", "out.sum"])
@pytest.mark.parametrize("layout", ["cf", "cl"])
@pytest.mark.parametrize("init_grad", [False, True])
def test_autograd_partial_outputs(device: str, used: str, layout: str, init_grad: bool) -> None:
    batch, dim, seqlen, width = 2, 6, 9, 4
    x = make_bdl(batch, dim, seqlen, layout, torch.float32, device)
    weight = torch.randn(dim, width, device=device)
    init = torch.randn(batch, dim, width - 1, device=device)
    w_out, w_final = torch.randn(batch, dim, seqlen, device=device), torch.randn(batch, dim, width - 1, device=device)

    def loss_of(out: torch.Tensor, final: torch.Tensor) -> torch.Tensor:
        if used == "out.sum":  # dout arrives expanded (all strides 0): neither layout, made contiguous
            return out.sum()
        loss = out.new_zeros((), dtype=torch.float64)
        if used in ("out", "both"):
            loss = loss + (out.double() * w_out.double()).sum()
        if used in ("final", "both"):
            loss = loss + (final.double() * w_final.double()).sum()
        return loss

    grads = []
    for ours in (True, False):
        xl, wl, il = _leaf(x), _leaf(weight), _leaf(init, init_grad)
        if ours:
            out, final = causal_conv1d_fn(xl, wl, None, initial_states=il, return_final_states=True, activation="silu")
        else:
            out, final = fwd_ref(xl, wl, None, initial_states=il, silu=True)
        loss_of(out, final).backward()
        grads.append([xl.grad, wl.grad, il.grad])
    for name, g, r in zip(("dx", "dweight", "dinitial_states"), *grads):
        if r is None:  # not reached in the reference's graph (e.g. weight when only final is used)
            assert g is None or not g.any(), name
            continue
        torch.testing.assert_close(g.double(), r.double(), rtol=1e-4, atol=1e-4, msg=lambda m, n=name: f"{n}: {m}")


def test_autograd_node_and_outputs_are_not_views() -> None:
    x = make_bdl(2, 6, 9, "cl", torch.float32, "cpu")
    weight = torch.randn(6, 4)
    out, final = causal_conv1d_fn(x, weight, return_final_states=True)
    assert out.grad_fn is None and final.grad_fn is None  # nothing required grad: no node
    xl, wl = _leaf(x), _leaf(weight)
    out, final = causal_conv1d_fn(xl, wl, return_final_states=True)
    # the legacy op layer's C++ node (csrc/autograd.cpp), or the stable one's Python Function (_ops.py)
    node = "causal_conv1d::FwdBackward" if OP_LAYER == "legacy" else "CausalConv1dFwdBackward"
    assert out.grad_fn is not None and node in out.grad_fn.name()
    # The channel-last outputs are allocated with their strides, not views of a transposed buffer:
    # in-place ops on them work (autograd rejects in-place ops on views created in a custom forward).
    assert out._base is None and final._base is None
    out.mul_(2)
    final.add_(1)
    (out.sum() + final.sum()).backward()
    xr, wr = _leaf(x), _leaf(weight)
    out_r, final_r = fwd_ref(xr, wr)
    (2 * out_r.sum() + final_r.sum()).backward()
    torch.testing.assert_close(xl.grad, xr.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(wl.grad, wr.grad, rtol=1e-4, atol=1e-4)
    with torch.no_grad():
        assert causal_conv1d_fn(xl, wl).grad_fn is None
