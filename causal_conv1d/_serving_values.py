"""Host checks of the serving ops' index *values* (``validate=True`` of causal_conv1d/varlen.py).

The rules are docs/serving.md's ("Index values"); the CPU kernels apply the same ones in C++
(csrc/cpu/varlen_fwd.cpp, csrc/cpu/spec_update.cpp) with the same messages, so a bad value gets the
same ValueError on every device when ``validate=True``. Each check copies the index tensors to the
host once (not inside a CUDA-graph capture, not under torch.compile).

Only tensors whose dtype and rank are what the op accepts are read here; anything else is left to
the op's own shape and dtype checks, which name the argument.
"""

from __future__ import annotations

from typing import Optional

import torch

__all__ = ["check_varlen_fwd_values", "check_spec_update_values"]

Tensor = torch.Tensor


def _host(t: Optional[Tensor], ndim: int) -> Optional[list]:
    """t's values as Python ints (nested lists for 2-D); None when absent or not an int32 tensor of that rank."""
    if t is None or t.dtype != torch.int32 or t.dim() != ndim:
        return None
    return t.detach().cpu().tolist()


def _check_qsl(q: list, total: int, total_desc: str) -> None:
    if q[0] < 0:
        raise ValueError(f"query_start_loc[0] must be >= 0, got {q[0]}")
    for i in range(len(q) - 1):
        if q[i + 1] < q[i]:
            raise ValueError(
                f"query_start_loc must be non-decreasing, got query_start_loc[{i}] = {q[i]} > "
                f"query_start_loc[{i + 1}] = {q[i + 1]}"
            )
    if q[-1] > total:
        raise ValueError(
            f"query_start_loc[{len(q) - 1}] = {q[-1]} must be <= total_tokens ({total_desc}) = {total}: "
            "the requests do not fit in x"
        )


def _check_line(v: int, lines: int, pad: int, name: str, where: str, cache_name: str, two_d: bool) -> None:
    if v == pad or 0 <= v < lines:
        return
    tail = ")" if two_d else " to skip the request)"
    raise ValueError(
        f"{name}[{where}] = {v} is out of range for {cache_name} with {lines} cache lines "
        f"(a line in [0, {lines}), or pad_slot_id = {pad}{tail}"
    )


def _check_col(v: int, cols: int, name: str, i: int, table: str) -> None:
    if not 0 <= v < cols:
        raise ValueError(
            f"{name}[{i}] = {v} is out of range: it indexes a column of {table}, which has max_blocks = "
            f"{cols} columns (0 <= value < {cols})"
        )


def _rows(t: Optional[list], batch: int) -> bool:
    return t is not None and len(t) >= batch


def check_varlen_fwd_values(
    x: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    conv_states: Tensor,
    query_start_loc: Tensor,
    cache_indices: Optional[Tensor],
    has_initial_state: Optional[Tensor],
    silu: bool,
    pad_slot_id: int,
    block_idx_first_scheduled_token: Optional[Tensor],
    block_idx_last_scheduled_token: Optional[Tensor],
    initial_state_idx: Optional[Tensor],
    num_computed_tokens: Optional[Tensor],
    block_size_to_align: int,
) -> None:
    """ValueError for the first bad index value of a varlen_fwd call, given the op's arguments (the
    CPU kernel's rules)."""
    q = _host(query_start_loc, 1)
    if not q or x.dim() != 2 or conv_states.dim() != 3:
        return
    batch, lines = len(q) - 1, conv_states.shape[0]
    _check_qsl(q, x.shape[1], "x.shape[1]")
    if block_idx_last_scheduled_token is None:
        ci = _host(cache_indices, 1)
        if _rows(ci, batch):
            for i in range(batch):
                _check_line(ci[i], lines, pad_slot_id, "cache_indices", str(i), "conv_states", False)
        return
    ci = _host(cache_indices, 2)
    last = _host(block_idx_last_scheduled_token, 1)
    first = _host(block_idx_first_scheduled_token, 1)
    init = _host(initial_state_idx, 1)
    done = _host(num_computed_tokens, 1)
    if not all(_rows(t, batch) for t in (ci, last, first, init, done)) or block_size_to_align < 1:
        return
    cols = len(ci[0]) if ci else 0
    for i in range(batch):
        _check_col(init[i], cols, "initial_state_idx", i, "cache_indices")
        _check_col(last[i], cols, "block_idx_last_scheduled_token", i, "cache_indices")
        _check_col(first[i], cols, "block_idx_first_scheduled_token", i, "cache_indices")
        k = last[i] - first[i]
        if k < 0:
            raise ValueError(
                f"block_idx_first_scheduled_token[{i}] = {first[i]} must be <= "
                f"block_idx_last_scheduled_token[{i}] = {last[i]}"
            )
        p0 = done[i]
        if p0 < 0:
            raise ValueError(f"num_computed_tokens[{i}] = {p0} must be >= 0")
        c_in = ci[i][init[i]]
        _check_line(c_in, lines, pad_slot_id, "cache_indices", f"{i}, {init[i]}", "conv_states", True)
        n = q[i + 1] - q[i]
        if n <= 0 or c_in == pad_slot_id:
            continue
        _check_line(ci[i][last[i]], lines, pad_slot_id, "cache_indices", f"{i}, {last[i]}", "conv_states", True)
        for j in range(k):
            col = first[i] + j
            _check_line(ci[i][col], lines, pad_slot_id, "cache_indices", f"{i}, {col}", "conv_states", True)
        b = block_size_to_align
        inside = (p0 + n - 1) // b - p0 // b
        if k > inside:
            raise ValueError(
                f"block_idx_last_scheduled_token[{i}] - block_idx_first_scheduled_token[{i}] = {k} block-boundary "
                f"states to write, but request {i} (num_computed_tokens = {p0}, {n} new tokens) crosses only "
                f"{inside} boundaries of block_size_to_align = {b} tokens"
            )


def check_spec_update_values(
    x: Tensor,
    conv_state: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    silu: bool,
    conv_state_indices: Optional[Tensor],
    num_accepted_tokens: Optional[Tensor],
    pad_slot_id: int,
    query_start_loc: Optional[Tensor],
    max_query_len: int,
    block_idx_last_scheduled_token: Optional[Tensor],
    initial_state_idx: Optional[Tensor],
    retrieve_parent_token: Optional[Tensor],
) -> None:
    """ValueError for the first bad index value of a spec_update call, given the op's arguments (the
    CPU kernel's rules)."""
    if conv_state.dim() != 3 or weight.dim() != 2 or x.dim() not in (2, 3):
        return
    lines, state_len, h = conv_state.shape[0], conv_state.shape[2], weight.shape[1] - 1
    if query_start_loc is not None:
        q = _host(query_start_loc, 1)
        if not q or x.dim() != 2:
            return
        batch = len(q) - 1
        _check_qsl(q, x.shape[0], "x.shape[0]")
        counts = [q[b + 1] - q[b] for b in range(batch)]
        if max_query_len >= 1:
            for b, n in enumerate(counts):
                if n > max_query_len:
                    raise ValueError(
                        f"request {b} has query_start_loc[{b + 1}] - query_start_loc[{b}] = {n} tokens, more than "
                        f"max_query_len = {max_query_len}"
                    )
    else:
        batch = x.shape[0]
        counts = [1 if x.dim() == 2 else x.shape[2]] * batch
    table = "conv_state_indices"
    if block_idx_last_scheduled_token is not None:
        ci = _host(conv_state_indices, 2)
        last = _host(block_idx_last_scheduled_token, 1)
        init = _host(initial_state_idx, 1)
        if all(_rows(t, batch) for t in (ci, last, init)):
            cols = len(ci[0]) if ci else 0
            for b in range(batch):
                _check_col(init[b], cols, "initial_state_idx", b, table)
                _check_col(last[b], cols, "block_idx_last_scheduled_token", b, table)
                _check_line(ci[b][init[b]], lines, pad_slot_id, table, f"{b}, {init[b]}", "conv_state", True)
                _check_line(ci[b][last[b]], lines, pad_slot_id, table, f"{b}, {last[b]}", "conv_state", True)
    else:
        ci = _host(conv_state_indices, 1)
        if _rows(ci, batch):
            for b in range(batch):
                _check_line(ci[b], lines, pad_slot_id, table, str(b), "conv_state", False)
    acc = _host(num_accepted_tokens, 1)
    if _rows(acc, batch):
        hi = state_len - h + 1
        for b in range(batch):
            if not 1 <= acc[b] <= hi:
                raise ValueError(
                    f"num_accepted_tokens[{b}] = {acc[b]} must be between 1 and state_len - (width - 1) + 1 = {hi} "
                    "(the window conv_state[:, :, a - 1 : a - 1 + width - 1] must lie in the cache line; 1 for a "
                    "request fresh from a prefill)"
                )
    parent = _host(retrieve_parent_token, 2)
    if _rows(parent, batch):
        for b in range(batch):
            row = parent[b]
            for j in range(1, min(counts[b], len(row))):
                if not 0 <= row[j] < j:
                    raise ValueError(
                        f"retrieve_parent_token[{b}, {j}] = {row[j]} must be the index of an earlier token of the "
                        f"request: 0 <= value < {j}"
                    )
