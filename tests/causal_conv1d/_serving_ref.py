"""The serving tests' own float64 reference of docs/serving.md (independent of the package's
``causal_conv1d_varlen_ref`` / ``causal_conv1d_update_spec_ref``), and the two APIs under test.

``prefill_ref`` / ``decode_ref`` return ``(out, new_cache)`` on the CPU without touching their
inputs: x is cast to the cache's dtype, the conv runs in float64 (sliding windows), the outputs are
rounded to the cache's dtype and returned in x's dtype (vLLM's casts).

``API`` maps a test's arguments onto the native functions (causal_conv1d.varlen) or the vLLM
drop-in (causal_conv1d.vllm), so every case runs through both.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Optional

import torch
import torch.nn.functional as F

from causal_conv1d import vllm as cc_vllm
from causal_conv1d.varlen import PAD_SLOT_ID, causal_conv1d_update_spec, causal_conv1d_varlen_fn

Tensor = torch.Tensor


def _list(t: Optional[Tensor]) -> Optional[list]:
    return None if t is None else t.detach().cpu().tolist()


def _conv(seq: Tensor, weight: Tensor, bias: Optional[Tensor], silu: bool) -> Tensor:
    """(dim, H + n) float64 inputs -> (dim, n) outputs of the depthwise causal conv."""
    w = weight.detach().cpu().double()
    o = torch.einsum("dnk,dk->dn", seq.unfold(1, w.shape[1], 1), w)  # window n: inputs n .. n + W - 1
    if bias is not None:
        o = o + bias.detach().cpu().double()[:, None]
    return F.silu(o) if silu else o


def _lines(ci: Optional[list], last: Optional[list], init_idx: Optional[list], i: int) -> tuple[int, int]:
    """Request i's input and output cache lines (prefix caching: columns init_idx[i] and last[i] of its row)."""
    if last is not None:
        return ci[i][init_idx[i]], ci[i][last[i]]
    line = ci[i] if ci is not None else i
    return line, line


def prefill_ref(
    x: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    cache: Tensor,
    qsl: Tensor,
    cache_indices: Optional[Tensor] = None,
    has_initial_state: Optional[Tensor] = None,
    silu: bool = True,
    pad_slot_id: int = PAD_SLOT_ID,
    first: Optional[Tensor] = None,
    last: Optional[Tensor] = None,
    init_idx: Optional[Tensor] = None,
    computed: Optional[Tensor] = None,
    block: int = 0,
) -> tuple[Tensor, Tensor]:
    st = cache.detach().cpu().clone()
    sdt = st.dtype
    xd = x.detach().cpu().to(sdt).double()
    h = weight.shape[1] - 1
    out = torch.zeros(x.shape, dtype=torch.float64)
    q, ci, hi = _list(qsl), _list(cache_indices), _list(has_initial_state)
    first, last, init_idx, computed = _list(first), _list(last), _list(init_idx), _list(computed)
    for i in range(len(q) - 1):
        s, e = q[i], q[i + 1]
        n = e - s
        if n <= 0:
            continue
        c_in, c_out = _lines(ci, last, init_idx, i)
        if c_in == pad_slot_id:
            continue
        start = (
            st[c_in, :, :h].double() if hi is not None and hi[i] else torch.zeros(x.shape[0], h, dtype=torch.float64)
        )
        seq = torch.cat([start, xd[:, s:e]], 1)  # seq[:, j] is the input at position p0 + j - h
        out[:, s:e] = _conv(seq, weight, bias, silu).to(sdt).double()
        if last is not None:
            k, p0 = last[i] - first[i], computed[i]
            bounds = [p for p in range(p0 + 1, p0 + n) if p % block == 0]
            for j, p in enumerate(bounds[len(bounds) - k :] if k else []):
                line = ci[i][first[i] + j]
                if line != pad_slot_id:
                    st[line, :, :h] = seq[:, p - p0 : p - p0 + h].to(sdt)
        if c_out != pad_slot_id:
            st[c_out, :, :h] = seq[:, n : n + h].to(sdt)
    return out.to(x.dtype), st


def decode_ref(
    x: Tensor,
    cache: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    silu: bool = False,
    indices: Optional[Tensor] = None,
    num_accepted: Optional[Tensor] = None,
    pad_slot_id: int = PAD_SLOT_ID,
    qsl: Optional[Tensor] = None,
    max_query_len: int = -1,
    last: Optional[Tensor] = None,
    init_idx: Optional[Tensor] = None,
    parent: Optional[Tensor] = None,
) -> tuple[Tensor, Tensor]:
    """max_query_len: the API's argument, not needed here (each request's own count is taken)."""
    st = cache.detach().cpu().clone()
    sdt = st.dtype
    xd = x.detach().cpu().to(sdt).double()
    width = weight.shape[1]
    h = width - 1
    wd = weight.detach().cpu().double()
    out = torch.zeros(x.shape, dtype=torch.float64)
    ci, acc, last, init_idx, par = _list(indices), _list(num_accepted), _list(last), _list(init_idx), _list(parent)
    if qsl is not None:
        q = _list(qsl)
        views = [(lambda t, s=q[b], e=q[b + 1]: t[s:e].T) for b in range(len(q) - 1)]
    elif x.dim() == 2:
        views = [(lambda t, b=b: t[b : b + 1].T) for b in range(x.shape[0])]
    else:
        views = [(lambda t, b=b: t[b]) for b in range(x.shape[0])]
    for b, view in enumerate(views):
        xb = view(xd)
        n = xb.shape[1]
        if n <= 0:
            continue
        c_in, c_out = _lines(ci, last, init_idx, b)
        if c_in == pad_slot_id:
            continue
        off = acc[b] - 1 if acc is not None else 0
        seq = torch.cat([st[c_in, :, off : off + h].double(), xb], 1)
        if par is None:
            ob = _conv(seq, weight, bias, silu)
        else:  # token j: itself, parent, grandparent, ...; below the root, the window from its end
            cols = []
            for j in range(n):
                chain, c = [], j
                for _ in range(width):
                    chain.append(h + c)
                    c = par[b][c] if c > 0 else c - 1
                taps = seq[:, chain]  # taps[:, k] = the k-th ancestor
                o = (taps * wd.flip(1)).sum(1)
                if bias is not None:
                    o = o + bias.detach().cpu().double()
                cols.append(F.silu(o) if silu else o)
            ob = torch.stack(cols, 1)
        view(out).copy_(ob.to(sdt).double())
        if c_out != pad_slot_id:
            if acc is not None:
                st[c_out, :, : h - 1 + n] = seq[:, 1:].to(sdt)
            else:
                st[c_out, :, :h] = seq[:, n:].to(sdt)
    return out.to(x.dtype), st


def _arguments(ref: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
    """args and kwargs bound to ``ref``'s parameters, defaults filled in."""
    bound = inspect.signature(ref).bind(*args, **kwargs)
    bound.apply_defaults()
    return bound.arguments


# The tests' names of the keyword arguments of causal_conv1d_varlen_fn / causal_conv1d_update_spec (in
# the order of vLLM's positional ones)
PREFILL_KEYWORDS = {
    "first": "block_idx_first_scheduled_token",
    "last": "block_idx_last_scheduled_token",
    "init_idx": "initial_state_idx",
    "computed": "num_computed_tokens",
    "block": "block_size_to_align",
}
DECODE_KEYWORDS = {
    "qsl": "query_start_loc",
    "max_query_len": "max_query_len",
    "last": "block_idx_last_scheduled_token",
    "init_idx": "initial_state_idx",
    "parent": "retrieve_parent_token",
}


class API:
    """One of the two front ends: ``API("native")`` or ``API("vllm")``. ``prefill`` / ``decode`` take
    the arguments of :func:`prefill_ref` / :func:`decode_ref` (and ``validate``) and return ``out``."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __repr__(self) -> str:
        return self.kind

    def prefill(self, *args: Any, validate: bool = False, **kwargs: Any) -> Tensor:
        a = _arguments(prefill_ref, args, kwargs)
        head = [a[k] for k in ("x", "weight", "bias", "cache", "qsl", "cache_indices", "has_initial_state")]
        if self.kind == "native":
            keywords = {native: a[k] for k, native in PREFILL_KEYWORDS.items()}
            activation = "silu" if a["silu"] else None
            return causal_conv1d_varlen_fn(*head, activation, a["pad_slot_id"], **keywords, validate=validate)
        prefix_caching = [a[k] for k in PREFILL_KEYWORDS]
        # vLLM accepts a bool activation; no metadata
        return cc_vllm.causal_conv1d_fn(*head, a["silu"], a["pad_slot_id"], *prefix_caching, None, validate)

    def decode(self, *args: Any, validate: bool = False, **kwargs: Any) -> Tensor:
        a = _arguments(decode_ref, args, kwargs)
        head = [a[k] for k in ("x", "cache", "weight", "bias")]
        lines = [a["indices"], a["num_accepted"]]
        if self.kind == "native":
            keywords = {native: a[k] for k, native in DECODE_KEYWORDS.items()}
            activation = "silu" if a["silu"] else None
            return causal_conv1d_update_spec(*head, activation, *lines, a["pad_slot_id"], **keywords, validate=validate)
        qsl, max_query_len, *rest = [a[k] for k in DECODE_KEYWORDS]
        activation = "silu" if a["silu"] else False
        return cc_vllm.causal_conv1d_update(
            *head, activation, *lines, qsl, max_query_len, a["pad_slot_id"], *rest, validate
        )


APIS = [API("native"), API("vllm")]
