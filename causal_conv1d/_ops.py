"""Fake (meta) kernels for the ``torch.ops.causal_conv1d`` ops.

The schemas live in csrc/ops.cpp; the CPU and CUDA kernels in csrc/cpu and csrc/cuda; the autograd
of ``fwd`` in csrc/autograd.cpp (C++: a Python autograd kernel cost microseconds on every call,
gradient or not; issue 8). The fake kernels allocate outputs exactly as the real ones do
(csrc/checks.h, ``empty_bdl``): in x's layout, channel-last when ``x.stride(1) == 1 and
x.stride(2) != 1``, else channel-first.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

__all__ = ["is_channel_last", "empty_bdl"]

Tensor = torch.Tensor


def is_channel_last(x: Tensor) -> bool:
    """Whether x (batch, dim, seqlen) is channel-last (the rule of csrc/checks.h)."""
    return x.stride(2) != 1 and x.stride(1) == 1


def empty_bdl(
    batch: Any, dim: Any, seqlen: Any, channel_last: bool, like: Tensor, dtype: Optional[torch.dtype] = None
) -> Tensor:
    """A new (batch, dim, seqlen) tensor in the given layout (mirrors ``empty_bdl`` in checks.h)."""
    dtype = like.dtype if dtype is None else dtype
    if channel_last:
        return like.new_empty((batch, seqlen, dim), dtype=dtype).transpose(1, 2)
    return like.new_empty((batch, dim, seqlen), dtype=dtype)


@torch.library.register_fake("causal_conv1d::fwd")
def _fwd_fake(
    x: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    seq_idx: Optional[Tensor],
    initial_states: Optional[Tensor],
    return_final_states: bool,
    silu: bool,
) -> tuple[Tensor, Tensor]:
    batch, dim, seqlen = x.shape
    width = weight.shape[1]
    channel_last = is_channel_last(x)
    out = empty_bdl(batch, dim, seqlen, channel_last, x)
    final_states = empty_bdl(batch, dim, width - 1, channel_last, x) if return_final_states else x.new_empty((0,))
    return out, final_states


@torch.library.register_fake("causal_conv1d::bwd")
def _bwd_fake(
    x: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    dout: Tensor,
    seq_idx: Optional[Tensor],
    initial_states: Optional[Tensor],
    dfinal_states: Optional[Tensor],
    return_dinitial_states: bool,
    silu: bool,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    batch, dim, seqlen = x.shape
    width = weight.shape[1]
    channel_last = is_channel_last(x)
    dx = empty_bdl(batch, dim, seqlen, channel_last, x)
    dweight = weight.new_empty((dim, width))
    dbias = bias.new_empty((dim,)) if bias is not None else weight.new_empty((0,))
    if return_dinitial_states:
        dinitial_states = empty_bdl(batch, dim, width - 1, channel_last, x)
    else:
        dinitial_states = x.new_empty((0,))
    return dx, dweight, dbias, dinitial_states


@torch.library.register_fake("causal_conv1d::update")
def _update_fake(
    x: Tensor,
    conv_state: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    silu: bool,
    cache_seqlens: Optional[Tensor],
    conv_state_indices: Optional[Tensor],
) -> Tensor:
    if x.dim() == 2:  # one token, (batch, dim): out (batch, dim), contiguous like the kernels'
        return x.new_empty(x.shape)
    batch, dim, seqlen = x.shape
    return empty_bdl(batch, dim, seqlen, is_channel_last(x), x)
