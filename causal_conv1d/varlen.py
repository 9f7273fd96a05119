"""Serving API: the packed varlen prefill over a state cache and the decode update, in vLLM's convention.

Continuous-batching engines (vLLM, SGLang) keep one conv state per request in a cache tensor and run
(a) a *prefill* over a packed batch of new prompt tokens (no padding), with prefix caching, and (b) a
*decode* step over one or a few new tokens per request (speculative decoding, ragged batches, tree
drafts). docs/serving.md is the specification: every argument that carries one of vLLM's names
(``vllm/model_executor/layers/mamba/ops/causal_conv1d.py``) means what it means there -- the live
window of a cache line is its first ``width - 1`` entries -- so chains of these ops, and mixes of
them with vLLM's kernels on one cache, give the same result. :mod:`causal_conv1d.vllm` offers the
same ops under vLLM's function names and signatures.

Both functions are torch ops (``torch.ops.causal_conv1d.varlen_fwd`` / ``spec_update``) with fake
kernels: ``torch.compile(fullgraph=True)`` traces them, and on CUDA they are one kernel launch each
with no host synchronisation and no host-built metadata (CUDA-graph capturable). Forward only
(inference); no autograd.

Checks: shapes, dtypes and devices are checked on the host (ValueError / TypeError naming the
argument). The index *values* live on the device: the CPU kernels check them (ValueError naming the
argument and the entry); the CUDA kernels do not synchronise to look (docs/serving.md, "Index
values", says what they do with bad values). ``validate=True`` checks every value on the host first
with the CPU kernels' rules and messages (one device-to-host copy: eager only, not inside a
CUDA-graph capture or a torch.compile trace).

``causal_conv1d_varlen_ref`` and ``causal_conv1d_update_spec_ref`` are plain-PyTorch float64
references of the same definition (a loop over the requests), for tests and benchmarks.
"""

from __future__ import annotations

from typing import Optional

import torch

from causal_conv1d._errors import reraise
from causal_conv1d._serving_values import check_spec_update_values, check_varlen_fwd_values
from causal_conv1d.causal_conv1d_interface import _silu

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

_varlen_fwd = torch.ops.causal_conv1d.varlen_fwd.default
_spec_update = torch.ops.causal_conv1d.spec_update.default
# Eager calls go through the C++ callables behind OpOverload.__call__ (one Python frame less); a
# torch.compile trace must see the OpOverloads.
_varlen_fwd_op = _varlen_fwd._op
_spec_update_op = _spec_update._op
_is_compiling = torch.compiler.is_compiling


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
    *,
    block_idx_first_scheduled_token: Optional[Tensor] = None,
    block_idx_last_scheduled_token: Optional[Tensor] = None,
    initial_state_idx: Optional[Tensor] = None,
    num_computed_tokens: Optional[Tensor] = None,
    block_size_to_align: int = 0,
    validate: bool = False,
) -> Tensor:
    """Causal conv1d over a packed batch of requests (a prefill); returns ``out``, x's shape, dtype and layout.

    x: (dim, total_tokens), channel-first (``x.stride(1) == 1``) or channel-last (``x.stride(0) == 1``:
    a ``(total_tokens, dim)`` tensor passed as ``x.T``); weight: (dim, width), width 2..8; bias: (dim,) or None;
    conv_states: (num_cache_lines, dim, state_len >= width - 1), any strides, any float dtype (x is cast
    to it first, as in vLLM), **updated in place**; only entries ``[0, width - 1)`` of a line are read
    and written (the live window);
    query_start_loc: int32 (batch + 1,): request i is tokens ``[q[i], q[i + 1])``; tokens after ``q[batch]``
    belong to no request (output 0);
    cache_indices: int32 (>= batch,), the cache line of each request (None: line i), or with prefix
    caching (>= batch, max_blocks); only the first batch entries (rows) are read;
    has_initial_state: bool or int32 (>= batch,), None = all false;
    activation: None, "silu" or "swish"; pad_slot_id: a request whose (input) line equals it is skipped
    (output 0, no line touched);
    prefix caching (vLLM's automatic prefix caching), switched on by ``block_idx_last_scheduled_token``:
    int32 (>= batch,) ``block_idx_first_scheduled_token``, ``block_idx_last_scheduled_token``,
    ``initial_state_idx``, ``num_computed_tokens``, and ``block_size_to_align`` >= 1 (read only then).
    The states at the block boundaries the chunk crosses are written to the lines of their blocks
    (docs/serving.md, "Prefix caching").
    validate: check every index value on the host first (see the module docstring).
    """
    args = (
        x,
        weight,
        bias,
        conv_states,
        query_start_loc,
        cache_indices,
        has_initial_state,
        _silu(activation),
        int(pad_slot_id),
        block_idx_first_scheduled_token,
        block_idx_last_scheduled_token,
        initial_state_idx,
        num_computed_tokens,
        int(block_size_to_align),
    )
    if validate:
        check_varlen_fwd_values(*args)
    try:
        return (_varlen_fwd if _is_compiling() else _varlen_fwd_op)(*args)
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
    *,
    query_start_loc: Optional[Tensor] = None,
    max_query_len: int = -1,
    block_idx_last_scheduled_token: Optional[Tensor] = None,
    initial_state_idx: Optional[Tensor] = None,
    retrieve_parent_token: Optional[Tensor] = None,
    validate: bool = False,
) -> Tensor:
    """Decode step over one or a few new tokens per request; returns ``out``, x's shape and dtype.

    x: (batch, dim) (one token), (batch, dim, seqlen), or with ``query_start_loc`` (num_tokens, dim), a
    ragged batch (request b is tokens ``[q[b], q[b + 1])``, batch = len(query_start_loc) - 1; then
    ``conv_state_indices`` is required, and ``max_query_len`` >= every request's token count, required
    with num_accepted_tokens or retrieve_parent_token);
    conv_state: (num_cache_lines, dim, state_len), any strides, any float dtype (x is cast to it
    first), **updated in place**;
    conv_state_indices: int32 (>= batch,) (None: line b), or with prefix caching (>= batch, max_blocks):
    the input line is ``conv_state_indices[b, initial_state_idx[b]]``, the output line
    ``conv_state_indices[b, block_idx_last_scheduled_token[b]]``;
    num_accepted_tokens: int32 (>= batch,): speculative decoding, a = the tokens of the previous step
    that were accepted (1 right after a prefill or a plain step); the window is
    ``conv_state[c, :, a - 1 : a - 1 + width - 1]`` and the step writes ``[0, width - 2 + n_b)``:
    state_len must be >= width - 2 + seqlen (ragged: + max_query_len);
    retrieve_parent_token: int32 (>= batch, >= seqlen): tree drafts, token j's inputs are itself, its
    parent, grandparent, ..., the root continuing into the window;
    pad_slot_id: a request whose (input) line equals it is skipped (output 0, no line touched).
    Without num_accepted_tokens the window is ``[0, width - 1)`` and is shifted by the new tokens.
    validate: check every index value on the host first (see the module docstring).
    """
    args = (
        x,
        conv_state,
        weight,
        bias,
        _silu(activation),
        conv_state_indices,
        num_accepted_tokens,
        int(pad_slot_id),
        query_start_loc,
        int(max_query_len),
        block_idx_last_scheduled_token,
        initial_state_idx,
        retrieve_parent_token,
    )
    if validate:
        check_spec_update_values(*args)
    try:
        return (_spec_update if _is_compiling() else _spec_update_op)(*args)
    except RuntimeError as exc:
        reraise(exc)


# ---------------------------------------------------------------------------------------------
# Plain-PyTorch references (float64, one request at a time; docs/serving.md)


def _taps(ext: Tensor, weight: Tensor, bias: Optional[Tensor], silu: bool, n: int) -> Tensor:
    """act(bias + conv) of a float64 (dim, width - 1 + n) window: n outputs."""
    width = weight.shape[1]
    w = weight.to(torch.float64)
    acc = sum(w[:, k : k + 1] * ext[:, k : k + n] for k in range(width))
    if bias is not None:
        acc = acc + bias.to(torch.float64)[:, None]
    return torch.nn.functional.silu(acc) if silu else acc


def _line(table: Optional[Tensor], i: int, col: Optional[int] = None) -> int:
    if table is None:
        return i
    return int(table[i] if col is None else table[i, col])


def _in_out_lines(
    table: Optional[Tensor], i: int, initial_state_idx: Optional[Tensor], block_idx_last: Optional[Tensor]
) -> tuple[int, int]:
    """Request i's input and output cache lines; with prefix caching (block_idx_last given) the columns
    initial_state_idx[i] and block_idx_last[i] of its row of the table."""
    if block_idx_last is None:
        line = _line(table, i)
        return line, line
    return _line(table, i, int(initial_state_idx[i])), _line(table, i, int(block_idx_last[i]))


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
    *,
    block_idx_first_scheduled_token: Optional[Tensor] = None,
    block_idx_last_scheduled_token: Optional[Tensor] = None,
    initial_state_idx: Optional[Tensor] = None,
    num_computed_tokens: Optional[Tensor] = None,
    block_size_to_align: int = 0,
) -> Tensor:
    """Reference :func:`causal_conv1d_varlen_fn` (float64, a loop over the requests); updates conv_states."""
    silu = _silu(activation)
    h = weight.shape[1] - 1
    sdt = conv_states.dtype
    xs_all = x.to(sdt).to(torch.float64)  # x cast to the cache's dtype first
    out = torch.zeros(x.shape, dtype=torch.float64, device=x.device)
    q = query_start_loc.tolist()
    apc = block_idx_last_scheduled_token is not None
    for i in range(len(q) - 1):
        start, end = q[i], q[i + 1]
        n = end - start
        if n <= 0:
            continue
        c_in, c_out = _in_out_lines(cache_indices, i, initial_state_idx, block_idx_last_scheduled_token)
        if c_in == pad_slot_id:
            continue
        init_on = has_initial_state is not None and bool(has_initial_state[i])
        init = conv_states[c_in, :, :h].to(torch.float64) if init_on else torch.zeros_like(xs_all[:, :h])
        ext = torch.cat([init, xs_all[:, start:end]], dim=-1)
        out[:, start:end] = _taps(ext, weight, bias, silu, n).to(sdt).to(torch.float64)
        writes = []
        if apc:
            first = int(block_idx_first_scheduled_token[i])
            k = int(block_idx_last_scheduled_token[i]) - first
            p0, b = int(num_computed_tokens[i]), int(block_size_to_align)
            last_boundary = (p0 + n - 1) // b * b
            for j in range(k):
                pos = last_boundary - (k - 1 - j) * b
                writes.append((_line(cache_indices, i, first + j), pos - p0))
        writes.append((c_out, n))
        for line, e in writes:
            if line != pad_slot_id:
                conv_states[line, :, :h] = ext[:, e : e + h].to(sdt)
    return out.to(x.dtype)


def causal_conv1d_update_spec_ref(
    x: Tensor,
    conv_state: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    activation: Optional[str] = None,
    conv_state_indices: Optional[Tensor] = None,
    num_accepted_tokens: Optional[Tensor] = None,
    pad_slot_id: int = PAD_SLOT_ID,
    *,
    query_start_loc: Optional[Tensor] = None,
    max_query_len: int = -1,
    block_idx_last_scheduled_token: Optional[Tensor] = None,
    initial_state_idx: Optional[Tensor] = None,
    retrieve_parent_token: Optional[Tensor] = None,
) -> Tensor:
    """Reference :func:`causal_conv1d_update_spec` (float64, a loop over the requests); updates conv_state.

    ``max_query_len`` is not needed by the definition (the reference takes each request's own count)."""
    silu = _silu(activation)
    width = weight.shape[1]
    h = width - 1
    sdt = conv_state.dtype
    xd = x.to(sdt).to(torch.float64)
    out = torch.zeros(x.shape, dtype=torch.float64, device=x.device)
    if query_start_loc is not None:  # (num_tokens, dim): request b's tokens as a (dim, n) view
        q = query_start_loc.tolist()
        spans = [(q[b], q[b + 1]) for b in range(len(q) - 1)]

        def tokens(t: Tensor, b: int) -> Tensor:
            return t[spans[b][0] : spans[b][1]].T

    else:
        spans = [None] * x.shape[0]

        def tokens(t: Tensor, b: int) -> Tensor:
            return t[b].unsqueeze(-1) if t.dim() == 2 else t[b]

    w = weight.to(torch.float64)
    for b in range(len(spans)):
        xb = tokens(xd, b)
        n = xb.shape[-1]
        if n <= 0:
            continue
        c_in, c_out = _in_out_lines(conv_state_indices, b, initial_state_idx, block_idx_last_scheduled_token)
        if c_in == pad_slot_id:
            continue
        off = int(num_accepted_tokens[b]) - 1 if num_accepted_tokens is not None else 0
        window = conv_state[c_in, :, off : off + h].to(torch.float64)
        ext = torch.cat([window, xb], dim=-1)
        if retrieve_parent_token is None:
            ob = _taps(ext, weight, bias, silu, n)
        else:
            cols = []
            for j in range(n):
                acc = torch.zeros(ext.shape[0], dtype=torch.float64, device=x.device)
                c = j
                for k in range(width):
                    acc = acc + w[:, h - k] * ext[:, h + c]
                    c = int(retrieve_parent_token[b, c]) if c > 0 else c - 1
                if bias is not None:
                    acc = acc + bias.to(torch.float64)
                cols.append(torch.nn.functional.silu(acc) if silu else acc)
            ob = torch.stack(cols, dim=-1)
        tokens(out, b).copy_(ob.to(sdt).to(torch.float64).reshape(tokens(out, b).shape))
        if c_out != pad_slot_id:
            if num_accepted_tokens is not None:
                conv_state[c_out, :, : h - 1 + n] = ext[:, 1:].to(sdt)
            else:
                conv_state[c_out, :, :h] = ext[:, n:].to(sdt)
    return out.to(x.dtype)
