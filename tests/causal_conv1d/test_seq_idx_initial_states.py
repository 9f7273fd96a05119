"""Upstream 1.7.0 parity: ``causal_conv1d_fn(..., seq_idx=..., initial_states=...)`` forward and
backward (dinitial_states included) and ``causal_conv1d_ref(..., seq_idx=...)``.

Semantics (upstream 1.7.0's reference): the initial state belongs to the sequence of the row's first
token; a tap before position 0 reads it iff ``seq_idx[b, t] == seq_idx[b, 0]``; an output whose seq
id is negative is 0. The reference here is a per-segment loop: each row is split into its runs of
equal seq id, the first run continues from the initial state, the others start from zeros.
"""

from __future__ import annotations

import pytest
import torch
from _cc1d_ref import fp32_inputs, make_bdl

from causal_conv1d import causal_conv1d_fn
from causal_conv1d.causal_conv1d_interface import causal_conv1d_ref
from causal_conv1d.cpp_functions import causal_conv1d_bwd_function, causal_conv1d_fwd_function

TOL = {torch.float32: (1e-4, 1e-4), torch.float16: (1e-2, 1e-2), torch.bfloat16: (5e-2, 5e-2)}


def _segments(row: list[int]) -> list[tuple[int, int, int]]:
    """(start, end, id) of the runs of equal ids in a row."""
    runs, start = [], 0
    for t in range(1, len(row) + 1):
        if t == len(row) or row[t] != row[start]:
            runs.append((start, t, row[start]))
            start = t
    return runs


def _loop_ref(x, weight, bias, seq_idx, init, silu: bool) -> torch.Tensor:
    """float64, differentiable: one F.conv1d per run of equal seq id (a run with a repeated id
    later in the row does not happen in these inputs)."""
    batch, dim, seqlen = x.shape
    width = weight.shape[1]
    w = weight.double().unsqueeze(1)
    rows = []
    for b in range(batch):
        pieces = []
        for i, (s, e, sid) in enumerate(_segments(seq_idx[b].tolist())):
            xs = x[b : b + 1, :, s:e].double()
            if sid < 0:
                pieces.append(xs.new_zeros(xs.shape))
                continue
            prev = init[b : b + 1].double() if (i == 0 and init is not None) else xs.new_zeros(1, dim, width - 1)
            o = torch.nn.functional.conv1d(torch.cat([prev, xs], -1), w, None, groups=dim)
            if bias is not None:
                o = o + bias.double()[None, :, None]
            pieces.append(torch.nn.functional.silu(o) if silu else o)
        rows.append(torch.cat(pieces, -1))
    return torch.cat(rows, 0)


def _seq_idx(batch: int, seqlen: int, width: int, device: str, first_neg: bool = False) -> torch.Tensor:
    """Rows of runs with distinct increasing ids; the first run is shorter than width - 1 in row 0
    (the initial state reaches past it), a negative (padding) run at the end of row 1."""
    rows = []
    for b in range(batch):
        first = min(seqlen, max(1, width - 2) if b == 0 else width + 1)
        ids = torch.empty(seqlen, dtype=torch.int32)
        ids[:first] = 10 * b + 3
        rest = torch.arange(seqlen - first) // 5 + 10 * b + 4
        ids[first:] = rest.to(torch.int32)
        if b == 1 and seqlen > 6:
            ids[-3:] = -1
        if first_neg and b == batch - 1:
            ids[: min(2, seqlen)] = -1
        rows.append(ids)
    return torch.stack(rows).to(device)


def _leaf(t):
    return t.detach().clone().requires_grad_() if t is not None else None


@pytest.mark.parametrize("seqlen", [1, 3, 8, 151])
@pytest.mark.parametrize("layout", ["cf", "cl"])
@pytest.mark.parametrize("width", [2, 3, 4, 5, 8])
@pytest.mark.parametrize("silu", [False, True])
def test_fwd_bwd_fp32(device: str, seqlen: int, layout: str, width: int, silu: bool) -> None:
    batch, dim = 3, 12
    x, weight, bias = fp32_inputs(batch, dim, seqlen, layout, width, device)
    init = torch.randn(batch, width - 1, dim, device=device).transpose(1, 2)  # channel-last states
    seq_idx = _seq_idx(batch, seqlen, width, device, first_neg=seqlen > 3)
    leaves = [_leaf(t) for t in (x, weight, bias, init)]
    out = causal_conv1d_fn(*leaves[:3], seq_idx=seq_idx, initial_states=leaves[3], activation="silu" if silu else None)
    refl = [_leaf(t.cpu()) for t in (x, weight, bias, init)]  # the reference runs on the CPU
    ref = _loop_ref(refl[0], refl[1], refl[2], seq_idx.cpu(), refl[3], silu)
    torch.testing.assert_close(out.double().cpu(), ref.detach(), rtol=1e-4, atol=1e-4)
    dout = torch.randn_like(ref)
    (out.double().cpu() * dout).sum().backward()
    (ref * dout).sum().backward()
    for name, a, r in zip(("dx", "dweight", "dbias", "dinitial_states"), leaves, refl):
        scale = max(1.0, float(r.grad.abs().max()))
        torch.testing.assert_close(
            a.grad.double().cpu(), r.grad.double(), rtol=1e-4, atol=1e-4 * scale, msg=lambda m, n=name: f"{n}: {m}"
        )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout", ["cf", "cl"])
@pytest.mark.parametrize("width", [2, 3, 4])
def test_fwd_bwd_half(device: str, dtype: torch.dtype, layout: str, width: int) -> None:
    batch, dim, seqlen = 2, 64, 151
    x = make_bdl(batch, dim, seqlen, layout, dtype, device)
    weight = torch.randn(dim, width, device=device)
    bias = torch.randn(dim, device=device)
    init = torch.randn(batch, dim, width - 1, device=device, dtype=dtype)
    seq_idx = _seq_idx(batch, seqlen, width, device)
    leaves = [_leaf(t) for t in (x, weight, bias, init)]
    out = causal_conv1d_fn(*leaves[:3], seq_idx=seq_idx, initial_states=leaves[3], activation="silu")
    assert out.dtype == dtype
    refl = [_leaf(t.cpu()) for t in (x, weight, bias, init)]  # the reference runs on the CPU
    ref = _loop_ref(refl[0], refl[1], refl[2], seq_idx.cpu(), refl[3], True)
    rtol, atol = TOL[dtype]
    torch.testing.assert_close(out.double().cpu(), ref.detach(), rtol=rtol, atol=atol)
    dout = torch.randn_like(ref).to(dtype)
    out.backward(dout.to(device))
    (ref * dout.double()).sum().backward()
    for name, a, r in zip(("dx", "dweight", "dbias", "dinitial_states"), leaves, refl):
        scale = max(1.0, float(r.grad.abs().max()))
        torch.testing.assert_close(
            a.grad.double().cpu(), r.grad.double(), rtol=rtol, atol=atol * scale, msg=lambda m, n=name: f"{n}: {m}"
        )


@pytest.mark.parametrize("layout", ["cf", "cl"])
@pytest.mark.parametrize("width", [2, 4])
def test_gradcheck_fp64(layout: str, width: int) -> None:
    batch, dim, seqlen = 2, 3, 7
    x = make_bdl(batch, dim, seqlen, layout, torch.float64, "cpu").requires_grad_()
    weight = torch.randn(dim, width, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(dim, dtype=torch.float64, requires_grad=True)
    init = torch.randn(batch, dim, width - 1, dtype=torch.float64, requires_grad=True)
    seq_idx = torch.tensor([[3, 5, 5, 5, 9, 9, 9], [4, 4, 6, 6, 6, 6, -1]], dtype=torch.int32)
    assert torch.autograd.gradcheck(
        lambda *a: causal_conv1d_fn(*a[:3], seq_idx=seq_idx, initial_states=a[3], activation="silu"),
        (x, weight, bias, init),
    )


def test_upstream_example_ref_and_fn(device: str) -> None:
    """Upstream 1.7.0's reference example: splits [1, 3, 3] and [2, 4, 1], initial state for the first."""
    batch, dim, seqlen, width = 2, 8, 7, 4
    x = torch.randn(batch, dim, seqlen, device=device)
    weight, bias = torch.randn(dim, width, device=device), torch.randn(dim, device=device)
    init = torch.randn(batch, dim, width - 1, device=device)
    seq_idx = torch.tensor([[3, 5, 5, 5, 9, 9, 9], [4, 4, 6, 6, 6, 6, 8]], dtype=torch.int32, device=device)
    expected = []
    for b, splits in enumerate(([1, 3, 3], [2, 4, 1])):
        parts = torch.split(x[[b]], splits, dim=-1)
        expected.append(
            torch.cat(
                [
                    causal_conv1d_ref(p, weight, bias, initial_states=init[[b]] if i == 0 else None, activation="silu")
                    for i, p in enumerate(parts)
                ],
                -1,
            )
        )
    expected = torch.cat(expected, 0)
    # upstream's positional order: (x, weight, bias, initial_states, return_final_states, final_states_out, activation, seq_idx)
    ref = causal_conv1d_ref(x, weight, bias, init, False, None, "silu", seq_idx)
    torch.testing.assert_close(ref, expected, rtol=3e-4, atol=1e-3)
    out = causal_conv1d_fn(x, weight, bias, seq_idx, init, False, None, "silu")
    torch.testing.assert_close(out, expected, rtol=3e-4, atol=1e-3)
    # the cpp_functions layer takes the combination too
    out2 = causal_conv1d_fwd_function(x, weight, bias, seq_idx, init, None, True)
    torch.testing.assert_close(out2, out)


def test_initial_state_only_reaches_the_first_sequence() -> None:
    """A changed initial state changes only outputs of the first sequence's first width-1 tokens."""
    batch, dim, seqlen, width = 1, 4, 10, 4
    x, weight = torch.randn(batch, dim, seqlen), torch.randn(dim, width)
    seq_idx = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 2, 2, 2]], dtype=torch.int32)
    a = causal_conv1d_fn(x, weight, seq_idx=seq_idx, initial_states=torch.zeros(batch, dim, width - 1))
    b = causal_conv1d_fn(x, weight, seq_idx=seq_idx, initial_states=torch.randn(batch, dim, width - 1))
    changed = (a != b).any(dim=1)[0]
    assert changed[:2].all() and not changed[2:].any()


def test_bwd_function_dinitial_states_with_seq_idx(device: str) -> None:
    batch, dim, seqlen, width = 2, 6, 20, 4
    x = torch.randn(batch, dim, seqlen, device=device)
    weight, bias = torch.randn(dim, width, device=device), torch.randn(dim, device=device)
    init = torch.randn(batch, dim, width - 1, device=device)
    seq_idx = _seq_idx(batch, seqlen, width, device)
    dout = torch.randn(batch, dim, seqlen, device=device)
    dx, dw, db, dinit = causal_conv1d_bwd_function(x, weight, bias, dout, seq_idx, init, None, None, True, False)
    il = init.detach().cpu().double().requires_grad_()
    ref = _loop_ref(x.cpu(), weight.cpu(), bias.cpu(), seq_idx.cpu(), il, False)
    (ref * dout.cpu().double()).sum().backward()
    torch.testing.assert_close(dinit.cpu().double(), il.grad, rtol=1e-4, atol=1e-4)


def test_ref_seq_idx_refuses_final_states() -> None:
    x, weight = torch.randn(1, 2, 4), torch.randn(2, 3)
    with pytest.raises(ValueError, match="return_final_states must be False when seq_idx is given"):
        causal_conv1d_ref(x, weight, return_final_states=True, seq_idx=torch.zeros(1, 4, dtype=torch.int32))


def test_extension_module_names_take_the_combination() -> None:
    """``import causal_conv1d_cuda`` (upstream's in-place extension names) with seq_idx + initial_states."""
    import causal_conv1d_cuda  # noqa: PLC0415

    batch, dim, seqlen, width = 2, 8, 7, 4
    x = torch.randn(batch, dim, seqlen, dtype=torch.float64)
    weight, bias = torch.randn(dim, width, dtype=torch.float64), torch.randn(dim, dtype=torch.float64)
    init = torch.randn(batch, dim, width - 1, dtype=torch.float64)
    seq_idx = torch.tensor([[3, 5, 5, 5, 9, 9, 9], [4, 4, 6, 6, 6, 6, 8]], dtype=torch.int32)
    out = torch.full_like(x, float("nan"))
    causal_conv1d_cuda.causal_conv1d_fwd(x, weight, bias, seq_idx, init, out, None, True)
    torch.testing.assert_close(out, _loop_ref(x, weight, bias, seq_idx, init, True))
