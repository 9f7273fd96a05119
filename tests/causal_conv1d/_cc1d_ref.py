"""float64 references and tensor factories for the package tests."""

from __future__ import annotations

import re
from typing import Any, Optional

import pytest
import torch
import torch.nn.functional as F

from causal_conv1d import _guard

Tensor = torch.Tensor

_RECORD = _guard.read_build_record() or {}
#: Which op layer the loaded _C is: "stable" (LibTorch stable ABI, csrc/torch_api.h) or "legacy" (ATen).
OP_LAYER = "stable" if _RECORD.get("stable_abi_target") else "legacy"


def raises_from_op(exc: type, match: str) -> Any:
    """pytest.raises for a call through ``torch.ops.causal_conv1d`` directly (no Python API in
    between): the legacy op layer raises ``exc``; the stable one a RuntimeError whose message tags the
    type (``[ValueError] ...``, causal_conv1d/_errors.py). Either way the message matches."""
    if OP_LAYER == "stable":
        return pytest.raises(RuntimeError, match=re.escape(f"[{exc.__name__}] ") + ".*" + match)
    return pytest.raises(exc, match=match)

LAYOUTS = ["cf", "cl", "cf_view", "cl_view", "strided"]

# (rtol, atol) for outputs in x's dtype against a float64 reference on the same (rounded) inputs.
TOL = {
    torch.float64: (1e-10, 1e-10),
    torch.float32: (1e-5, 1e-5),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1e-2, 1e-2),
}


def tol(*dtypes: torch.dtype) -> dict[str, float]:
    """The loosest tolerance among the dtypes involved."""
    rtol = max(TOL[d][0] for d in dtypes)
    atol = max(TOL[d][1] for d in dtypes)
    return {"rtol": rtol, "atol": atol}


def make_bdl(batch: int, dim: int, seqlen: int, layout: str, dtype: torch.dtype, device: str) -> Tensor:
    """A (batch, dim, seqlen) tensor in one of LAYOUTS."""
    opts = {"dtype": dtype, "device": device}
    if layout == "cf":
        return torch.randn(batch, dim, seqlen, **opts)
    if layout == "cl":
        return torch.randn(batch, seqlen, dim, **opts).transpose(1, 2)
    if layout == "cf_view":  # stride(2) == 1, not contiguous
        return torch.randn(batch, 2 * dim, seqlen + 3, **opts)[:, ::2, 2 : 2 + seqlen]
    if layout == "cl_view":  # stride(1) == 1, not dense
        return torch.randn(batch, seqlen + 1, 2 * dim, **opts)[:, 1:, :dim].transpose(1, 2)
    if layout == "strided":  # neither layout: the Python wrapper makes it contiguous
        return torch.randn(batch, dim, 2 * seqlen, **opts)[..., ::2]
    raise ValueError(layout)


def make_seq_idx(batch: int, seqlen: int, device: str, *, padding: bool = True) -> Tensor:
    """Packed sequences: non-decreasing ids per row, with a run of -1 (padding) when asked."""
    rows = []
    for _ in range(batch):
        cuts = torch.randint(0, 4, (seqlen,)).eq(0).to(torch.int32)
        ids = torch.cumsum(cuts, 0).to(torch.int32)
        if padding and seqlen >= 4:
            start = int(torch.randint(0, seqlen - 2, ()))
            ids[start : start + 2] = -1
            ids[-1] = -1
        rows.append(ids)
    return torch.stack(rows).to(device)


def fwd_ref(
    x: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    seq_idx: Optional[Tensor] = None,
    initial_states: Optional[Tensor] = None,
    silu: bool = False,
) -> tuple[Tensor, Tensor]:
    """(out, final_states) in float64; differentiable (for gradient references)."""
    batch, dim, seqlen = x.shape
    width = weight.shape[1]
    x64, w64 = x.double(), weight.double()
    prev = initial_states.double() if initial_states is not None else x64.new_zeros(batch, dim, width - 1)
    xp = torch.cat([prev, x64], dim=-1)  # (batch, dim, width - 1 + seqlen)
    out = x64.new_zeros(batch, dim, seqlen)
    if bias is not None:
        out = out + bias.double()[None, :, None]
    if seq_idx is not None:
        # before the start: the initial state belongs to the row's first sequence (upstream 1.7.0)
        if initial_states is not None and seqlen > 0:
            pre = seq_idx[:, :1].expand(-1, width - 1)
        else:
            pre = seq_idx.new_full((batch, width - 1), -1)
        sp = torch.cat([pre, seq_idx], dim=-1)
    for k in range(width):
        term = w64[:, k][None, :, None] * xp[..., k : k + seqlen]
        if seq_idx is not None:
            term = term * (sp[:, k : k + seqlen] == seq_idx)[:, None, :]
        out = out + term
    if seq_idx is not None:
        out = out * (seq_idx >= 0)[:, None, :]
    if silu:
        out = F.silu(out)
    return out, xp[..., xp.shape[-1] - (width - 1) :]


def update_ref(
    x: Tensor,
    conv_state: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    silu: bool,
    cache_seqlens: Optional[Tensor],
) -> Tensor:
    """float64 decoding step on (batch, dim, seqlen) x; updates conv_state (any dtype) in place."""
    batch, dim, seqlen = x.shape
    width = weight.shape[1]
    state_len = conv_state.shape[-1]
    out = x.new_zeros(batch, dim, seqlen, dtype=torch.float64)
    for b in range(batch):
        if cache_seqlens is None:
            window = torch.cat([conv_state[b, :, state_len - (width - 1) :], x[b]], dim=-1).double()
            new_state = torch.cat([conv_state[b], x[b]], dim=-1)[:, -state_len:].clone()
            conv_state[b].copy_(new_state)
        else:
            c = int(cache_seqlens[b])
            prev = [conv_state[b, :, (c - (width - 1) + j) % state_len] for j in range(width - 1)]
            window = torch.cat([torch.stack(prev, -1) if prev else x[b, :, :0], x[b]], dim=-1).double()
            for i in range(seqlen):
                conv_state[b, :, (c + i) % state_len] = x[b, :, i]
        for i in range(seqlen):
            acc = (window[:, i : i + width] * weight.double()).sum(-1)
            if bias is not None:
                acc = acc + bias.double()
            out[b, :, i] = acc
    return F.silu(out) if silu else out
