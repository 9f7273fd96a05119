"""causal_conv1d_update: shift and circular buffers, conv_state_indices, against float64 references."""

from __future__ import annotations

import pytest
import torch
from _cc1d_ref import tol

from causal_conv1d import causal_conv1d_update
from causal_conv1d._reference import update_ref
from causal_conv1d.causal_conv1d_interface import causal_conv1d_update_ref
from causal_conv1d.cpp_functions import causal_conv1d_update_function

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.mark.parametrize("width", [2, 3, 4, 8])
@pytest.mark.parametrize("extra_state", [0, 1, 5])
@pytest.mark.parametrize("seqlen", [None, 1, 2, 7])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("silu", [False, True])
def test_update_shift(device: str, width: int, extra_state: int, seqlen, dtype: torch.dtype, silu: bool) -> None:
    batch, dim = 3, 24
    state_len = width - 1 + extra_state
    x = (
        torch.randn(batch, dim, device=device, dtype=dtype)
        if seqlen is None
        else torch.randn(batch, dim, seqlen, device=device, dtype=dtype)
    )
    conv_state = torch.randn(batch, dim, state_len, device=device, dtype=dtype)
    weight = torch.randn(dim, width, device=device)
    bias = torch.randn(dim, device=device)
    expected_state = conv_state.clone()
    x3 = x.unsqueeze(-1) if seqlen is None else x
    ref = update_ref(x3, expected_state, weight, bias, silu, None)
    out = causal_conv1d_update(x, conv_state, weight, bias, activation="silu" if silu else None)
    assert out.shape == x.shape and out.dtype == dtype
    torch.testing.assert_close(out.double(), ref.reshape(out.shape), **tol(dtype, torch.float32))
    assert torch.equal(conv_state, expected_state), "conv_state must be updated bit-exactly"


@pytest.mark.parametrize("width", [2, 4, 6])
@pytest.mark.parametrize("state_len_extra", [0, 3, 9])
@pytest.mark.parametrize("seqlen", [1, 3, 12])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_update_circular(device: str, width: int, state_len_extra: int, seqlen: int, dtype: torch.dtype) -> None:
    batch, dim = 4, 16
    state_len = width - 1 + state_len_extra
    x = torch.randn(batch, dim, seqlen, device=device, dtype=dtype)
    conv_state = torch.randn(batch, dim, state_len, device=device, dtype=dtype)
    weight, bias = torch.randn(dim, width, device=device), torch.randn(dim, device=device)
    cache_seqlens = torch.tensor([0, 1, state_len + 2, 5 * state_len + 3], dtype=torch.int32, device=device)
    expected_state = conv_state.clone()
    ref = update_ref(x, expected_state, weight, bias, True, cache_seqlens)
    out = causal_conv1d_update(x, conv_state, weight, bias, "silu", cache_seqlens)
    torch.testing.assert_close(out.double(), ref, **tol(dtype, torch.float32))
    assert torch.equal(conv_state, expected_state)


@pytest.mark.parametrize("with_cache_seqlens", [False, True])
@pytest.mark.parametrize("seqlen", [None, 3])
def test_update_conv_state_indices(device: str, with_cache_seqlens: bool, seqlen) -> None:
    batch, dim, width, state_len, cache_rows = 4, 8, 4, 6, 7
    x = torch.randn(batch, dim, device=device) if seqlen is None else torch.randn(batch, dim, seqlen, device=device)
    cache = torch.randn(cache_rows, dim, state_len, device=device)
    weight, bias = torch.randn(dim, width, device=device), torch.randn(dim, device=device)
    indices = torch.tensor([5, -1, 0, 2], dtype=torch.int32, device=device)
    cache_seqlens = torch.tensor([3, 9, 0, 14], dtype=torch.int32, device=device) if with_cache_seqlens else None
    expected = cache.clone()
    out = causal_conv1d_update(x, cache, weight, bias, None, cache_seqlens, indices)
    x3 = x.unsqueeze(-1) if seqlen is None else x
    for b, row in enumerate(indices.tolist()):
        if row < 0:
            assert torch.all(out[b] == 0), "a negative index (padding slot) gives a zero output"
            continue
        state = expected[row : row + 1]
        ref = update_ref(
            x3[b : b + 1], state, weight, bias, False, None if cache_seqlens is None else cache_seqlens[b : b + 1]
        )
        torch.testing.assert_close(out[b].double(), ref[0].reshape(out[b].shape), rtol=1e-5, atol=1e-5)
    assert torch.equal(cache, expected), "rows not selected (and the padding slot) are untouched"


def test_update_matches_upstream_ref(device: str) -> None:
    batch, dim, width, state_len = 2, 12, 4, 7
    x = torch.randn(batch, dim, 3, device=device)
    weight, bias = torch.randn(dim, width, device=device), torch.randn(dim, device=device)
    for cache_seqlens in (None, torch.tensor([2, 11], dtype=torch.int32, device=device)):
        state_a = torch.randn(batch, dim, state_len, device=device)
        state_b = state_a.clone()
        out = causal_conv1d_update(x, state_a, weight, bias, "swish", cache_seqlens)
        ref = causal_conv1d_update_ref(x, state_b, weight, bias, "swish", cache_seqlens)
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
        assert torch.equal(state_a, state_b)


def test_update_strided_inputs(device: str) -> None:
    batch, dim, width, state_len, seqlen = 3, 10, 3, 5, 2
    x = torch.randn(batch, seqlen, 2 * dim, device=device)[:, :, ::2].transpose(1, 2)  # no unit stride
    big_state = torch.randn(batch, state_len, 2 * dim, device=device)
    conv_state = big_state[:, :, :dim].transpose(1, 2)  # a view into a bigger buffer
    weight = torch.randn(width, dim, device=device).t()
    expected = conv_state.clone()
    ref = update_ref(x, expected, weight, None, False, None)
    out = causal_conv1d_update_function(x, conv_state, weight, None, False, None, None)
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)
    assert torch.equal(conv_state, expected)
    assert torch.equal(big_state[:, :, dim:], big_state[:, :, dim:].clone())


def test_decode_continues_prefill(device: str) -> None:
    # fwd with final states, then token-by-token update, equals one fwd over everything.
    batch, dim, width = 2, 16, 4
    x = torch.randn(batch, dim, 40, device=device)
    weight, bias = torch.randn(dim, width, device=device), torch.randn(dim, device=device)
    from causal_conv1d import causal_conv1d_fn

    whole = causal_conv1d_fn(x, weight, bias, activation="silu")
    _, state = causal_conv1d_fn(x[..., :30], weight, bias, return_final_states=True, activation="silu")
    state = state.contiguous()
    steps = [causal_conv1d_update(x[..., t], state, weight, bias, "silu") for t in range(30, 40)]
    torch.testing.assert_close(torch.stack(steps, -1), whole[..., 30:], rtol=1e-5, atol=1e-5)
