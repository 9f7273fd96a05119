"""The Python registrations of the ``torch.ops.causal_conv1d`` ops: fake (meta) kernels and the
autograd of ``fwd`` and ``packed_fwd``.

The schemas live in csrc/ops.cpp; the CPU and CUDA kernels in csrc/cpu and csrc/cuda. The fake
kernels allocate outputs exactly as the real ones do (csrc/checks.h, ``empty_bdl``): in x's layout,
channel-last when ``x.stride(1) == 1 and x.stride(2) != 1``, else channel-first.

Autograd of the stable-ABI op layer: ``torch.library.register_autograd`` on ``fwd`` (the LibTorch
stable ABI has no C++ autograd). The legacy (ATen) op layer registers the same rules in C++
(csrc/autograd.cpp: ~4x cheaper per call with grad); they are registered here only when no C++
autograd kernel is (:data:`PYTHON_AUTOGRAD`). The backward calls ``causal_conv1d::bwd``:
  * dout undefined (only final_states used) -> zeros in x's layout; dout in neither layout ->
    contiguous (the op accepts channel-first or channel-last only);
  * dfinal_states only when the forward returned final states; undefined -> None (= zeros);
  * dinitial_states only when initial_states required grad at the forward;
  * no gradients for seq_idx and the flags; a bias gradient only with a bias;
  * residual (``out = act(conv(x) + bias) + residual``, fused in the kernels' output store): its
    gradient is dout itself, no kernel work (bwd recomputes the pre-activation from x alone).
``packed_fwd`` (packed sequences, per-sequence states) has its autograd here in both op layers
(:func:`_packed_fwd_backward`, calling ``causal_conv1d::packed_bwd`` with the same rules, and
dinitial_states for every sequence when initial_states requires grad).
The Python autograd kernel runs on every dispatch of ``fwd``, gradient or not (microseconds): the
Python API (causal_conv1d_interface.py, cpp_functions.py) therefore calls ``fwd`` below autograd
when no input needs a gradient (:func:`use_below_autograd`), so the eager no-grad path costs what
the kernel costs.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch

__all__ = [
    "check_devices",
    "is_channel_last",
    "empty_bdl",
    "needs_grad",
    "use_below_autograd",
    "PYTHON_AUTOGRAD",
    "CausalConv1dFwd",
    "apply_fwd",
    "fwd_op",
    "packed_fwd",
]

Tensor = torch.Tensor


def is_channel_last(x: Tensor) -> bool:
    """Whether x (batch, dim, seqlen) is channel-last (the rule of csrc/checks.h)."""
    return x.stride(2) != 1 and x.stride(1) == 1


def empty_bdl(
    batch: Any, dim: Any, seqlen: Any, channel_last: bool, like: Tensor, dtype: Optional[torch.dtype] = None
) -> Tensor:
    """A new (batch, dim, seqlen) tensor in the given layout (mirrors ``empty_bdl`` in checks.h)."""
    dtype = like.dtype if dtype is None else dtype
    if channel_last:
        return like.new_empty((batch, seqlen, dim), dtype=dtype).transpose(1, 2)
    return like.new_empty((batch, dim, seqlen), dtype=dtype)


def check_devices(x: Tensor, **tensors: Optional[Tensor]) -> None:
    """Refuse tensor arguments on another device than x (the rule of csrc/checks.h, check_same_device).

    The fake kernels below also run for real calls in which *any* argument is on the ``meta`` device
    (the dispatcher picks the Meta kernel): a CPU x with an unmaterialised meta weight would otherwise
    return uninitialised memory. Under torch.compile (fake tensors) every argument reports its real
    device and this passes, as it does when every argument is on ``meta``."""
    for name, t in tensors.items():
        if t is None or t.device == x.device:
            continue
        hint = ""
        if "meta" in (t.device.type, x.device.type):
            hint = (
                "; tensors on the meta device hold no data (e.g. weights left unmaterialised after an "
                "empty-weights init): materialise and load them first (module.to_empty(device=...))"
            )
        raise RuntimeError(f"{name} must be on the same device as x ({x.device}), got {t.device}{hint}")


def _register_fake(op_name: str, outputs: Callable[..., Any]) -> None:
    """Register the fake kernel of ``causal_conv1d::<op_name>``: :func:`check_devices` over every tensor
    argument of the op's schema (csrc/ops.cpp: named and ordered as there), then ``outputs(*args)``,
    the op's new outputs, from the schema's arguments in order."""
    arguments = getattr(torch.ops.causal_conv1d, op_name).default._schema.arguments
    names = [a.name for a in arguments]
    tensors = [(i, a.name) for i, a in enumerate(arguments) if i > 0 and "Tensor" in str(a.type)]

    defaults = [a.default_value if a.has_default_value() else None for a in arguments]

    def fake(*args: Any, **kwargs: Any) -> Any:
        args += tuple(kwargs.get(name, defaults[i]) for i, name in enumerate(names) if i >= len(args))
        check_devices(args[0], **{name: args[i] for i, name in tensors})
        return outputs(*args)

    torch.library.register_fake(f"causal_conv1d::{op_name}")(fake)


def _states_or_empty(wanted: bool, batch: Any, x: Tensor, weight: Tensor, channel_last: bool) -> Tensor:
    """(batch, dim, width - 1) states in x's layout when wanted, else the ops' empty placeholder."""
    if not wanted:
        return x.new_empty((0,))
    return empty_bdl(batch, x.shape[1], weight.shape[1] - 1, channel_last, x)


def _fwd_outputs(x: Tensor, weight: Tensor, out_batch: Any, states_batch: Any, final_states: bool) -> tuple:
    """fwd's / packed_fwd's (out, final_states): out_batch rows of out, states_batch states."""
    _, dim, seqlen = x.shape
    channel_last = is_channel_last(x)
    out = empty_bdl(out_batch, dim, seqlen, channel_last, x)
    return out, _states_or_empty(final_states, states_batch, x, weight, channel_last)


def _bwd_outputs(
    x: Tensor, weight: Tensor, bias: Optional[Tensor], out_batch: Any, states_batch: Any, dinitial_states: bool
) -> tuple:
    """bwd's / packed_bwd's (dx, dweight, dbias, dinitial_states)."""
    _, dim, seqlen = x.shape
    channel_last = is_channel_last(x)
    dx = empty_bdl(out_batch, dim, seqlen, channel_last, x)
    dweight = weight.new_empty((dim, weight.shape[1]))
    dbias = bias.new_empty((dim,)) if bias is not None else weight.new_empty((0,))
    return dx, dweight, dbias, _states_or_empty(dinitial_states, states_batch, x, weight, channel_last)


def _update_out(x: Tensor, *_: Any) -> Tensor:
    """update's and spec_update's out: x's shape and dtype; a 2-D x ((batch, dim), one token, or for
    spec_update ragged (num_tokens, dim)) gives a contiguous out as the kernels do, a 3-D one x's layout."""
    if x.dim() == 2:
        return x.new_empty(x.shape)
    batch, dim, seqlen = x.shape
    return empty_bdl(batch, dim, seqlen, is_channel_last(x), x)


def _varlen_fwd_out(x: Tensor, *_: Any) -> Tensor:
    """varlen_fwd's out (dim, total_tokens): x's dtype, in x's layout (csrc/varlen_checks.h, empty_dt)."""
    dim, total = x.shape
    if x.stride(1) != 1 and x.stride(0) == 1:
        return x.new_empty((total, dim)).transpose(0, 1)
    return x.new_empty((dim, total))


# fwd and bwd: x (batch, dim, seqlen), a state per batch row; packed_fwd and packed_bwd: x (1, dim,
# total_tokens), a state per sequence of cu_seqlens. The residual of fwd / packed_fwd changes no output's
# shape or layout (out is in x's layout, whatever the residual's strides).
_register_fake("fwd", lambda x, w, b, seq_idx, init, rfs, silu, res: _fwd_outputs(x, w, x.shape[0], x.shape[0], rfs))
_register_fake("packed_fwd", lambda x, w, b, cu, init, rfs, silu, res: _fwd_outputs(x, w, 1, cu.shape[0] - 1, rfs))
_register_fake(
    "bwd", lambda x, w, b, dout, seq_idx, init, dfin, rdis, silu: _bwd_outputs(x, w, b, x.shape[0], x.shape[0], rdis)
)
_register_fake(
    "packed_bwd", lambda x, w, b, dout, cu, init, dfin, rdis, silu: _bwd_outputs(x, w, b, 1, cu.shape[0] - 1, rdis)
)
_register_fake("update", _update_out)
_register_fake("spec_update", _update_out)
_register_fake("varlen_fwd", _varlen_fwd_out)


# ---------------------------------------------------------------------------------------------
# Autograd of fwd

_bwd = torch.ops.causal_conv1d.bwd.default


def needs_grad(
    x: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    initial_states: Optional[Tensor],
    residual: Optional[Tensor] = None,
) -> bool:
    """Whether a forward on these inputs must go through autograd: grad mode on and an input that
    requires grad (seq_idx is int32: it never does), or a torch.compile trace (always the full op)."""
    if torch.is_grad_enabled() and (
        x.requires_grad
        or weight.requires_grad
        or (bias is not None and bias.requires_grad)
        or (initial_states is not None and initial_states.requires_grad)
        or (residual is not None and residual.requires_grad)
    ):
        return True
    return torch.compiler.is_compiling()


def _fwd_setup_context(ctx: Any, inputs: tuple, output: tuple) -> None:
    """fwd's and packed_fwd's (their inputs line up: x, weight, bias, seq_idx / cu_seqlens,
    initial_states, return_final_states, silu, residual)."""
    _save_fwd(ctx, *inputs)


def _save_fwd(
    ctx: Any,
    x: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    packing: Optional[Tensor],
    initial_states: Optional[Tensor],
    return_final_states: bool,
    silu: bool,
    residual: Optional[Tensor],
) -> None:
    """What the backward of fwd / packed_fwd needs, saved on ctx (both autograd routes)."""
    ctx.set_materialize_grads(False)  # unused outputs arrive as None: no zero tensors built
    ctx.save_for_backward(x, weight, bias, packing, initial_states)
    ctx.silu = silu
    ctx.return_final_states = return_final_states
    ctx.return_dinitial_states = initial_states is not None and ctx.needs_input_grad[4]
    ctx.return_dresidual = residual is not None and ctx.needs_input_grad[7]


def _conv_backward(bwd: Any, ctx: Any, dout: Optional[Tensor], dfinal_states: Optional[Tensor]) -> tuple:
    """The backward of fwd (bwd = the bwd op, packing = seq_idx) or packed_fwd (packed_bwd, cu_seqlens)."""
    from causal_conv1d._errors import reraise  # noqa: PLC0415  (cheap after the first call)

    x, weight, bias, packing, initial_states = ctx.saved_tensors
    dresidual = dout if ctx.return_dresidual else None  # d(out) / d(residual) = 1; None: zeros
    if dout is None:
        dout = torch.zeros_like(x)
    elif dout.stride(2) != 1 and dout.stride(1) != 1:
        dout = dout.contiguous()
    rdis = ctx.return_dinitial_states
    try:
        dx, dweight, dbias, dinitial_states = bwd(
            x,
            weight,
            bias,
            dout,
            packing,
            initial_states,
            dfinal_states if ctx.return_final_states else None,
            rdis,
            ctx.silu,
        )
    except RuntimeError as exc:
        reraise(exc)
    return (
        dx,
        dweight,
        dbias if bias is not None else None,
        None,  # seq_idx / cu_seqlens
        dinitial_states if rdis else None,
        None,  # return_final_states
        None,  # silu
        dresidual,
    )


def _fwd_backward(ctx: Any, dout: Optional[Tensor], dfinal_states: Optional[Tensor]) -> tuple:
    return _conv_backward(_bwd, ctx, dout, dfinal_states)


# ---------------------------------------------------------------------------------------------
# Autograd of packed_fwd (both op layers)

_packed_bwd = torch.ops.causal_conv1d.packed_bwd.default


def _packed_fwd_backward(ctx: Any, dout: Optional[Tensor], dfinal_states: Optional[Tensor]) -> tuple:
    return _conv_backward(_packed_bwd, ctx, dout, dfinal_states)


torch.library.register_autograd("causal_conv1d::packed_fwd", _packed_fwd_backward, setup_context=_fwd_setup_context)
#: The packed-sequence forward (autograd above; its CUDA kernels are the varlen_fwd ones).
packed_fwd = torch.ops.causal_conv1d.packed_fwd.default


#: Whether fwd's autograd is the Python one below (stable op layer) rather than csrc/autograd.cpp (legacy).
PYTHON_AUTOGRAD = not torch._C._dispatch_has_kernel_for_dispatch_key("causal_conv1d::fwd", "Autograd")
if PYTHON_AUTOGRAD:
    torch.library.register_autograd("causal_conv1d::fwd", _fwd_backward, setup_context=_fwd_setup_context)


_fwd = torch.ops.causal_conv1d.fwd.default
#: The C++ callable behind ``_fwd.__call__`` (``OpOverload.__call__`` is ``return self._op(*args,
#: **kwargs)``): the same dispatcher entry, one Python frame less. Eager paths only; a torch.compile
#: trace must see the OpOverload itself (Dynamo knows OpOverloads, not this builtin).
fwd_op = _fwd._op
# Below autograd for a dense CPU/CUDA tensor, cheaper than the _AutoDispatchBelowAutograd guard (one
# pybind object built, entered and left per call: ~0.6 us more on the 2-core host): exclude the
# Autograd functionality key (AutogradCPU, AutogradCUDA, ...) in this thread's dispatch TLS, and
# restore it. The guard also excludes AutogradOther and AutogradNestedTensor, the autograd keys of
# backends that have no causal_conv1d kernel: with those tensors the registered Python autograd
# kernel runs and the redispatch fails with the same "could not run" error the guard would give.
AUTOGRAD_KEY = torch._C.DispatchKey.AutogradFunctionality
tls_excluded = torch._C._dispatch_tls_is_dispatch_key_excluded
tls_set_excluded = torch._C._dispatch_tls_set_dispatch_key_excluded


class CausalConv1dFwd(torch.autograd.Function):
    """fwd's Python autograd (the setup_context and backward above) as the Python API applies it
    itself in eager mode when an input requires grad (stable op layer): the registered kernel's route
    (dispatcher -> Python kernel -> torch.library's generated Function -> redispatch) costs about twice
    as much per call (benchmarks/host_overhead.py). The ctx-style forward is the cheaper kind of
    autograd.Function (measured ~3x cheaper than a setup_context-style one); it saves what
    _fwd_setup_context saves (_save_fwd). :func:`apply_fwd` applies it without Function.apply's Python layer.
    torch.compile traces, and direct ``torch.ops`` calls, use the registered kernel."""

    @staticmethod
    def forward(ctx, x, weight, bias, seq_idx, initial_states, return_final_states, silu, residual):  # noqa: ANN001,ANN205
        # below autograd (see tls_set_excluded above; under Function.forward, grad mode is off but the
        # dispatcher would still enter fwd's Python autograd kernel)
        if tls_excluded(AUTOGRAD_KEY):
            outputs = fwd_op(x, weight, bias, seq_idx, initial_states, return_final_states, silu, residual)
        else:
            tls_set_excluded(AUTOGRAD_KEY, True)
            try:
                outputs = fwd_op(x, weight, bias, seq_idx, initial_states, return_final_states, silu, residual)
            finally:
                tls_set_excluded(AUTOGRAD_KEY, False)
        _save_fwd(ctx, x, weight, bias, seq_idx, initial_states, return_final_states, silu, residual)
        return outputs

    backward = staticmethod(_fwd_backward)


# torch.autograd.Function.apply is Python around the C++ apply (torch._C._FunctionBase.apply): with
# no functorch transform active (and a ctx-style Function: no signature binding) it only unwraps dead
# functorch wrappers among the arguments and calls the C++ apply, yet that layer costs ~3 us per call
# on the 2-core host (a generator over the arguments, two more calls). apply_fwd does the same inline.
_c_apply = super(torch.autograd.Function, CausalConv1dFwd).apply
_functorch_active = torch._C._are_functorch_transforms_active
_unwrap_if_dead = torch._C._functorch.unwrap_if_dead


def apply_fwd(
    x: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    seq_idx: Optional[Tensor],
    initial_states: Optional[Tensor],
    return_final_states: bool,
    silu: bool,
    residual: Optional[Tensor] = None,
) -> tuple[Tensor, Tensor]:
    """``CausalConv1dFwd.apply(...)``, the same result at a lower per-call cost (see above)."""
    if _functorch_active():  # custom_function_call's route: Function.apply itself
        return CausalConv1dFwd.apply(x, weight, bias, seq_idx, initial_states, return_final_states, silu, residual)
    return _c_apply(
        _unwrap_if_dead(x),
        _unwrap_if_dead(weight),
        None if bias is None else _unwrap_if_dead(bias),
        None if seq_idx is None else _unwrap_if_dead(seq_idx),
        None if initial_states is None else _unwrap_if_dead(initial_states),
        return_final_states,
        silu,
        None if residual is None else _unwrap_if_dead(residual),
    )


def use_below_autograd(x: Tensor, weight: Tensor, bias: Optional[Tensor], initial_states: Optional[Tensor]) -> bool:
    """Whether the Python API should call fwd below autograd: its autograd kernel is Python and
    nothing needs it (with the C++ kernel of the legacy build a direct call is cheapest)."""
    return PYTHON_AUTOGRAD and not needs_grad(x, weight, bias, initial_states)
