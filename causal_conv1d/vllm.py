"""A drop-in for ``vllm.model_executor.layers.mamba.ops.causal_conv1d``: vLLM's function names,
argument names, order and defaults, on this package's serving ops (docs/serving.md).

::

    from causal_conv1d.vllm import PAD_SLOT_ID, causal_conv1d_fn, causal_conv1d_update

Every argument means what it means in vLLM (the live window of a cache line is its first
``width - 1`` entries, prefix caching, speculative decoding with ``num_accepted_tokens``, ragged
batches with ``query_start_loc``, tree drafts with ``retrieve_parent_token``), so these functions and
vLLM's kernels can be mixed on one cache. Differences, all on the side of doing more:

* ``metadata`` (vLLM's host-built ``compute_causal_conv1d_metadata``) is accepted and not needed:
  the kernels split the work on the device, so nothing is built on the host and a call without it
  does not synchronise either.
* ``validate_data=True`` checks every index value on the host (``validate=True`` of
  :mod:`causal_conv1d.varlen`); shapes, dtypes and devices are always checked.
* Every layout and stride of x and the cache; widths 2..8 (tree drafts included); index tensors
  longer than the batch.
* An argument these ops cannot honour raises instead of being ignored: an unknown ``activation``
  string (vLLM's prefill treats it as no activation), prefix-caching tensors without
  ``block_idx_last_scheduled_token``.

x of any dtype is cast to the cache's dtype and the result returned in x's dtype, as vLLM does.
``pad_slot_id=None`` (vLLM: no padding check) means no index value skips a request.
"""

from __future__ import annotations

from typing import Optional, Union

import torch

from causal_conv1d.causal_conv1d_interface import _invalid_activation
from causal_conv1d.varlen import PAD_SLOT_ID, causal_conv1d_update_spec, causal_conv1d_varlen_fn

__all__ = ["PAD_SLOT_ID", "causal_conv1d_fn", "causal_conv1d_update"]

Tensor = torch.Tensor

# pad_slot_id=None: a value no int32 index equals (the ops compare as int64)
_NO_PAD_SLOT = -(2**31) - 1
_OP_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _activation(activation: Union[bool, str, None]) -> Optional[str]:
    """vLLM's activation argument (True = SiLU, False/None = none, "silu"/"swish") as the ops' string."""
    if isinstance(activation, bool):
        return "silu" if activation else None
    if activation is None or activation in ("silu", "swish"):
        return activation
    raise _invalid_activation(activation)


def _pad(pad_slot_id: Optional[int]) -> int:
    return _NO_PAD_SLOT if pad_slot_id is None else int(pad_slot_id)


def _op_input(x: Tensor, state: Tensor) -> Tensor:
    """x as the ops take it: they cast a float32/16/bf16 x (and float64 on the CPU) to the cache's dtype
    themselves; another dtype is cast here, as vLLM casts every x."""
    if x.dtype in _OP_DTYPES or (x.dtype == torch.float64 and x.device.type == "cpu"):
        return x
    return x.to(state.dtype)


def causal_conv1d_fn(
    x: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    conv_states: Tensor,
    query_start_loc: Tensor,
    cache_indices: Optional[Tensor] = None,
    has_initial_state: Optional[Tensor] = None,
    activation: Union[bool, str, None] = "silu",
    pad_slot_id: Optional[int] = PAD_SLOT_ID,
    block_idx_first_scheduled_token: Optional[Tensor] = None,
    block_idx_last_scheduled_token: Optional[Tensor] = None,
    initial_state_idx: Optional[Tensor] = None,
    num_computed_tokens: Optional[Tensor] = None,
    block_size_to_align: int = 0,
    metadata: object = None,
    validate_data: bool = False,
) -> Tensor:
    """vLLM's ``causal_conv1d_fn``: the prefill over a packed batch, x (dim, cu_seq_len); out has x's shape
    and dtype. :func:`causal_conv1d.varlen.causal_conv1d_varlen_fn` documents the arguments;
    ``metadata`` is not needed (module docstring)."""
    del metadata  # vLLM's host-built launch plan; the kernels plan on the device
    xin = _op_input(x, conv_states)
    out = causal_conv1d_varlen_fn(
        xin,
        weight,
        bias,
        conv_states,
        query_start_loc,
        cache_indices,
        has_initial_state,
        _activation(activation),
        _pad(pad_slot_id),
        block_idx_first_scheduled_token=block_idx_first_scheduled_token,
        block_idx_last_scheduled_token=block_idx_last_scheduled_token,
        initial_state_idx=initial_state_idx,
        num_computed_tokens=num_computed_tokens,
        block_size_to_align=0 if block_size_to_align is None else int(block_size_to_align),
        validate=validate_data,
    )
    return out if xin is x else out.to(x.dtype)


def causal_conv1d_update(
    x: Tensor,
    conv_state: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    activation: Union[bool, str, None] = None,
    conv_state_indices: Optional[Tensor] = None,
    num_accepted_tokens: Optional[Tensor] = None,
    query_start_loc: Optional[Tensor] = None,
    max_query_len: int = -1,
    pad_slot_id: Optional[int] = PAD_SLOT_ID,
    block_idx_last_scheduled_token: Optional[Tensor] = None,
    initial_state_idx: Optional[Tensor] = None,
    retrieve_parent_token: Optional[Tensor] = None,
    validate_data: bool = False,
) -> Tensor:
    """vLLM's ``causal_conv1d_update``: the decode step, x (batch, dim), (batch, dim, seqlen) or with
    query_start_loc (num_tokens, dim); out has x's shape and dtype.
    :func:`causal_conv1d.varlen.causal_conv1d_update_spec` documents the arguments. As in vLLM, with
    query_start_loc the batch is ``conv_state_indices.shape[0]`` (a longer query_start_loc is cut to
    batch + 1 entries), and max_query_len is read only with query_start_loc."""
    if query_start_loc is not None and conv_state_indices is not None:
        batch = conv_state_indices.shape[0]
        if query_start_loc.dim() == 1 and query_start_loc.shape[0] > batch + 1:
            query_start_loc = query_start_loc[: batch + 1]
    xin = _op_input(x, conv_state)
    out = causal_conv1d_update_spec(
        xin,
        conv_state,
        weight,
        bias,
        _activation(activation),
        conv_state_indices,
        num_accepted_tokens,
        _pad(pad_slot_id),
        query_start_loc=query_start_loc,
        max_query_len=int(max_query_len) if query_start_loc is not None else -1,
        block_idx_last_scheduled_token=block_idx_last_scheduled_token,
        initial_state_idx=initial_state_idx,
        retrieve_parent_token=retrieve_parent_token,
        validate=validate_data,
    )
    return out if xin is x else out.to(x.dtype)
