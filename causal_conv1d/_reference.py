"""float64 references of the dense ops (fwd, update) in plain PyTorch, on any device: what the tests
and the benchmarks check the kernels against. (The serving ops' references are in ``varlen.py``;
upstream's ``causal_conv1d_ref`` / ``causal_conv1d_update_ref``, in ``causal_conv1d_interface``,
compute in weight's dtype as upstream's do.)

Semantics (docs/ARCHITECTURE.md "Torch ops", csrc/checks.h): out[l] = act(bias + sum_k w[k] *
x[l - (W-1) + k]); positions before the start come from initial_states (or zero). With seq_idx a tap
counts only when its sequence id equals the output's, and an output whose id is negative is 0; the
initial state belongs to the row's first sequence (upstream 1.7.0). final_states are the last W-1
inputs (initial_states included when seqlen < W-1). A residual (x's shape) is added after the
activation: out = act(conv(x) + bias) + residual (padding positions of seq_idx give the residual).

Packed sequences (:func:`packed_fwd_ref`, the ``packed_fwd`` op): x (1, dim, total_tokens) holds the
sequences ``[cu_seqlens[i], cu_seqlens[i + 1])`` back to back; each is :func:`fwd_ref` of its own
tokens with its own initial state (row i of initial_states, or zeros) and its own final state.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["fwd_ref", "packed_fwd_ref", "update_ref", "rel_err", "REL_TOL", "rel_tol"]


def fwd_ref(
    x: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    seq_idx: Optional[Tensor] = None,
    initial_states: Optional[Tensor] = None,
    silu: bool = False,
    residual: Optional[Tensor] = None,
) -> tuple[Tensor, Tensor]:
    """(out, final_states) in float64 of x (batch, dim, seqlen); differentiable (gradient references)."""
    batch, dim, seqlen = x.shape
    width = weight.shape[1]
    x64, w64 = x.double(), weight.double()
    prev = initial_states.double() if initial_states is not None else x64.new_zeros(batch, dim, width - 1)
    xp = torch.cat([prev, x64], dim=-1)  # (batch, dim, width - 1 + seqlen)
    out = x64.new_zeros(batch, dim, seqlen)
    if bias is not None:
        out = out + bias.double()[None, :, None]
    sp: Optional[Tensor] = None
    if seq_idx is not None:
        if initial_states is not None and seqlen > 0:
            pre = seq_idx[:, :1].expand(-1, width - 1)
        else:
            pre = seq_idx.new_full((batch, width - 1), -1)
        sp = torch.cat([pre, seq_idx], dim=-1)
    for k in range(width):
        term = w64[:, k][None, :, None] * xp[..., k : k + seqlen]
        if seq_idx is not None and sp is not None:
            term = term * (sp[:, k : k + seqlen] == seq_idx)[:, None, :]
        out = out + term
    if seq_idx is not None:
        out = out * (seq_idx >= 0)[:, None, :]
    if silu:
        out = F.silu(out)
    if residual is not None:
        out = out + residual.double()
    return out, xp[..., xp.shape[-1] - (width - 1) :]


def packed_fwd_ref(
    x: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    cu_seqlens: Tensor,
    initial_states: Optional[Tensor] = None,
    silu: bool = False,
    residual: Optional[Tensor] = None,
) -> tuple[Tensor, Tensor]:
    """(out (1, dim, total_tokens), final_states (n, dim, width - 1)) in float64 of packed x, one
    :func:`fwd_ref` per sequence (residual: (1, dim, total_tokens), sliced alike); differentiable
    (gradient references)."""
    bounds = [int(v) for v in cu_seqlens.tolist()]
    outs, finals = [], []
    for i in range(len(bounds) - 1):
        xi = x[:, :, bounds[i] : bounds[i + 1]]
        init = initial_states[i : i + 1] if initial_states is not None else None
        ri = residual[:, :, bounds[i] : bounds[i + 1]] if residual is not None else None
        out, final = fwd_ref(xi, weight, bias, initial_states=init, silu=silu, residual=ri)
        outs.append(out)
        finals.append(final)
    width = weight.shape[1]
    out = torch.cat(outs, dim=-1) if outs else x.new_zeros(x.shape, dtype=torch.float64)
    final = torch.cat(finals, dim=0) if finals else x.new_zeros(0, x.shape[1], width - 1, dtype=torch.float64)
    return out, final


def update_ref(
    x: Tensor,
    conv_state: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    silu: bool = False,
    cache_seqlens: Optional[Tensor] = None,
    conv_state_indices: Optional[Tensor] = None,
) -> Tensor:
    """A decoding step in float64 on x (batch, dim, seqlen); updates conv_state (any dtype) in place
    with exact copies. conv_state_indices: the state row of each sequence (negative or past the
    cache: a padding slot, output 0 and no state touched); cache_seqlens: a circular buffer's next
    write position per sequence."""
    batch, dim, seqlen = x.shape
    width = weight.shape[1]
    state_len = conv_state.shape[-1]
    out = torch.zeros(batch, dim, seqlen, dtype=torch.float64, device=x.device)
    for b in range(batch):
        row = int(conv_state_indices[b]) if conv_state_indices is not None else b
        if row < 0 or row >= conv_state.shape[0]:
            continue
        st = conv_state[row]
        if cache_seqlens is None:
            hist = st[:, state_len - (width - 1) :].clone()
            full = torch.cat([st, x[b]], dim=-1)
            st.copy_(full[:, full.shape[-1] - state_len :])
        else:
            c = int(cache_seqlens[b])
            hidx = torch.tensor(
                [(c - (width - 1) + j) % state_len for j in range(width - 1)], device=x.device, dtype=torch.long
            )
            hist = st[:, hidx].clone()
            for t in range(seqlen):
                st[:, (c + t) % state_len] = x[b, :, t]
        window = torch.cat([hist.double(), x[b].double()], dim=-1)
        acc = torch.zeros(dim, seqlen, dtype=torch.float64, device=x.device)
        for k in range(width):
            acc = acc + weight.double()[:, k, None] * window[:, k : k + seqlen]
        if bias is not None:
            acc = acc + bias.double()[:, None]
        out[b] = F.silu(acc) if silu else acc
    return out


def rel_err(a: Tensor, b: Tensor) -> float:
    """||a - b|| / ||b|| in float64 (||a - b|| when b is 0)."""
    a64, b64 = a.double(), b.double()
    den = b64.norm().item()
    num = (a64 - b64).norm().item()
    return num / den if den > 0 else num


#: The relative error (:func:`rel_err`) a kernel's output may have against the float64 reference, by
#: the dtype it computes in.
REL_TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.5e-2}


def rel_tol(*dtypes: torch.dtype) -> float:
    """The loosest :data:`REL_TOL` of ``dtypes`` (x's and weight's)."""
    return max(REL_TOL[d] for d in dtypes)
