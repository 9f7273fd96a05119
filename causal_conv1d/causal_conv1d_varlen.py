"""``causal_conv1d_varlen_states``: the conv states of packed variable-length sequences.

Upstream implements it with Triton; here it is a few vectorised torch ops (any device).
"""

from __future__ import annotations

import torch

__all__ = ["causal_conv1d_varlen_states", "causal_conv1d_varlen_states_ref"]

Tensor = torch.Tensor


def _check(x: Tensor, cu_seqlens: Tensor, state_len: int) -> None:
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D (total_tokens, dim), got shape {tuple(x.shape)}")
    if cu_seqlens.dim() != 1 or cu_seqlens.shape[0] < 1:
        raise ValueError(f"cu_seqlens must be 1-D (num_seqs + 1,), got shape {tuple(cu_seqlens.shape)}")
    if cu_seqlens.dtype.is_floating_point or cu_seqlens.dtype == torch.bool:
        raise TypeError(f"cu_seqlens must be an integer tensor, got {cu_seqlens.dtype}")
    if isinstance(state_len, bool) or not isinstance(state_len, int) or state_len < 0:
        raise ValueError(f"state_len must be a non-negative int, got {state_len!r}")


def causal_conv1d_varlen_states(x: Tensor, cu_seqlens: Tensor, state_len: int) -> Tensor:
    """The last ``state_len`` tokens of each sequence, zero-filled when a sequence is shorter.

    x: (total_tokens, dim); cu_seqlens: (num_seqs + 1,) sorted cumulative lengths starting at 0.
    Returns (num_seqs, dim, state_len), channel-last in memory like upstream. Forward only.
    """
    _check(x, cu_seqlens, state_len)
    total, dim = x.shape
    batch = cu_seqlens.shape[0] - 1
    cu = cu_seqlens.to(device=x.device, dtype=torch.long)
    ends = cu[1:]
    starts = torch.maximum(cu[:-1], ends - state_len)
    token = (
        ends.unsqueeze(1) - state_len + torch.arange(state_len, device=x.device, dtype=torch.long)
    )  # (batch, state_len)
    valid = token >= starts.unsqueeze(1)
    if total == 0:
        return x.new_zeros((batch, state_len, dim)).transpose(1, 2)
    gathered = x[token.clamp(0, total - 1)]  # (batch, state_len, dim)
    states = torch.where(valid.unsqueeze(-1), gathered, gathered.new_zeros(()))
    return states.transpose(1, 2)


def causal_conv1d_varlen_states_ref(x: Tensor, cu_seqlens: Tensor, state_len: int) -> Tensor:
    """Reference ``causal_conv1d_varlen_states``: one sequence at a time."""
    _check(x, cu_seqlens, state_len)
    _, dim = x.shape
    batch = cu_seqlens.shape[0] - 1
    states = torch.zeros(batch, state_len, dim, dtype=x.dtype, device=x.device).transpose(1, 2)
    for i in range(batch):
        end = int(cu_seqlens[i + 1])
        start = max(int(cu_seqlens[i]), end - state_len)
        if end > start:
            states[i, :, state_len - (end - start) :] = x[start:end].T
    return states
