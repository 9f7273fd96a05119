"""Serving API: packed variable-length prefill over a state cache, and the speculative-decoding update.

Continuous-batching engines (vLLM, SGLang) keep one conv state per request in a cache tensor and run
(a) a *prefill* over a packed batch of new prompts (no padding) and (b) a *decode* step over one or
a few new tokens per request. The argument names follow vLLM's ``causal_conv1d_fn`` /
``causal_conv1d_update`` (``vllm/model_executor/layers/mamba/ops/causal_conv1d.py``) where they mean
the same thing: ``conv_states``, ``query_start_loc``, ``cache_indices``, ``has_initial_state``,
``conv_state_indices``, ``num_accepted_tokens``, ``pad_slot_id``.

Both functions are torch ops (``torch.ops.causal_conv1d.varlen_fwd`` / ``spec_update``) with fake
kernels: ``torch.compile(fullgraph=True)`` traces them, and they are one kernel launch each with no
host synchronisation on CUDA (CUDA-graph capturable). Forward only (inference); no autograd.

Conventions
-----------
* ``x`` of the prefill is ``(dim, total_tokens)``, the sequences concatenated along the token axis,
  channel-first (``x.stride(1) == 1``) or channel-last (``x.stride(0) == 1``: a ``(total_tokens, dim)``
  tensor passed as ``x.T``, a free view). ``out`` has x's shape and layout.
* ``query_start_loc`` (``cu_seqlens``): int32 ``(batch + 1,)``, non-decreasing; sequence ``i`` is
  tokens ``[query_start_loc[i], query_start_loc[i + 1])``. Tokens after ``query_start_loc[-1]`` (a
  padded tail, e.g. for a CUDA graph of fixed size) belong to no sequence: their output is 0.
* State cache ``conv_states``: ``(num_cache_lines, dim, state_len)`` with ``state_len >= width - 1``,
  x's dtype; any strides, so a ``(num_cache_lines, state_len, dim)`` buffer works as
  ``buf.transpose(1, 2)``. A cache line holds the last ``state_len`` inputs of its sequence, oldest first.
* ``cache_indices`` (int32 ``(batch,)``): the cache line of each sequence (None: line ``i`` for sequence
  ``i``). A sequence whose index equals ``pad_slot_id`` is skipped: its output is 0 and no cache line
  is read or written. Two sequences must not share a cache line.

Checks: shapes, dtypes and devices are checked on the host (ValueError / TypeError naming the
argument). The *values* of the index tensors live on the device: the CPU kernels check them (they
are on the host anyway); the CUDA kernels do not synchronise to look. On CUDA a cache index outside
``[0, num_cache_lines)`` is skipped like ``pad_slot_id`` (never an out-of-bounds access), a
``num_accepted_tokens`` value is clamped into ``[1, seqlen]``, and ``query_start_loc`` values are
clamped into ``[0, total_tokens]``; pass ``validate=True`` to check all values on the host first
(one device-to-host copy: not for CUDA-graph capture).
"""

from __future__ import annotations

from typing import Optional

import torch

from causal_conv1d._errors import reraise
from causal_conv1d.causal_conv1d_interface import _invalid_activation

__all__ = [
    "PAD_SLOT_ID",
    "causal_conv1d_varlen_fn",
    "causal_conv1d_update_spec",
    "causal_conv1d_varlen_ref",
    "causal_conv1d_update_spec_ref",
]

Tensor = torch.Tensor

#: vLLM's value: a cache index equal to ``pad_slot_id`` marks a padded (skipped) batch entry.
PAD_SLOT_ID = -1

_SILU = {None: False, "silu": True, "swish": True}
_varlen_fwd = torch.ops.causal_conv1d.varlen_fwd.default
_spec_update = torch.ops.causal_conv1d.spec_update.default
# Eager calls go through the C++ callables behind OpOverload.__call__ (one Python frame less); a
# torch.compile trace must see the OpOverloads.
_varlen_fwd_op = _varlen_fwd._op
_spec_update_op = _spec_update._op
_is_compiling = torch.compiler.is_compiling


def _silu(activation: Optional[str]) -> bool:
    try:
        return _SILU[activation]
    except (KeyError, TypeError):
        raise _invalid_activation(activation) from None


def _validate_slots(idx: Optional[Tensor], rows: int, pad_slot_id: int, name: str, cache_name: str) -> None:
    if idx is None:
        return
    v = idx.cpu()
    bad = ~((v == pad_slot_id) | ((v >= 0) & (v < rows)))
    if bool(bad.any()):
        i = int(bad.nonzero()[0, 0])
        raise ValueError(
            f"{name}[{i}] = {int(v[i])} is out of range for {cache_name} with {rows} cache lines "
            f"(pad_slot_id = {pad_slot_id} skips a sequence)"
        )


def causal_conv1d_varlen_fn(
    x: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    conv_states: Tensor,
    query_start_loc: Tensor,
    cache_indices: Optional[Tensor] = None,
    has_initial_state: Optional[Tensor] = None,
    activation: Optional[str] = "silu",
    pad_slot_id: int = PAD_SLOT_ID,
    validate: bool = False,
) -> Tensor:
    """Causal conv1d over a packed batch of variable-length sequences; returns ``out`` (x's shape).

    x: (dim, total_tokens), channel-first or channel-last (see the module docstring);
    weight: (dim, width), width 2..8; bias: (dim,) or None;
    conv_states: (num_cache_lines, dim, state_len >= width - 1), **updated in place**;
    query_start_loc: int32 (batch + 1,), the start of each sequence and the end of the last;
    cache_indices: int32 (batch,) cache line per sequence, or None (line i for sequence i);
    has_initial_state: bool (batch,) (int32 accepted: nonzero = true), or None (all false);
    activation: None, "silu" or "swish" (vLLM's default "silu");
    pad_slot_id: a cache index with this value skips its sequence (output 0, cache untouched).

    For sequence i with tokens ``x_i`` (dim, len_i) and cache line ``c = cache_indices[i]``:
      * the initial state is ``conv_states[c, :, -(width - 1):]`` when ``has_initial_state[i]``, else zeros;
      * ``out_i = act(bias + causal_conv1d(cat(initial state, x_i)))[..., width - 1:]``;
      * afterwards ``conv_states[c] = cat(conv_states[c] if has_initial_state[i] else zeros, x_i)[:, -state_len:]``,
        i.e. the last ``state_len`` inputs (older cache entries shift in when len_i < state_len).
    A sequence of length 0 leaves its cache line untouched.
    validate: check the index values on the host first (see the module docstring).
    """
    silu = _silu(activation)
    if validate:
        q = query_start_loc.cpu().long() if query_start_loc.dtype == torch.int32 else None
        if q is not None and q.numel() >= 1:
            if int(q[0]) < 0 or bool((q[1:] < q[:-1]).any()) or int(q[-1]) > x.shape[-1]:
                raise ValueError(
                    f"query_start_loc must be non-decreasing from >= 0 to <= total_tokens (x.shape[1]) = "
                    f"{x.shape[-1]}, got {q.tolist()}"
                )
        if cache_indices is not None and cache_indices.dtype == torch.int32:
            _validate_slots(cache_indices, conv_states.shape[0], pad_slot_id, "cache_indices", "conv_states")
    try:
        return (_varlen_fwd if _is_compiling() else _varlen_fwd_op)(
            x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state, silu, int(pad_slot_id)
        )
    except RuntimeError as exc:
        reraise(exc)


def causal_conv1d_update_spec(
    x: Tensor,
    conv_state: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    activation: Optional[str] = None,
    conv_state_indices: Optional[Tensor] = None,
    num_accepted_tokens: Optional[Tensor] = None,
    pad_slot_id: int = PAD_SLOT_ID,
    validate: bool = False,
) -> Tensor:
    """Decoding step over ``seqlen`` new tokens per sequence (speculative decoding); ``out`` has x's shape.

    x: (batch, dim) or (batch, dim, seqlen), channel-first or channel-last; for speculative decoding
    seqlen = 1 + the number of draft tokens;
    conv_state: (num_cache_lines, dim, state_len), **updated in place**; any strides, so a
    (num_cache_lines, state_len, dim) buffer works as ``buf.transpose(1, 2)``;
    conv_state_indices: int32 (batch,) cache line per sequence, or None (line b for row b; then
    conv_state has exactly batch lines); a value equal to pad_slot_id skips the row (output 0);
    num_accepted_tokens: int32 (batch,) or None.

    Semantics, per row b with cache line c, S = state_len, L = seqlen and ``a = num_accepted_tokens[b]``
    (``a = L`` when None):
      * the previous call fed L tokens of which the first a were accepted (the rest were rejected
        drafts), so the sequence's valid history ends at index ``e = S - L + a`` (exclusive) of
        ``conv_state[c]``; the W - 1 inputs before ``x[b, :, 0]`` are ``conv_state[c, :, e - (W - 1) : e]``;
      * ``out[b] = act(bias + causal_conv1d(cat(those W - 1 inputs, x[b])))`` (L outputs);
      * afterwards ``conv_state[c] = cat(conv_state[c, :, :e], x[b])[:, -S:]``: the rejected drafts are
        dropped and the L new tokens appended (the next call again passes how many of them were accepted).
    With ``a = L`` this is the plain ``causal_conv1d_update`` (a shift by L). With num_accepted_tokens,
    state_len must be >= width - 2 + seqlen (vLLM allocates width - 1 + number of draft tokens, which is
    exactly that: then the history window starts at ``a - 1``, as in vLLM). ``a`` must be in [1, L]:
    checked on the CPU; clamped on CUDA (validate=True checks on the host).
    """
    silu = _silu(activation)
    if validate:
        _validate_slots(conv_state_indices, conv_state.shape[0], pad_slot_id, "conv_state_indices", "conv_state")
        if num_accepted_tokens is not None:
            seqlen = 1 if x.dim() == 2 else x.shape[-1]
            v = num_accepted_tokens.cpu()
            bad = (v < 1) | (v > seqlen)
            if bool(bad.any()):
                i = int(bad.nonzero()[0, 0])
                raise ValueError(f"num_accepted_tokens[{i}] = {int(v[i])} must be between 1 and seqlen = {seqlen}")
    try:
        return (_spec_update if _is_compiling() else _spec_update_op)(
            x, conv_state, weight, bias, silu, conv_state_indices, num_accepted_tokens, int(pad_slot_id)
        )
    except RuntimeError as exc:
        reraise(exc)


# ---------------------------------------------------------------------------------------------
# Plain-PyTorch references (one sequence at a time)


def _conv_ref(window: Tensor, weight: Tensor, bias: Optional[Tensor], silu: bool) -> Tensor:
    """act(bias + conv) of a (dim, W - 1 + n) window in float32/64: n outputs."""
    width = weight.shape[1]
    n = window.shape[-1] - (width - 1)
    acc = torch.zeros(window.shape[0], n, dtype=window.dtype, device=window.device)
    for k in range(width):
        acc = acc + weight[:, k : k + 1].to(window.dtype) * window[:, k : k + n]
    if bias is not None:
        acc = acc + bias.to(window.dtype)[:, None]
    return torch.nn.functional.silu(acc) if silu else acc


def causal_conv1d_varlen_ref(
    x: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    conv_states: Tensor,
    query_start_loc: Tensor,
    cache_indices: Optional[Tensor] = None,
    has_initial_state: Optional[Tensor] = None,
    activation: Optional[str] = "silu",
    pad_slot_id: int = PAD_SLOT_ID,
) -> Tensor:
    """Reference :func:`causal_conv1d_varlen_fn` (a loop over the sequences); updates conv_states."""
    silu = _silu(activation)
    dim, width = weight.shape
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    out = torch.zeros_like(x)
    state_len = conv_states.shape[-1]
    q = query_start_loc.tolist()
    for i in range(len(q) - 1):
        start, end = q[i], q[i + 1]
        if end <= start:
            continue
        c = int(cache_indices[i]) if cache_indices is not None else i
        if c == pad_slot_id:
            continue
        xs = x[:, start:end]
        init = bool(has_initial_state[i]) if has_initial_state is not None else False
        old = conv_states[c] if init else torch.zeros_like(conv_states[c])
        window = torch.cat([old[:, state_len - (width - 1) :], xs], dim=-1).to(acc)
        out[:, start:end] = _conv_ref(window, weight, bias, silu).to(x.dtype)
        conv_states[c] = torch.cat([old, xs], dim=-1)[:, -state_len:]
    return out


def causal_conv1d_update_spec_ref(
    x: Tensor,
    conv_state: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    activation: Optional[str] = None,
    conv_state_indices: Optional[Tensor] = None,
    num_accepted_tokens: Optional[Tensor] = None,
    pad_slot_id: int = PAD_SLOT_ID,
) -> Tensor:
    """Reference :func:`causal_conv1d_update_spec` (a loop over the rows); updates conv_state."""
    silu = _silu(activation)
    squeeze = x.dim() == 2
    if squeeze:
        x = x.unsqueeze(-1)
    width = weight.shape[1]
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    batch, _, seqlen = x.shape
    state_len = conv_state.shape[-1]
    out = torch.zeros_like(x)
    for b in range(batch):
        c = int(conv_state_indices[b]) if conv_state_indices is not None else b
        if c == pad_slot_id:
            continue
        a = int(num_accepted_tokens[b]) if num_accepted_tokens is not None else seqlen
        e = state_len - seqlen + a
        window = torch.cat([conv_state[c, :, e - (width - 1) : e], x[b]], dim=-1).to(acc)
        out[b] = _conv_ref(window, weight, bias, silu).to(x.dtype)
        conv_state[c] = torch.cat([conv_state[c, :, :e], x[b]], dim=-1)[:, -state_len:]
    return out.squeeze(-1) if squeeze else out
