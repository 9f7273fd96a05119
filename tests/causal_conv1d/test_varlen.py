"""causal_conv1d_varlen_states against its one-sequence-at-a-time reference."""

from __future__ import annotations

import pytest
import torch

from causal_conv1d.causal_conv1d_varlen import causal_conv1d_varlen_states, causal_conv1d_varlen_states_ref


@pytest.mark.parametrize("state_len", [1, 3, 4, 9])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_varlen_states(device: str, state_len: int, dtype: torch.dtype) -> None:
    lengths = [5, 1, 0, 12, 3, 4]
    cu_seqlens = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32, device=device)
    x = torch.randn(sum(lengths), 20, device=device, dtype=dtype)
    out = causal_conv1d_varlen_states(x, cu_seqlens, state_len)
    ref = causal_conv1d_varlen_states_ref(x, cu_seqlens, state_len)
    assert out.shape == (len(lengths), 20, state_len) and out.dtype == dtype
    assert torch.equal(out, ref)
    assert out.stride(1) == 1  # channel-last in memory, like upstream


def test_varlen_states_empty(device: str) -> None:
    x = torch.randn(0, 4, device=device)
    out = causal_conv1d_varlen_states(x, torch.tensor([0, 0], device=device), 3)
    assert out.shape == (1, 4, 3) and torch.all(out == 0)


@pytest.mark.parametrize(
    "x_shape, cu, state_len, exc, match",
    [
        ((5,), [0, 5], 2, ValueError, "x must be 2-D"),  # x 1-D
        ((5, 4), [[0, 5]], 2, ValueError, "cu_seqlens must be 1-D"),  # cu_seqlens 2-D
        ((5, 4), [0.0, 5.0], 2, TypeError, "cu_seqlens must be an integer tensor"),  # float offsets
        ((5, 4), [0, 5], -1, ValueError, "state_len must be a non-negative int"),  # negative state_len
    ],
)
def test_varlen_errors(x_shape, cu, state_len, exc, match) -> None:
    with pytest.raises(exc, match=match):
        causal_conv1d_varlen_states(torch.randn(*x_shape), torch.tensor(cu), state_len)
