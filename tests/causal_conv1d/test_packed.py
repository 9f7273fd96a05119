"""Packed sequences: causal_conv1d_fn(cu_seqlens=...) with per-sequence initial / final states and
their gradients (ops packed_fwd / packed_bwd), against the per-sequence float64 reference
(causal_conv1d._reference.packed_fwd_ref), on the CPU and (marked gpu) CUDA."""

from __future__ import annotations

from typing import Optional

import pytest
import torch
from _cc1d_ref import make_bdl, raises_from_op

from causal_conv1d import causal_conv1d_fn
from causal_conv1d._reference import REL_TOL, fwd_ref, packed_fwd_ref, rel_err

ops = torch.ops.causal_conv1d

# Empty sequences (first, inside, last), sequences shorter than the window, and ones that cross
# the CUDA backward's 16-token chunks with and without interior chunks.
LENS = [0, 1, 2, 40, 0, 3, 70, 17, 5, 0]
FWD_TOL = {**REL_TOL, torch.float64: 1e-12}
GRAD_TOL = {torch.float64: 1e-10, torch.float32: 1e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}


def cu_of(lens: list[int], device: str) -> torch.Tensor:
    return torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device=device)


def packed_x(dim: int, total: int, layout: str, dtype: torch.dtype, device: str) -> torch.Tensor:
    """(1, dim, total) in a layout of _cc1d_ref.make_bdl ("cl": the view of a (1, total, dim) tensor)."""
    return make_bdl(1, dim, total, layout, dtype, device)


def lens_inputs(dim: int, width: int, layout: str, dtype: torch.dtype, device: str, bias: bool, states: bool) -> tuple:
    """(cu_seqlens, x, weight, bias or None, initial_states or None) of the sequences LENS."""
    cu = cu_of(LENS, device)
    x = packed_x(dim, int(cu[-1]), layout, dtype, device)
    w = torch.randn(dim, width, dtype=dtype, device=device)
    b = torch.randn(dim, dtype=dtype, device=device) if bias else None
    init = torch.randn(len(LENS), dim, width - 1, dtype=dtype, device=device) if states else None
    return cu, x, w, b, init


def _leaves(*ts: Optional[torch.Tensor], double: bool = False) -> list[Optional[torch.Tensor]]:
    """Leaves for autograd; float64 for the reference (16-bit leaves would round each sequence's share
    of dweight / dbias to 16 bits and sum the shares in 16 bits)."""
    return [
        (t.detach().double() if double else t.detach().clone()).requires_grad_() if t is not None else None for t in ts
    ]


def grads(x, w, b, cu, init, silu, dout, dfinal, ours: bool):
    xl, wl, bl, il = _leaves(x, w, b, init, double=not ours)
    if ours:
        out, final = causal_conv1d_fn(
            xl,
            wl,
            bl,
            initial_states=il,
            return_final_states=True,
            activation="silu" if silu else None,
            cu_seqlens=cu,
        )
    else:
        out, final = packed_fwd_ref(xl, wl, bl, cu, il, silu=silu)
    loss = (out.double() * dout.double()).sum()
    if dfinal is not None:
        loss = loss + (final.double() * dfinal.double()).sum()
    loss.backward()
    return [t.grad if t is not None else None for t in (xl, wl, bl, il)]


def dtypes_for(device: str) -> list[torch.dtype]:
    return [torch.float32, torch.float16, torch.bfloat16] + ([torch.float64] if device == "cpu" else [])


@pytest.mark.parametrize("layout", ["cf", "cl", "cf_view", "cl_view"])
@pytest.mark.parametrize("width", [2, 3, 4, 5, 8])
@pytest.mark.parametrize("states", [False, True])
def test_forward_matches_reference(device: str, layout: str, width: int, states: bool) -> None:
    dim, n = 12, len(LENS)
    for dtype in dtypes_for(device):
        cu, x, w, b, init = lens_inputs(dim, width, layout, dtype, device, bias=True, states=states)
        out, final = causal_conv1d_fn(
            x, w, b, initial_states=init, return_final_states=True, activation="silu", cu_seqlens=cu
        )
        ref, ref_final = packed_fwd_ref(x, w, b, cu, init, silu=True)
        assert out.shape == x.shape and out.dtype == dtype and out.stride(1 if layout.startswith("cl") else 2) == 1
        assert final.shape == (n, dim, width - 1) and final.dtype == dtype
        assert rel_err(out, ref) < FWD_TOL[dtype], dtype
        assert torch.equal(final.double(), ref_final), dtype  # exact copies of the last inputs
        if states:  # an empty sequence's final state is its initial state
            assert torch.equal(final[0], init[0]) and torch.equal(final[-1], init[-1])
        else:
            assert not final[0].any()


@pytest.mark.parametrize("layout", ["cf", "cl"])
@pytest.mark.parametrize("width", [2, 4, 6])
@pytest.mark.parametrize("case", ["all", "no_states", "init_only", "dfinal_only", "no_bias_identity"])
def test_gradients_match_reference(device: str, layout: str, width: int, case: str) -> None:
    dim, n = 10, len(LENS)
    for dtype in dtypes_for(device):
        bias, states = case != "no_bias_identity", case in ("all", "init_only")
        cu, x, w, b, init = lens_inputs(dim, width, layout, dtype, device, bias=bias, states=states)
        dout = torch.randn(1, dim, x.shape[2], dtype=dtype, device=device)
        dfinal = torch.randn(n, dim, width - 1, dtype=dtype, device=device) if case in ("all", "dfinal_only") else None
        silu = case != "no_bias_identity"
        ours = grads(x, w, b, cu, init, silu, dout, dfinal, ours=True)
        ref = grads(x, w, b, cu, init, silu, dout, dfinal, ours=False)
        for name, g, r in zip(("dx", "dweight", "dbias", "dinitial_states"), ours, ref):
            if r is None:
                assert g is None, name
                continue
            assert g.dtype == dtype, name  # the reference's are float64
            assert rel_err(g, r) < GRAD_TOL[dtype], f"{name} {dtype}: {rel_err(g, r)}"


def test_gradients_reach_initial_states_through_final_states(device: str) -> None:
    """A sequence shorter than the window: its final state holds part of its initial state, so the
    final states' gradient reaches dinitial_states directly (and x's gradient flows from it)."""
    dim, width, lens = 4, 4, [1, 0, 2, 5]
    cu = cu_of(lens, device)
    x = torch.randn(1, dim, sum(lens), dtype=torch.float32, device=device, requires_grad=True)
    w = torch.randn(dim, width, device=device)
    init = torch.randn(len(lens), dim, width - 1, device=device, requires_grad=True)
    _, final = causal_conv1d_fn(x, w, None, initial_states=init, return_final_states=True, cu_seqlens=cu)
    dfinal = torch.randn_like(final)
    (final * dfinal).sum().backward()  # the output is unused: its gradient arrives as None
    # sequence 0 (1 token): final = [init[1], init[2], x0]; sequence 1 (empty): final = init
    torch.testing.assert_close(init.grad[0, :, 1:], dfinal[0, :, :2])
    torch.testing.assert_close(init.grad[1], dfinal[1])
    torch.testing.assert_close(x.grad[0, :, 0], dfinal[0, :, 2])
    assert not init.grad[0, :, 0].any()


def test_gradcheck_cpu_float64() -> None:
    dim, width, lens = 3, 3, [2, 0, 5, 1]
    cu = cu_of(lens, "cpu")
    opts = {"dtype": torch.float64, "requires_grad": True}
    x = torch.randn(1, sum(lens), dim, **opts)
    w, b = torch.randn(dim, width, **opts), torch.randn(dim, **opts)
    init = torch.randn(len(lens), dim, width - 1, **opts)

    def f(x, w, b, init):
        return causal_conv1d_fn(
            x.transpose(1, 2), w, b, initial_states=init, return_final_states=True, activation="silu", cu_seqlens=cu
        )

    assert torch.autograd.gradcheck(f, (x, w, b, init))


def test_matches_the_dense_op_per_sequence(device: str) -> None:
    """Each sequence of a packed call gives what the dense op gives on that sequence alone."""
    dim, width, lens = 16, 4, [33, 4, 0, 50]
    cu = cu_of(lens, device)
    x = torch.randn(1, sum(lens), dim, device=device).transpose(1, 2)
    w, b = torch.randn(dim, width, device=device), torch.randn(dim, device=device)
    init = torch.randn(len(lens), dim, width - 1, device=device)
    out, final = causal_conv1d_fn(
        x, w, b, initial_states=init, return_final_states=True, activation="silu", cu_seqlens=cu
    )
    for i, (s, e) in enumerate(zip(cu[:-1].tolist(), cu[1:].tolist())):
        o, f = causal_conv1d_fn(
            x[:, :, s:e].contiguous(), w, b, initial_states=init[i : i + 1], return_final_states=True, activation="silu"
        )
        torch.testing.assert_close(out[:, :, s:e], o, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(final[i : i + 1], f, rtol=0, atol=0)


@pytest.mark.parametrize("lens", [[], [0], [0, 0, 0]])
def test_no_tokens(device: str, lens: list[int]) -> None:
    """No tokens at all: the final states are the initial states, dinitial_states is dfinal_states."""
    dim, width = 5, 4
    cu = cu_of(lens, device)
    x = torch.randn(1, dim, 0, device=device, requires_grad=True)
    w = torch.randn(dim, width, device=device, requires_grad=True)
    init = torch.randn(len(lens), dim, width - 1, device=device, requires_grad=True)
    out, final = causal_conv1d_fn(x, w, None, initial_states=init, return_final_states=True, cu_seqlens=cu)
    assert out.shape == (1, dim, 0) and torch.equal(final, init)
    dfinal = torch.randn_like(final)
    (final * dfinal).sum().backward()
    torch.testing.assert_close(init.grad, dfinal)
    assert not w.grad.any()


def test_backward_is_bit_identical_across_runs(device: str) -> None:
    dim, width, cu = 24, 4, cu_of(LENS * 3, device)
    total, n = int(cu[-1]), 3 * len(LENS)
    x = torch.randn(1, dim, total, device=device, dtype=torch.bfloat16)
    w, b = torch.randn(dim, width, device=device), torch.randn(dim, device=device)
    init = torch.randn(n, dim, width - 1, device=device, dtype=torch.bfloat16)
    dout, dfin = torch.randn_like(x), torch.randn_like(init)
    first = ops.packed_bwd(x, w, b, dout, cu, init, dfin, True, True)
    for _ in range(3):
        again = ops.packed_bwd(x, w, b, dout, cu, init, dfin, True, True)
        for a, c in zip(first, again):
            assert torch.equal(a, c)


def test_return_final_states_false_returns_out_only(device: str) -> None:
    cu = cu_of([3, 4], device)
    x, w = torch.randn(1, 4, 7, device=device), torch.randn(4, 3, device=device)
    out = causal_conv1d_fn(x, w, cu_seqlens=cu)
    assert isinstance(out, torch.Tensor)
    ref, _ = packed_fwd_ref(x, w, None, cu)
    assert rel_err(out, ref) < 1e-5


def test_final_states_out_is_written(device: str) -> None:
    cu = cu_of([3, 4], device)
    x, w = torch.randn(1, 4, 7, device=device), torch.randn(4, 3, device=device)
    buf = torch.zeros(2, 4, 2, device=device)
    out, final = causal_conv1d_fn(x, w, return_final_states=True, final_states_out=buf, cu_seqlens=cu)
    assert final is buf
    _, ref_final = packed_fwd_ref(x, w, None, cu)
    assert torch.equal(buf.double(), ref_final)


def test_seq_idx_keeps_its_semantics_next_to_cu_seqlens(device: str) -> None:
    """seq_idx (upstream's packing) is unchanged: the initial state belongs to the row's first
    sequence only, whereas cu_seqlens gives every sequence its own."""
    dim, width, lens = 6, 4, [5, 7]
    x = torch.randn(1, dim, sum(lens), device=device)
    w = torch.randn(dim, width, device=device)
    init = torch.randn(1, dim, width - 1, device=device)
    seq = torch.tensor([[0] * 5 + [1] * 7], dtype=torch.int32, device=device)
    out_seq = causal_conv1d_fn(x, w, seq_idx=seq, initial_states=init)
    ref_seq, _ = fwd_ref(x, w, seq_idx=seq, initial_states=init)
    assert rel_err(out_seq, ref_seq) < 1e-5
    zero2 = torch.cat([init, torch.zeros_like(init)])
    out_cu = causal_conv1d_fn(x, w, initial_states=zero2, cu_seqlens=cu_of(lens, device))
    torch.testing.assert_close(out_cu, out_seq, rtol=1e-5, atol=1e-5)


# --- errors: each names the argument ------------------------------------------------------------


def _ok_args(device: str) -> dict:
    dim, width = 4, 3
    return {
        "x": torch.randn(1, dim, 7, device=device),
        "weight": torch.randn(dim, width, device=device),
        "cu_seqlens": cu_of([3, 4], device),
        "initial_states": torch.randn(2, dim, width - 1, device=device),
    }


@pytest.mark.parametrize(
    "change, exc, match",
    [
        # x with more than one row: the sequences are packed into one
        ({"x": torch.randn(2, 4, 7)}, ValueError, r"x must be \(1, dim, total_tokens\)"),
        # int64 lengths (torch.cumsum's default)
        ({"cu_seqlens": torch.tensor([0, 3, 7])}, TypeError, "cu_seqlens must be int32"),
        # a 2-D cu_seqlens
        ({"cu_seqlens": torch.tensor([[0, 3, 7]], dtype=torch.int32)}, ValueError, "cu_seqlens must be 1-D"),
        # initial_states for three sequences, cu_seqlens has two
        ({"initial_states": torch.randn(3, 4, 2)}, ValueError, r"initial_states must have shape .*\[2, 4, 2\]"),
        # initial_states of the wrong width
        ({"initial_states": torch.randn(2, 4, 3)}, ValueError, "initial_states must have shape"),
        # initial_states in another dtype than x
        (
            {"initial_states": torch.randn(2, 4, 2, dtype=torch.float64)},
            TypeError,
            "initial_states must have x's dtype",
        ),
    ],
)
def test_bad_shapes_and_dtypes_name_the_argument(device: str, change: dict, exc: type, match: str) -> None:
    args = _ok_args(device)
    args.update({k: v.to(device) for k, v in change.items()})
    x, w = args.pop("x"), args.pop("weight")
    with pytest.raises(exc, match=match):
        causal_conv1d_fn(x, w, return_final_states=True, **args)


@pytest.mark.parametrize(
    "cu, match",
    [
        ([0, 3, 6], r"cu_seqlens\[2\] = 6 must equal total_tokens"),  # lengths sum to 6, x has 7 tokens
        ([0, 5, 3, 7], "cu_seqlens must be non-decreasing"),  # a negative length
        ([1, 3, 7], r"cu_seqlens\[0\] must be 0"),  # the first sequence does not start at 0
    ],
)
def test_bad_lengths_are_refused_on_the_cpu(cu: list[int], match: str) -> None:
    x, w = torch.randn(1, 4, 7), torch.randn(4, 3)
    with pytest.raises(ValueError, match=match):
        causal_conv1d_fn(x, w, cu_seqlens=torch.tensor(cu, dtype=torch.int32))
    with raises_from_op(ValueError, match):
        ops.packed_bwd(x, w, None, torch.randn_like(x), torch.tensor(cu, dtype=torch.int32), None, None, False, False)


def test_seq_idx_with_cu_seqlens_is_refused(device: str) -> None:
    args = _ok_args(device)
    seq = torch.zeros(1, 7, dtype=torch.int32, device=device)
    with pytest.raises(ValueError, match="seq_idx must be None when cu_seqlens is given"):
        causal_conv1d_fn(args["x"], args["weight"], seq_idx=seq, cu_seqlens=args["cu_seqlens"])


def test_dfinal_states_of_the_wrong_shape_is_refused(device: str) -> None:
    a = _ok_args(device)
    x, w, cu = a["x"], a["weight"], a["cu_seqlens"]
    with raises_from_op(ValueError, "dfinal_states must have shape"):
        ops.packed_bwd(x, w, None, torch.randn_like(x), cu, None, torch.randn(3, 4, 2, device=device), False, False)


# --- torch.library.opcheck and torch.compile ----------------------------------------------------


@pytest.mark.parametrize("layout", ["cf", "cl"])
@pytest.mark.parametrize("states", [False, True])
def test_opcheck_packed_fwd(device: str, layout: str, states: bool) -> None:
    dim, width, cu = 6, 4, cu_of([3, 0, 9, 1], device)
    x = packed_x(dim, 13, layout, torch.float32, device).requires_grad_()
    w = torch.randn(dim, width, device=device, requires_grad=True)
    b = torch.randn(dim, device=device, requires_grad=True)
    init = torch.randn(4, dim, width - 1, device=device, requires_grad=True) if states else None
    torch.library.opcheck(ops.packed_fwd.default, (x, w, b, cu, init, True, True))


@pytest.mark.parametrize("layout", ["cf", "cl"])
@pytest.mark.parametrize("states", [False, True])
def test_opcheck_packed_bwd(device: str, layout: str, states: bool) -> None:
    dim, width, cu = 6, 3, cu_of([3, 0, 9, 1], device)
    x = packed_x(dim, 13, layout, torch.float32, device)
    w, b = torch.randn(dim, width, device=device), torch.randn(dim, device=device)
    init = torch.randn(4, dim, width - 1, device=device) if states else None
    dfinal = torch.randn(4, dim, width - 1, device=device) if states else None
    torch.library.opcheck(ops.packed_bwd.default, (x, w, b, torch.randn_like(x), cu, init, dfinal, states, True))


@pytest.mark.parametrize("layout", ["cf", "cl"])
def test_compile_fullgraph_forward_and_backward(device: str, layout: str, compile_backend: str) -> None:
    dim, width, cu = 8, 4, cu_of([5, 0, 12, 3], device)
    x = packed_x(dim, 20, layout, torch.float32, device).requires_grad_()
    w = torch.randn(dim, width, device=device, requires_grad=True)
    b = torch.randn(dim, device=device, requires_grad=True)
    init = torch.randn(4, dim, width - 1, device=device, requires_grad=True)

    def f(x, w, b, init, cu):
        out, final = causal_conv1d_fn(
            x, w, b, initial_states=init, return_final_states=True, activation="silu", cu_seqlens=cu
        )
        return (out * 2).sum() + final.square().sum()

    compiled = torch.compile(f, fullgraph=True, backend=compile_backend)
    eager_loss = f(x, w, b, init, cu)
    eager_grads = torch.autograd.grad(eager_loss, (x, w, b, init))
    loss = compiled(x, w, b, init, cu)
    grads_c = torch.autograd.grad(loss, (x, w, b, init))
    torch.testing.assert_close(loss, eager_loss)
    for g, e in zip(grads_c, eager_grads):
        torch.testing.assert_close(g, e)
