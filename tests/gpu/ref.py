"""float64 references for the GPU tests and the benchmark (plain PyTorch, any device).

Semantics (docs/ARCHITECTURE.md "Torch ops", csrc/checks.h): out[l] = act(bias + sum_k w[k] *
x[l - (W-1) + k]); positions before the start come from initial_states (or zero); with seq_idx
a tap only counts when its sequence id equals the output's, and an output whose id is negative
is 0. final_states are the last W-1 inputs (initial_states included when seqlen < W-1).
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F


def conv_ref(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor] = None,
    seq_idx: Optional[torch.Tensor] = None,
    initial_states: Optional[torch.Tensor] = None,
    silu: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, final_states) in float64 (differentiable)."""
    B, D, L = x.shape
    W = weight.shape[1]
    x64 = x.double()
    w64 = weight.double()
    pad = initial_states.double() if initial_states is not None else x64.new_zeros(B, D, W - 1)
    xp = torch.cat([pad, x64], dim=2)
    out = x64.new_zeros(B, D, L)
    if seq_idx is not None:
        sp = torch.cat([seq_idx.new_full((B, W - 1), -1), seq_idx], dim=1)
    for k in range(W):
        term = w64[:, k, None] * xp[:, :, k : k + L]
        if seq_idx is not None:
            term = term * (sp[:, k : k + L] == seq_idx)[:, None, :].double()
        out = out + term
    if bias is not None:
        out = out + bias.double()[None, :, None]
    if seq_idx is not None:
        out = out * (seq_idx >= 0)[:, None, :].double()
    if silu:
        out = F.silu(out)
    final = xp[:, :, xp.shape[2] - (W - 1) :]
    return out, final


def update_ref(
    x: torch.Tensor,
    conv_state: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor] = None,
    silu: bool = False,
    cache_seqlens: Optional[torch.Tensor] = None,
    conv_state_indices: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Out (float64) and conv_state updated in place (exact copies), x (B, D, L)."""
    B, D, L = x.shape
    W = weight.shape[1]
    S = conv_state.shape[2]
    out = torch.zeros(B, D, L, dtype=torch.float64, device=x.device)
    for b in range(B):
        row = int(conv_state_indices[b]) if conv_state_indices is not None else b
        if row < 0 or row >= conv_state.shape[0]:
            continue
        st = conv_state[row]
        if cache_seqlens is None:
            hist = st[:, S - (W - 1) :].clone()
            full = torch.cat([st, x[b]], dim=1)
            st.copy_(full[:, full.shape[1] - S :])
        else:
            c = int(cache_seqlens[b])
            hidx = torch.tensor([(c - (W - 1) + j) % S for j in range(W - 1)], device=x.device, dtype=torch.long)
            hist = st[:, hidx].clone()
            for t in range(L):
                st[:, (c + t) % S] = x[b, :, t]
        seq = torch.cat([hist.double(), x[b].double()], dim=1)
        acc = torch.zeros(D, L, dtype=torch.float64, device=x.device)
        for k in range(W):
            acc = acc + weight.double()[:, k, None] * seq[:, k : k + L]
        if bias is not None:
            acc = acc + bias.double()[:, None]
        out[b] = F.silu(acc) if silu else acc
    return out


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    a64, b64 = a.double(), b.double()
    den = b64.norm().item()
    num = (a64 - b64).norm().item()
    return num / den if den > 0 else num


TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.5e-2}


def tol_for(*dtypes: torch.dtype) -> float:
    return max(TOL[d] for d in dtypes)
