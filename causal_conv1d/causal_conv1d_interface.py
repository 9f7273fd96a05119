"""The public API, with upstream causal-conv1d v1.7.0's module path, names, defaults and returns.

``causal_conv1d_fn`` / ``causal_conv1d_update`` call the ``torch.ops.causal_conv1d`` ops (CPU and
CUDA kernels; fake kernels and the autograd of ``fwd`` in ``causal_conv1d._ops``);
``causal_conv1d_ref`` / ``causal_conv1d_update_ref`` are plain-PyTorch references with the same
semantics.

The two wrappers sit on the eager decode/prefill path, where a Python line costs ~0.1 µs and a
torch call ~1 µs (benchmarks/host_overhead.py): they bind the op overloads once, look the activation
up in a dict, call ``fwd`` below autograd when its autograd kernel is Python (stable op layer:
``causal_conv1d._ops``) and no input needs a gradient, and call nothing they do not need. Argument errors of the stable-ABI
op layer arrive tagged and are re-raised with their type (``causal_conv1d._errors``).
"""

from __future__ import annotations

from typing import Optional, Union

import torch
import torch.nn.functional as F

from causal_conv1d._errors import reraise
from causal_conv1d._ops import AUTOGRAD_KEY as _AUTOGRAD_KEY
from causal_conv1d._ops import PYTHON_AUTOGRAD as _python_autograd
from causal_conv1d._ops import apply_fwd as _apply_fwd
from causal_conv1d._ops import fwd_op as _fwd_op
from causal_conv1d._ops import packed_fwd as _packed_fwd
from causal_conv1d._ops import tls_excluded as _tls_excluded
from causal_conv1d._ops import tls_set_excluded as _tls_set_excluded

__all__ = [
    "InvalidActivation",
    "causal_conv1d_fn",
    "causal_conv1d_update",
    "causal_conv1d_ref",
    "causal_conv1d_update_ref",
]

Tensor = torch.Tensor

_ACTIVATIONS = (None, "silu", "swish")
# activation -> the ops' ``silu`` flag (one dict lookup per call).
_SILU = {None: False, "silu": True, "swish": True}

# Bound once: ``torch.ops.causal_conv1d`` exists because causal_conv1d/__init__.py imports ``_C``
# before this module. Each ``torch.ops.<ns>.<op>.default`` lookup would cost ~0.2 µs per call.
_fwd = torch.ops.causal_conv1d.fwd.default
_update = torch.ops.causal_conv1d.update.default
# Eager calls skip OpOverload.__call__'s Python frame (its body is ``self._op(*args, **kwargs)``); a
# torch.compile trace must see the OpOverload.
_update_op = _update._op
_grad_enabled = torch.is_grad_enabled
_is_compiling = torch.compiler.is_compiling


class InvalidActivation(ValueError, NotImplementedError):
    """An activation other than None, "silu" or "swish".

    A ValueError; also a NotImplementedError, which is what upstream raised.
    """


def _invalid_activation(activation: object) -> InvalidActivation:
    return InvalidActivation(f"Invalid activation (expected None, 'silu' or 'swish'): {activation!r}")


def _silu(activation: Optional[str]) -> bool:
    if activation not in _ACTIVATIONS:
        raise _invalid_activation(activation)
    return activation is not None


def causal_conv1d_fn(
    x: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    seq_idx: Optional[Tensor] = None,
    initial_states: Optional[Tensor] = None,
    return_final_states: bool = False,
    final_states_out: Optional[Tensor] = None,
    activation: Optional[str] = None,
    *,
    cu_seqlens: Optional[Tensor] = None,
    residual: Optional[Tensor] = None,
) -> Union[Tensor, tuple[Tensor, Tensor]]:
    """Causal depthwise conv1d: ``out`` (batch, dim, seqlen), or ``(out, final_states)``.

    x: (batch, dim, seqlen), channel-first (stride(2) == 1) or channel-last (stride(1) == 1);
    weight: (dim, width); bias: (dim,); seq_idx: (batch, seqlen) int32, negative = padding;
    initial_states: (batch, dim, width - 1); final_states_out: (batch, dim, width - 1), written to;
    activation: None, "silu" or "swish".

    Packed sequences (keyword ``cu_seqlens``, int32 (n + 1,)): x is (1, dim, total_tokens) and
    sequence i is tokens ``[cu_seqlens[i], cu_seqlens[i + 1])``; initial_states and the final states
    are per sequence, (n, dim, width - 1), and differentiable. seq_idx must be None then.

    Fused residual (keyword ``residual``): ``out = act(conv(x) + bias) + residual``, added in the
    kernels' float32 accumulator and rounded once to x's dtype (the same as adding it afterwards, one
    rounding fewer and one pass over out less). residual: x's shape (packed: (1, dim, total_tokens)),
    dtype and device, any strides; one whose unit stride is not on x's unit-stride axis (dim for a
    channel-last x, seqlen for a channel-first one) is copied into x's layout first. Its gradient is
    the gradient of out. Works with every other argument; with seq_idx, a padding position (negative
    id) gives ``residual`` there (the conv's output is 0).
    """
    try:
        silu = _SILU[activation]
    except (KeyError, TypeError):  # TypeError: an unhashable activation
        raise _invalid_activation(activation) from None
    strides = x.stride()  # one call; x.dim() + 2 x.stride(i) cost 3
    if len(strides) == 3 and strides[2] != 1 and strides[1] != 1:  # neither layout (C++ names bad shapes)
        x = x.contiguous()
    if residual is not None and not isinstance(residual, Tensor):
        raise TypeError(
            f"residual must be a torch.Tensor of x's shape {tuple(x.shape)} or None, got {type(residual).__name__}"
        )
    rfs = bool(return_final_states)
    if cu_seqlens is not None:
        if seq_idx is not None:
            raise ValueError("seq_idx must be None when cu_seqlens is given (one packing description per call)")
        try:
            out, final_states = _packed_fwd(x, weight, bias, cu_seqlens, initial_states, rfs, silu, residual)
        except RuntimeError as exc:
            reraise(exc)
    else:
        try:
            # A torch.compile trace: the OpOverload (Dynamo traces it). Legacy C++ autograd: the op and
            # its autograd kernel. Python autograd (stable op layer): the cheaper CausalConv1dFwd when an
            # input requires grad, else below autograd (the rule of _ops.use_below_autograd, inlined: a
            # call costs ~0.1 µs).
            if _is_compiling():
                out, final_states = _fwd(x, weight, bias, seq_idx, initial_states, rfs, silu, residual)
            elif not _python_autograd:
                out, final_states = _fwd_op(x, weight, bias, seq_idx, initial_states, rfs, silu, residual)
            elif _grad_enabled() and (
                x.requires_grad
                or weight.requires_grad
                or (bias is not None and bias.requires_grad)
                or (initial_states is not None and initial_states.requires_grad)
                or (residual is not None and residual.requires_grad)
            ):
                out, final_states = _apply_fwd(x, weight, bias, seq_idx, initial_states, rfs, silu, residual)
            elif _tls_excluded(_AUTOGRAD_KEY):  # below autograd already (e.g. inference_mode)
                out, final_states = _fwd_op(x, weight, bias, seq_idx, initial_states, rfs, silu, residual)
            else:  # below autograd: the Autograd key excluded for the call (causal_conv1d._ops)
                _tls_set_excluded(_AUTOGRAD_KEY, True)
                try:
                    out, final_states = _fwd_op(x, weight, bias, seq_idx, initial_states, rfs, silu, residual)
                finally:
                    _tls_set_excluded(_AUTOGRAD_KEY, False)
        except RuntimeError as exc:
            reraise(exc)
    if not rfs:
        return out
    if final_states_out is not None:
        final_states_out.copy_(final_states)
        return out, final_states_out
    return out, final_states


def causal_conv1d_update(
    x: Tensor,
    conv_state: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    activation: Optional[str] = None,
    cache_seqlens: Optional[Tensor] = None,
    conv_state_indices: Optional[Tensor] = None,
) -> Tensor:
    """One decoding step: ``out`` with x's shape; ``conv_state`` is updated in place.

    x: (batch, dim) or (batch, dim, seqlen); conv_state: (batch or cache size, dim, state_len >= width - 1);
    cache_seqlens: (batch,) int32, makes conv_state a circular buffer (tokens are written at
    cache_seqlens % state_len); conv_state_indices: (batch,) int32 rows of conv_state, negative =
    padding slot (zero output, state untouched).
    """
    try:
        silu = _SILU[activation]
    except (KeyError, TypeError):  # TypeError: an unhashable activation
        raise _invalid_activation(activation) from None
    # the op takes x (batch, dim) as well as (batch, dim, seqlen): no Python views on the decode path
    try:
        if _is_compiling():  # Dynamo traces the OpOverload
            return _update(x, conv_state, weight, bias, silu, cache_seqlens, conv_state_indices)
        return _update_op(x, conv_state, weight, bias, silu, cache_seqlens, conv_state_indices)
    except RuntimeError as exc:
        reraise(exc)


def causal_conv1d_ref(
    x: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    initial_states: Optional[Tensor] = None,
    return_final_states: bool = False,
    final_states_out: Optional[Tensor] = None,
    activation: Optional[str] = None,
    seq_idx: Optional[Tensor] = None,
) -> Union[Tensor, tuple[Tensor, Tensor]]:
    """Reference ``causal_conv1d_fn``, computed in weight's dtype (upstream 1.7.0's argument order:
    ``seq_idx`` last).

    seq_idx: (batch, seqlen) int; a tap counts only when its token has the output's seq id, and an
    output whose seq id is negative is 0. With initial_states, the state belongs to the sequence of
    the row's first token: a tap before position 0 reads it iff ``seq_idx[b, t] == seq_idx[b, 0]``.
    return_final_states is refused with seq_idx (as upstream).
    """
    silu = _silu(activation)
    dtype_in = x.dtype
    x = x.to(weight.dtype)
    seqlen = x.shape[-1]
    dim, width = weight.shape
    if seq_idx is not None:
        if tuple(seq_idx.shape) != (x.shape[0], seqlen):
            raise ValueError(
                f"seq_idx must have shape (batch, seqlen) = {(x.shape[0], seqlen)}, got {tuple(seq_idx.shape)}"
            )
        if return_final_states:
            raise ValueError("return_final_states must be False when seq_idx is given")
        seq_idx = seq_idx.to(device=x.device, dtype=torch.long)
        batch = x.shape[0]
        if initial_states is None:
            prev = x.new_zeros(batch, dim, width - 1)
            prev_seq = seq_idx.new_full((batch, width - 1), -1)
        else:
            prev = initial_states.to(weight.dtype)
            prev_seq = seq_idx[:, :1].expand(-1, width - 1)
        xs = torch.cat([prev, x], dim=-1)  # (batch, dim, width - 1 + seqlen)
        ss = torch.cat([prev_seq, seq_idx], dim=-1)
        out = x.new_zeros(x.shape) if bias is None else bias.to(weight.dtype)[None, :, None].expand(x.shape)
        for k in range(width):  # tap k reads the token at t - (width - 1) + k
            same = (ss[:, k : k + seqlen] == seq_idx).unsqueeze(1)
            out = out + weight[:, k][None, :, None] * xs[..., k : k + seqlen] * same
        out = out.masked_fill((seq_idx < 0).unsqueeze(1), 0.0)
        out = F.silu(out) if silu else out
        return out.to(dtype=dtype_in)
    if initial_states is None:
        out = F.conv1d(x, weight.unsqueeze(1), bias, padding=width - 1, groups=dim)
    else:
        x = torch.cat([initial_states.to(weight.dtype), x], dim=-1)
        out = F.conv1d(x, weight.unsqueeze(1), bias, padding=0, groups=dim)
    out = out[..., :seqlen]
    final_states = None
    if return_final_states:
        final_states = F.pad(x, (width - 1 - x.shape[-1], 0)).to(dtype_in)  # (batch, dim, width - 1)
        if final_states_out is not None:
            final_states_out.copy_(final_states)
            final_states = final_states_out
    out = (F.silu(out) if silu else out).to(dtype=dtype_in)
    return out if not return_final_states else (out, final_states)


def causal_conv1d_update_ref(
    x: Tensor,
    conv_state: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    activation: Optional[str] = None,
    cache_seqlens: Optional[Tensor] = None,
) -> Tensor:
    """Reference ``causal_conv1d_update`` (no conv_state_indices); updates conv_state in place."""
    silu = _silu(activation)
    dtype_in = x.dtype
    unsqueeze = x.dim() == 2
    if unsqueeze:
        x = x.unsqueeze(-1)
    batch, dim, seqlen = x.shape
    width = weight.shape[1]
    state_len = conv_state.shape[-1]
    if conv_state.shape != (batch, dim, state_len):
        raise ValueError(
            f"conv_state must have shape (batch, dim, state_len) = {(batch, dim, state_len)}, got {tuple(conv_state.shape)}"
        )
    if weight.shape != (dim, width):
        raise ValueError(f"weight must have shape (dim, width) = {(dim, width)}, got {tuple(weight.shape)}")
    if cache_seqlens is None:
        x_new = torch.cat([conv_state, x], dim=-1).to(weight.dtype)  # (batch, dim, state_len + seqlen)
        conv_state.copy_(x_new[:, :, -state_len:])
    else:
        width_idx = torch.arange(-(width - 1), 0, dtype=torch.long, device=x.device).unsqueeze(
            0
        ) + cache_seqlens.unsqueeze(1)
        width_idx = torch.remainder(width_idx, state_len).unsqueeze(1).expand(-1, dim, -1)
        x_new = torch.cat([conv_state.gather(2, width_idx), x], dim=-1).to(weight.dtype)
        copy_idx = torch.arange(seqlen, dtype=torch.long, device=x.device).unsqueeze(0) + cache_seqlens.unsqueeze(1)
        copy_idx = torch.remainder(copy_idx, state_len).unsqueeze(1).expand(-1, dim, -1)
        conv_state.scatter_(2, copy_idx, x)
    out = F.conv1d(x_new, weight.unsqueeze(1), bias, padding=0, groups=dim)[:, :, -seqlen:]
    if unsqueeze:
        out = out.squeeze(-1)
    return (F.silu(out) if silu else out).to(dtype=dtype_in)
