"""``import causal_conv1d_cuda`` (upstream's extension-module names, in-place outputs) works."""

from __future__ import annotations

import pytest
import torch

import causal_conv1d_cuda
from causal_conv1d.causal_conv1d_interface import causal_conv1d_ref, causal_conv1d_update_ref


@pytest.mark.parametrize("silu", [False, True])
def test_fwd_bwd_update_write_into_outputs(silu: bool) -> None:
    torch.manual_seed(0)
    b, d, seqlen, w = 2, 8, 33, 4
    x = torch.randn(b, d, seqlen, dtype=torch.float64)
    weight = torch.randn(d, w, dtype=torch.float64)
    bias = torch.randn(d, dtype=torch.float64)
    act = "silu" if silu else None

    out = torch.full_like(x, float("nan"))
    final = torch.full((b, d, w - 1), float("nan"), dtype=x.dtype)
    causal_conv1d_cuda.causal_conv1d_fwd(x, weight, bias, None, None, out, final, silu)
    ref, ref_final = causal_conv1d_ref(x, weight, bias, return_final_states=True, activation=act)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(final, ref_final)

    xr = x.clone().requires_grad_()
    wr = weight.clone().requires_grad_()
    br = bias.clone().requires_grad_()
    dout = torch.randn_like(x)
    causal_conv1d_ref(xr, wr, br, activation=act).backward(dout)
    dx, dweight, dbias = (torch.full_like(t, float("nan")) for t in (x, weight, bias))
    causal_conv1d_cuda.causal_conv1d_bwd(x, weight, bias, dout, None, None, None, dx, dweight, dbias, None, silu)
    torch.testing.assert_close(dx, xr.grad)
    torch.testing.assert_close(dweight, wr.grad)
    torch.testing.assert_close(dbias, br.grad)

    state = torch.randn(b, d, w - 1, dtype=x.dtype)
    state_ref = state.clone()
    xt = torch.randn(b, d, dtype=x.dtype)
    out_t = torch.full_like(xt, float("nan"))
    causal_conv1d_cuda.causal_conv1d_update(xt, state, weight, bias, out_t, silu, None, None)
    torch.testing.assert_close(out_t, causal_conv1d_update_ref(xt, state_ref, weight, bias, activation=act))
    torch.testing.assert_close(state, state_ref)


def test_dbias_without_bias_is_a_clear_error() -> None:
    x = torch.randn(1, 4, 8, dtype=torch.float64)
    weight = torch.randn(4, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="dbias was given but bias is None"):
        causal_conv1d_cuda.causal_conv1d_bwd(
            x,
            weight,
            None,
            torch.randn_like(x),
            None,
            None,
            None,
            torch.empty_like(x),
            torch.empty_like(weight),
            torch.empty(4, dtype=x.dtype),
            None,
            False,
        )
