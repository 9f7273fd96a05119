"""Tensor factories, tolerances and error helpers for the package tests (the float64 references: causal_conv1d/_reference.py)."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch

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


def fp32_inputs(
    batch: int, dim: int, seqlen: int, layout: str, width: int, device: str
) -> tuple[Tensor, Tensor, Tensor]:
    """float32 (x in ``layout``, weight (dim, width), bias (dim,)), drawn in that order."""
    x = make_bdl(batch, dim, seqlen, layout, torch.float32, device)
    return x, torch.randn(dim, width, device=device), torch.randn(dim, device=device)


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
