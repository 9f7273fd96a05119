"""Thin functional wrappers over the ``torch.ops.causal_conv1d`` ops, with upstream's names.

Upstream (v1.6.1) code imports these from ``causal_conv1d.cpp_functions``; the signatures and the
return values are the same. Validation happens in C++ (csrc/checks.h); argument errors get their
type back through ``causal_conv1d._errors``. ``fwd`` runs below autograd when its autograd is Python
and no input needs a gradient (``causal_conv1d._ops.use_below_autograd``), as in ``causal_conv1d_fn``.
"""

from __future__ import annotations

from typing import Optional

import torch

from causal_conv1d._errors import reraise
from causal_conv1d._ops import AUTOGRAD_KEY, fwd_op, tls_excluded, tls_set_excluded, use_below_autograd

__all__ = ["causal_conv1d_fwd_function", "causal_conv1d_bwd_function", "causal_conv1d_update_function"]

Tensor = torch.Tensor

# Bound once (causal_conv1d/__init__.py loads ``_C`` first): upstream's decoding loops call these.
_fwd = torch.ops.causal_conv1d.fwd.default
_bwd = torch.ops.causal_conv1d.bwd.default
_update = torch.ops.causal_conv1d.update.default
# eager calls: the C++ callable behind OpOverload.__call__; a torch.compile trace sees the OpOverload
_update_op = _update._op
_is_compiling = torch.compiler.is_compiling


def _call_fwd(x, weight, bias, seq_idx, initial_states, return_final_states: bool, silu: bool):  # noqa: ANN001,ANN202
    try:
        if not use_below_autograd(x, weight, bias, initial_states):  # (always False in a compile trace)
            return _fwd(x, weight, bias, seq_idx, initial_states, return_final_states, silu)
        if tls_excluded(AUTOGRAD_KEY):
            return fwd_op(x, weight, bias, seq_idx, initial_states, return_final_states, silu)
        tls_set_excluded(AUTOGRAD_KEY, True)  # below autograd, as causal_conv1d_fn does
        try:
            return fwd_op(x, weight, bias, seq_idx, initial_states, return_final_states, silu)
        finally:
            tls_set_excluded(AUTOGRAD_KEY, False)
    except RuntimeError as exc:
        reraise(exc)


def causal_conv1d_fwd_function(
    x: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    seq_idx: Optional[Tensor],
    initial_states: Optional[Tensor],
    final_states_out: Optional[Tensor],
    silu_activation: bool,
) -> Tensor:
    """Forward: ``out``; the final states are written into ``final_states_out`` when given."""
    if final_states_out is None:
        return _call_fwd(x, weight, bias, seq_idx, initial_states, False, silu_activation)[0]
    out, final_states = _call_fwd(x, weight, bias, seq_idx, initial_states, True, silu_activation)
    final_states_out.copy_(final_states)
    return out


def causal_conv1d_bwd_function(
    x: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    dout: Tensor,
    seq_idx: Optional[Tensor],
    initial_states: Optional[Tensor],
    dfinal_states: Optional[Tensor],
    dx: Optional[Tensor],
    return_dinitial_states: bool,
    silu_activation: bool,
) -> tuple[Tensor, Tensor, Optional[Tensor], Optional[Tensor]]:
    """Backward: ``(dx, dweight, dbias, dinitial_states)``; written into ``dx`` when given."""
    if dout.dim() == 3 and dout.stride(2) != 1 and dout.stride(1) != 1:
        dout = dout.contiguous()
    try:
        dx_new, dweight, dbias, dinitial_states = _bwd(
            x, weight, bias, dout, seq_idx, initial_states, dfinal_states, bool(return_dinitial_states), silu_activation
        )
    except RuntimeError as exc:
        reraise(exc)
    if dx is not None:
        dx.copy_(dx_new)
        dx_new = dx
    return (
        dx_new,
        dweight,
        dbias if bias is not None else None,
        dinitial_states if return_dinitial_states else None,
    )


def causal_conv1d_update_function(
    x: Tensor,
    conv_state: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    silu_activation: bool,
    cache_seqlens: Optional[Tensor],
    conv_state_indices: Optional[Tensor],
) -> Tensor:
    """Decoding step: ``out``; ``conv_state`` is updated in place. x is (batch, dim) or (batch, dim, seqlen)."""
    try:
        if _is_compiling():
            return _update(x, conv_state, weight, bias, silu_activation, cache_seqlens, conv_state_indices)
        return _update_op(x, conv_state, weight, bias, silu_activation, cache_seqlens, conv_state_indices)
    except RuntimeError as exc:
        reraise(exc)
