"""torch.library.opcheck for each op, and torch.compile(fullgraph=True) through the Python API."""

from __future__ import annotations

import pytest
import torch
from _cc1d_ref import fp32_inputs, make_bdl, make_seq_idx

from causal_conv1d import causal_conv1d_fn, causal_conv1d_update


def _fwd_args(device: str, layout: str, variant: str) -> tuple:
    batch, dim, seqlen, width = 2, 6, 11, 4
    x = make_bdl(batch, dim, seqlen, layout, torch.float32, device).requires_grad_()
    weight = torch.randn(dim, width, device=device, requires_grad=True)
    bias = torch.randn(dim, device=device, requires_grad=True)
    if variant == "seq_idx":
        return (x, weight, bias, make_seq_idx(batch, seqlen, device), None, False, True)
    if variant == "states":
        init = torch.randn(batch, dim, width - 1, device=device, requires_grad=True)
        return (x, weight, bias, None, init, True, True)
    return (x, weight, None, None, None, False, False)


@pytest.mark.parametrize("layout", ["cf", "cl"])
@pytest.mark.parametrize("variant", ["plain", "seq_idx", "states"])
def test_opcheck_fwd(device: str, layout: str, variant: str) -> None:
    torch.library.opcheck(torch.ops.causal_conv1d.fwd.default, _fwd_args(device, layout, variant))


@pytest.mark.parametrize("layout", ["cf", "cl"])
@pytest.mark.parametrize("states", [False, True])
def test_opcheck_bwd(device: str, layout: str, states: bool) -> None:
    batch, dim, seqlen, width = 2, 6, 11, 3
    x, weight, bias = fp32_inputs(batch, dim, seqlen, layout, width, device)
    dout = torch.randn(batch, dim, seqlen, device=device)
    init = torch.randn(batch, dim, width - 1, device=device) if states else None
    dfinal = torch.randn(batch, dim, width - 1, device=device) if states else None
    torch.library.opcheck(
        torch.ops.causal_conv1d.bwd.default, (x, weight, bias, dout, None, init, dfinal, states, True)
    )


@pytest.mark.parametrize("circular", [False, True])
def test_opcheck_update(device: str, circular: bool) -> None:
    batch, dim, width, state_len = 3, 6, 4, 5
    x = torch.randn(batch, dim, 2, device=device)
    conv_state = torch.randn(4, dim, state_len, device=device)
    weight, bias = torch.randn(dim, width, device=device), torch.randn(dim, device=device)
    cache_seqlens = torch.tensor([1, 7, 0], dtype=torch.int32, device=device) if circular else None
    indices = torch.tensor([3, -1, 0], dtype=torch.int32, device=device)
    torch.library.opcheck(
        torch.ops.causal_conv1d.update.default, (x, conv_state, weight, bias, True, cache_seqlens, indices)
    )


def test_opcheck_update_2d_x(device: str) -> None:
    """The update op takes one token as x (batch, dim) and returns (batch, dim): the decode call needs
    no views. opcheck compares the fake kernel's output with the real one's."""
    batch, dim, width = 3, 16, 4
    x = torch.randn(batch, dim, device=device)
    conv_state = torch.randn(batch, dim, width - 1, device=device)
    weight, bias = torch.randn(dim, width, device=device), torch.randn(dim, device=device)
    out = torch.ops.causal_conv1d.update.default(x, conv_state.clone(), weight, bias, True, None, None)
    assert out.shape == (batch, dim) and out.is_contiguous()
    torch.library.opcheck(torch.ops.causal_conv1d.update.default, (x, conv_state, weight, bias, True, None, None))


@pytest.mark.parametrize("layout", ["cf", "cl"])
def test_compile_fullgraph(device: str, layout: str, compile_backend: str) -> None:
    batch, dim, seqlen, width = 2, 8, 17, 4
    x = make_bdl(batch, dim, seqlen, layout, torch.float32, device).requires_grad_()
    weight = torch.randn(dim, width, device=device, requires_grad=True)
    bias = torch.randn(dim, device=device, requires_grad=True)
    init = torch.randn(batch, dim, width - 1, device=device, requires_grad=True)

    def f(x, weight, bias, init):
        out, final = causal_conv1d_fn(x, weight, bias, initial_states=init, return_final_states=True, activation="silu")
        return (out * 2).sum() + final.square().sum()

    compiled = torch.compile(f, fullgraph=True, backend=compile_backend)
    eager_loss = f(x, weight, bias, init)
    eager_grads = torch.autograd.grad(eager_loss, (x, weight, bias, init))
    loss = compiled(x, weight, bias, init)
    grads = torch.autograd.grad(loss, (x, weight, bias, init))
    torch.testing.assert_close(loss, eager_loss)
    for g, e in zip(grads, eager_grads):
        torch.testing.assert_close(g, e)


def test_compile_update_fullgraph(device: str) -> None:
    torch._dynamo.reset()
    batch, dim, width = 2, 8, 4
    weight, bias = torch.randn(dim, width, device=device), torch.randn(dim, device=device)
    state_a = torch.randn(batch, dim, width - 1, device=device)
    state_b = state_a.clone()
    x = torch.randn(batch, dim, device=device)
    compiled = torch.compile(causal_conv1d_update, fullgraph=True, backend="aot_eager")
    out = compiled(x, state_a, weight, bias, "silu")
    ref = causal_conv1d_update(x, state_b, weight, bias, "silu")
    torch.testing.assert_close(out, ref)
    assert torch.equal(state_a, state_b), "the in-place state update survives functionalization"
