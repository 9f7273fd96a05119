"""Upstream's extension-module names, for code that does ``import causal_conv1d_cuda``.

Upstream causal-conv1d ships its kernels as a top-level extension module ``causal_conv1d_cuda``
whose functions write into pre-allocated outputs; mamba-ssm and others import it next to the
package. Here the kernels are torch ops (``torch.ops.causal_conv1d.*``, CUDA and CPU); this module
keeps upstream's function names and in-place signatures on top of them.
"""

from __future__ import annotations

from typing import Optional

import torch

import causal_conv1d  # noqa: F401  (runs the import guard and registers the ops)
from causal_conv1d import cpp_functions

__all__ = ["causal_conv1d_fwd", "causal_conv1d_bwd", "causal_conv1d_update"]

Tensor = torch.Tensor


def causal_conv1d_fwd(
    x: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    seq_idx: Optional[Tensor],
    initial_states: Optional[Tensor],
    out: Tensor,
    final_states_out: Optional[Tensor],
    silu_activation: bool,
) -> None:
    """Forward into ``out`` (and ``final_states_out`` when given)."""
    out.copy_(
        cpp_functions.causal_conv1d_fwd_function(
            x, weight, bias, seq_idx, initial_states, final_states_out, silu_activation
        )
    )


def causal_conv1d_bwd(
    x: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    dout: Tensor,
    seq_idx: Optional[Tensor],
    initial_states: Optional[Tensor],
    dfinal_states: Optional[Tensor],
    dx: Tensor,
    dweight: Tensor,
    dbias: Optional[Tensor],
    dinitial_states: Optional[Tensor],
    silu_activation: bool,
) -> None:
    """Backward into ``dx``, ``dweight`` and, when given, ``dbias`` and ``dinitial_states``."""
    _, dw, db, dinit = cpp_functions.causal_conv1d_bwd_function(
        x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx, dinitial_states is not None, silu_activation
    )
    dweight.copy_(dw)
    if dbias is not None:
        if db is None:
            raise ValueError("causal_conv1d_bwd: dbias was given but bias is None; pass dbias=None without a bias")
        dbias.copy_(db)
    if dinitial_states is not None and dinit is not None:
        dinitial_states.copy_(dinit)


def causal_conv1d_update(
    x: Tensor,
    conv_state: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    out: Tensor,
    silu_activation: bool,
    cache_seqlens: Optional[Tensor],
    conv_state_indices: Optional[Tensor],
) -> None:
    """One decoding step into ``out``; ``conv_state`` is updated in place."""
    out.copy_(
        cpp_functions.causal_conv1d_update_function(
            x, conv_state, weight, bias, silu_activation, cache_seqlens, conv_state_indices
        )
    )
