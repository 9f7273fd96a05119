"""Serving ops: packed varlen prefill over a state cache (causal_conv1d_varlen_fn, op varlen_fwd) and
the speculative-decoding update (causal_conv1d_update_spec, op spec_update), against plain-PyTorch
per-sequence loops written here (float64, F.conv1d on each sequence), on the CPU and (marked gpu)
on CUDA; argument errors; opcheck and torch.compile(fullgraph=True).
"""

from __future__ import annotations

import random
from typing import Optional

import pytest
import torch
import torch.nn.functional as F

from causal_conv1d import causal_conv1d_update_spec, causal_conv1d_varlen_fn
from causal_conv1d.causal_conv1d_interface import causal_conv1d_update_ref
from causal_conv1d.varlen import PAD_SLOT_ID, causal_conv1d_update_spec_ref, causal_conv1d_varlen_ref

TOL = {torch.float32: (1e-4, 1e-4), torch.float16: (5e-3, 5e-3), torch.bfloat16: (3e-2, 3e-2)}


# ---------------------------------------------------------------------------------------------
# references (independent of the package's)


def _seq_conv(window: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], silu: bool) -> torch.Tensor:
    """(dim, W-1+n) float64 window -> (dim, n) with F.conv1d."""
    dim = weight.shape[0]
    o = F.conv1d(
        window.double()[None], weight.double().unsqueeze(1), bias.double() if bias is not None else None, groups=dim
    )[0]
    return F.silu(o) if silu else o


def varlen_loop(x, weight, bias, conv_states, qsl, cache_indices, has_init, silu, pad=PAD_SLOT_ID):
    """Returns (out float64, new conv_states) without touching the inputs."""
    states = conv_states.detach().cpu().clone()
    x = x.detach().cpu()
    width = weight.shape[1]
    S = states.shape[-1]
    out = torch.zeros(x.shape, dtype=torch.float64)
    q = qsl.tolist()
    for i in range(len(q) - 1):
        s, e = q[i], q[i + 1]
        c = int(cache_indices[i]) if cache_indices is not None else i
        if e <= s or c == pad:
            continue
        init = bool(has_init[i]) if has_init is not None else False
        old = states[c].clone() if init else torch.zeros_like(states[c])
        out[:, s:e] = _seq_conv(
            torch.cat([old[:, S - (width - 1) :], x[:, s:e]], -1),
            weight.cpu(),
            None if bias is None else bias.cpu(),
            silu,
        )
        states[c] = torch.cat([old, x[:, s:e]], -1)[:, -S:]
    return out, states


def spec_loop(x, conv_state, weight, bias, silu, indices, nacc, pad=PAD_SLOT_ID):
    """(out float64, new conv_state): window = state[e-(W-1):e], e = S - L + a; state <- cat(state[:e], x)[-S:]."""
    state = conv_state.detach().cpu().clone()
    x3 = x.detach().cpu()
    x3 = x3.unsqueeze(-1) if x3.dim() == 2 else x3
    B, _, L = x3.shape
    W = weight.shape[1]
    S = state.shape[-1]
    out = torch.zeros(x3.shape, dtype=torch.float64)
    for b in range(B):
        c = int(indices[b]) if indices is not None else b
        if c == pad:
            continue
        a = int(nacc[b]) if nacc is not None else L
        e = S - L + a
        out[b] = _seq_conv(
            torch.cat([state[c, :, e - (W - 1) : e], x3[b]], -1),
            weight.cpu(),
            None if bias is None else bias.cpu(),
            silu,
        )
        state[c] = torch.cat([state[c, :, :e], x3[b]], -1)[:, -S:]
    return (out.squeeze(-1) if x.dim() == 2 else out), state


# ---------------------------------------------------------------------------------------------
# inputs


def _x(dim: int, total: int, layout: str, dtype, device) -> torch.Tensor:
    if layout == "cf":
        return torch.randn(dim, total, dtype=dtype, device=device)
    return torch.randn(total, dim, dtype=dtype, device=device).t()  # channel-last: (total, dim) passed as .T


def _cache(lines: int, dim: int, S: int, layout: str, dtype, device) -> torch.Tensor:
    if layout == "bds":
        return torch.randn(lines, dim, S, dtype=dtype, device=device)
    return torch.randn(lines, S, dim, dtype=dtype, device=device).transpose(1, 2)  # (B, S, D) buffer


def _lengths(rng: random.Random, width: int) -> list[int]:
    # 0, 1, shorter than the window, a sequence starting just before the CUDA chunk boundary (64),
    # long ones crossing several chunks
    base = [63, 1, 0, 2, width - 1, 150, 5, 64, 129, 3, 200]
    rng.shuffle(base)
    return [63] + base  # the second sequence starts at token 63


def _case(device, dtype, width, x_layout, st_layout, S_extra, seed=0, tail=7):
    rng = random.Random(seed)
    lens = _lengths(rng, width)
    batch = len(lens)
    q = [0]
    for n in lens:
        q.append(q[-1] + n)
    total = q[-1] + tail  # a padded tail of no sequence
    dim = 37
    S = width - 1 + S_extra
    lines = batch + 4
    x = _x(dim, total, x_layout, dtype, device)
    weight = torch.randn(dim, width, device=device) / width**0.5
    bias = torch.randn(dim, device=device)
    states = _cache(lines, dim, S, st_layout, dtype, device)
    perm = list(range(lines))
    rng.shuffle(perm)
    ci = torch.tensor(perm[:batch], dtype=torch.int32)
    ci[3] = PAD_SLOT_ID
    hi = torch.tensor([rng.random() < 0.6 for _ in range(batch)])
    return x, weight, bias, states, torch.tensor(q, dtype=torch.int32, device=device), ci.to(device), hi.to(device)


# ---------------------------------------------------------------------------------------------
# varlen prefill


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("width", [2, 3, 4, 8])
@pytest.mark.parametrize("x_layout", ["cf", "cl"])
@pytest.mark.parametrize("st_layout", ["bds", "bsd"])
@pytest.mark.parametrize("S_extra", [0, 3])
def test_varlen_matches_loop(device, dtype, width, x_layout, st_layout, S_extra) -> None:
    x, weight, bias, states, q, ci, hi = _case(device, dtype, width, x_layout, st_layout, S_extra)
    ref_out, ref_states = varlen_loop(x, weight, bias, states, q.cpu(), ci.cpu(), hi.cpu(), True)
    before = states.clone()
    out = causal_conv1d_varlen_fn(x, weight, bias, states, q, ci, hi, activation="silu")
    assert out.shape == x.shape and out.dtype == dtype and out.stride() == x.stride()
    rtol, atol = TOL[dtype]
    torch.testing.assert_close(out.cpu().double(), ref_out, rtol=rtol, atol=atol)
    # states are copies of inputs (no arithmetic): exact; untouched lines stay bit-identical
    torch.testing.assert_close(states.cpu(), ref_states, rtol=0, atol=0)
    used = set(ci.tolist()) - {PAD_SLOT_ID}
    for line in range(states.shape[0]):
        if line not in used:
            assert torch.equal(states[line], before[line])


@pytest.mark.parametrize("x_layout", ["cf", "cl"])
def test_varlen_defaults_and_package_ref(device, x_layout) -> None:
    """cache_indices None (line i), has_initial_state None (all zero), no bias, no activation; the
    package's reference (causal_conv1d_varlen_ref) agrees with the loop too."""
    x, weight, _, states, q, _, _ = _case(device, torch.float32, 4, x_layout, "bds", 2, seed=3, tail=0)
    states = states[: q.numel() - 1].clone()
    ref_out, ref_states = varlen_loop(x, weight, None, states, q.cpu(), None, None, False)
    s2 = states.clone()
    out = causal_conv1d_varlen_fn(x, weight, None, states, q, activation=None)
    torch.testing.assert_close(out.cpu().double(), ref_out, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(states.cpu(), ref_states, rtol=0, atol=0)
    out2 = causal_conv1d_varlen_ref(x, weight, None, s2, q, activation=None)
    torch.testing.assert_close(out2.cpu().double(), ref_out, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(s2.cpu(), ref_states, rtol=0, atol=0)


def test_varlen_int32_has_initial_state_and_chained_prefill(device) -> None:
    """Prefilling a sequence in two chunks (the second with has_initial_state) equals one prefill."""
    dim, width, S = 16, 4, 3
    x = torch.randn(dim, 300, device=device)
    weight, bias = torch.randn(dim, width, device=device), torch.randn(dim, device=device)
    whole_state = torch.zeros(1, dim, S, device=device)
    whole = causal_conv1d_varlen_fn(
        x, weight, bias, whole_state, torch.tensor([0, 300], dtype=torch.int32, device=device)
    )
    st = torch.zeros(1, dim, S, device=device)
    a = causal_conv1d_varlen_fn(x[:, :130], weight, bias, st, torch.tensor([0, 130], dtype=torch.int32, device=device))
    b = causal_conv1d_varlen_fn(
        x[:, 130:].contiguous(),
        weight,
        bias,
        st,
        torch.tensor([0, 170], dtype=torch.int32, device=device),
        has_initial_state=torch.ones(1, dtype=torch.int32, device=device),
    )
    torch.testing.assert_close(torch.cat([a, b], -1), whole, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(st, whole_state, rtol=0, atol=0)


def test_varlen_then_decode_equals_longer_prefill(device) -> None:
    """varlen prefill's final states feed causal_conv1d_update (upstream's decode step) exactly."""
    dim, width = 8, 4
    x = torch.randn(dim, 41, device=device)
    weight, bias = torch.randn(dim, width, device=device), torch.randn(dim, device=device)
    q = torch.tensor([0, 20, 41], dtype=torch.int32, device=device)
    states = torch.zeros(2, dim, width - 1, device=device)
    causal_conv1d_varlen_fn(x, weight, bias, states, q)
    nxt = torch.randn(2, dim, device=device)
    y = causal_conv1d_update_ref(nxt, states.clone(), weight, bias, "silu")
    full0 = causal_conv1d_varlen_fn(
        torch.cat([x[:, :20], nxt[0:1].t()], -1),
        weight,
        bias,
        torch.zeros(1, dim, width - 1, device=device),
        torch.tensor([0, 21], dtype=torch.int32, device=device),
    )
    torch.testing.assert_close(y[0], full0[:, -1], rtol=1e-5, atol=1e-5)


def test_varlen_empty(device) -> None:
    w = torch.randn(4, 3, device=device)
    st = torch.randn(2, 4, 2, device=device)
    out = causal_conv1d_varlen_fn(
        torch.randn(4, 0, device=device), w, None, st, torch.zeros(3, dtype=torch.int32, device=device)
    )
    assert out.shape == (4, 0)
    x = torch.randn(4, 5, device=device)
    out = causal_conv1d_varlen_fn(x, w, None, st, torch.zeros(1, dtype=torch.int32, device=device))  # batch 0
    assert torch.equal(out, torch.zeros_like(x))


# ---------------------------------------------------------------------------------------------
# speculative-decoding update


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("width", [2, 3, 4, 8])
@pytest.mark.parametrize("x_layout", ["cf", "cl"])
@pytest.mark.parametrize("st_layout", ["bds", "bsd"])
@pytest.mark.parametrize("seqlen", [1, 5])
def test_spec_update_matches_loop(device, dtype, width, x_layout, st_layout, seqlen) -> None:
    batch, dim, lines = 6, 40, 9
    S = width - 2 + seqlen + (1 if st_layout == "bsd" else 0)
    S = max(S, width - 1)
    x = torch.randn(batch, dim, seqlen, dtype=dtype, device=device)
    if x_layout == "cl":
        x = torch.randn(batch, seqlen, dim, dtype=dtype, device=device).transpose(1, 2)
    weight = torch.randn(dim, width, device=device) / width**0.5
    bias = torch.randn(dim, device=device)
    state = _cache(lines, dim, S, st_layout, dtype, device)
    idx = torch.tensor([4, 0, PAD_SLOT_ID, 8, 2, 5], dtype=torch.int32, device=device)
    nacc = torch.tensor([seqlen, 1, 1, max(1, seqlen - 2), min(2, seqlen), seqlen], dtype=torch.int32, device=device)
    ref_out, ref_state = spec_loop(x, state, weight, bias, True, idx.cpu(), nacc.cpu())
    before = state.clone()
    out = causal_conv1d_update_spec(x, state, weight, bias, "silu", idx, nacc)
    assert out.shape == x.shape and out.dtype == dtype
    rtol, atol = TOL[dtype]
    torch.testing.assert_close(out.cpu().double(), ref_out, rtol=rtol, atol=atol)
    torch.testing.assert_close(state.cpu(), ref_state, rtol=0, atol=0)
    for line in set(range(lines)) - set(idx.tolist()):
        assert torch.equal(state[line], before[line])


def test_spec_update_all_accepted_is_plain_update(device) -> None:
    """num_accepted_tokens = seqlen (or None) is upstream's causal_conv1d_update (a shift by seqlen)."""
    batch, dim, width, seqlen, S = 3, 16, 4, 3, 5
    x = torch.randn(batch, dim, seqlen, device=device)
    weight, bias = torch.randn(dim, width, device=device), torch.randn(dim, device=device)
    state = torch.randn(batch, dim, S, device=device)
    s_ref, s_none, s_all = state.clone(), state.clone(), state.clone()
    ref = causal_conv1d_update_ref(x, s_ref, weight, bias, "silu")
    out_none = causal_conv1d_update_spec(x, s_none, weight, bias, "silu")
    out_all = causal_conv1d_update_spec(
        x,
        s_all,
        weight,
        bias,
        "silu",
        num_accepted_tokens=torch.full((batch,), seqlen, dtype=torch.int32, device=device),
    )
    for out, st in ((out_none, s_none), (out_all, s_all)):
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(st, s_ref, rtol=0, atol=0)


def test_spec_decode_equals_prefill_of_accepted_tokens(device) -> None:
    """A speculative-decoding loop (1 + 3 drafts per step, some rejected) produces, for every accepted
    token, the output a prefill over the accepted tokens alone gives; vLLM's state size W - 1 + drafts."""
    dim, width, drafts = 12, 4, 3
    L = 1 + drafts
    S = width - 1 + drafts
    weight, bias = torch.randn(dim, width, device=device), torch.randn(dim, device=device)
    prompt = torch.randn(dim, 10, device=device)
    cache = torch.zeros(1, dim, S, device=device)
    causal_conv1d_varlen_fn(prompt, weight, bias, cache, torch.tensor([0, 10], dtype=torch.int32, device=device))
    # the prefill wrote the last S inputs; the first decode step treats them as all accepted
    accepted_tokens, accepted_outs = [prompt], []
    nacc = torch.tensor([L], dtype=torch.int32, device=device)
    for a in [2, 4, 1, 3, 4]:
        x = torch.randn(1, dim, L, device=device)
        out = causal_conv1d_update_spec(x, cache, weight, bias, "silu", num_accepted_tokens=nacc)
        accepted_tokens.append(x[0, :, :a])
        accepted_outs.append(out[0, :, :a])
        nacc = torch.tensor([a], dtype=torch.int32, device=device)
    seq = torch.cat(accepted_tokens, -1)
    full = causal_conv1d_varlen_fn(
        seq,
        weight,
        bias,
        torch.zeros(1, dim, width - 1, device=device),
        torch.tensor([0, seq.shape[1]], dtype=torch.int32, device=device),
    )
    torch.testing.assert_close(torch.cat(accepted_outs, -1), full[:, 10:], rtol=1e-5, atol=1e-5)


def test_spec_update_2d_x_and_package_ref(device) -> None:
    batch, dim, width, S = 4, 8, 3, 2
    x = torch.randn(batch, dim, device=device)
    weight = torch.randn(dim, width, device=device)
    state = torch.randn(batch, dim, S, device=device)
    s2, s3 = state.clone(), state.clone()
    out = causal_conv1d_update_spec(x, state, weight)
    assert out.shape == (batch, dim)
    ref_out, ref_state = spec_loop(x, s3, weight, None, False, None, None)
    torch.testing.assert_close(out.cpu().double(), ref_out, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(state.cpu(), ref_state, rtol=0, atol=0)
    out2 = causal_conv1d_update_spec_ref(x, s2, weight)
    torch.testing.assert_close(out2, out, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(s2, state, rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# errors


def _varlen_args(device="cpu"):
    dim, width = 4, 3
    return dict(
        x=torch.randn(dim, 10, device=device),
        weight=torch.randn(dim, width, device=device),
        bias=None,
        conv_states=torch.zeros(3, dim, width - 1, device=device),
        query_start_loc=torch.tensor([0, 4, 10], dtype=torch.int32, device=device),
        cache_indices=torch.tensor([0, 2], dtype=torch.int32, device=device),
        has_initial_state=torch.tensor([True, False], device=device),
    )


VARLEN_ERRORS = [
    ("qsl int64", {"query_start_loc": torch.tensor([0, 4, 10])}, TypeError, r"query_start_loc must be int32"),
    ("qsl 2-D", {"query_start_loc": torch.zeros(1, 3, dtype=torch.int32)}, ValueError, r"query_start_loc must be 1-D"),
    ("indices int64", {"cache_indices": torch.tensor([0, 1])}, TypeError, r"cache_indices must be int32"),
    (
        "indices shape",
        {"cache_indices": torch.tensor([0, 1, 2], dtype=torch.int32)},
        ValueError,
        r"cache_indices must have shape \(batch,\)",
    ),
    ("has_init float", {"has_initial_state": torch.ones(2)}, TypeError, r"has_initial_state must be bool"),
    (
        "has_init shape",
        {"has_initial_state": torch.ones(3, dtype=torch.bool)},
        ValueError,
        r"has_initial_state must have shape",
    ),
    (
        "state short",
        {"conv_states": torch.zeros(3, 4, 1)},
        ValueError,
        r"conv_states is too short: state_len .* >= width - 1 = 2",
    ),
    ("state dim", {"conv_states": torch.zeros(3, 5, 2)}, ValueError, r"conv_states must have dim = 4"),
    (
        "state dtype",
        {"conv_states": torch.zeros(3, 4, 2, dtype=torch.float16)},
        TypeError,
        r"conv_states must have x's dtype",
    ),
    ("x 3-D", {"x": torch.randn(1, 4, 10)}, ValueError, r"x must be 2-D \(dim, total_tokens\)"),
    (
        "weight dim",
        {"weight": torch.randn(5, 3)},
        ValueError,
        r"weight must have shape \(dim, width\) with dim = x.shape\[0\]",
    ),
    (
        "lines",
        {"cache_indices": None, "conv_states": torch.zeros(1, 4, 2)},
        ValueError,
        r"conv_states must have at least batch = 2",
    ),
]

VARLEN_VALUE_ERRORS = [  # values: checked by the CPU kernel, and by validate=True anywhere
    (
        "index out of range",
        {"cache_indices": torch.tensor([0, 3], dtype=torch.int32)},
        r"cache_indices\[1\] = 3 is out of range",
    ),
    (
        "negative index",
        {"cache_indices": torch.tensor([-2, 0], dtype=torch.int32)},
        r"cache_indices\[0\] = -2 is out of range",
    ),
    ("lengths exceed x", {"query_start_loc": torch.tensor([0, 4, 11], dtype=torch.int32)}, r"total_tokens"),
    ("decreasing", {"query_start_loc": torch.tensor([0, 6, 4], dtype=torch.int32)}, r"non-decreasing"),
]


@pytest.mark.parametrize("name,change,exc,match", VARLEN_ERRORS, ids=[e[0] for e in VARLEN_ERRORS])
def test_varlen_errors(name, change, exc, match) -> None:
    args = {**_varlen_args(), **change}
    with pytest.raises(exc, match=match):
        causal_conv1d_varlen_fn(**args)


@pytest.mark.parametrize("validate", [False, True])
@pytest.mark.parametrize("name,change,match", VARLEN_VALUE_ERRORS, ids=[e[0] for e in VARLEN_VALUE_ERRORS])
def test_varlen_value_errors(name, change, match, validate) -> None:
    args = {**_varlen_args(), **change}
    with pytest.raises(ValueError, match=match):
        causal_conv1d_varlen_fn(**args, validate=validate)


def test_spec_errors() -> None:
    x = torch.randn(2, 4, 3)
    w = torch.randn(4, 4)
    with pytest.raises(ValueError, match=r"conv_state is too short: state_len .* >= width - 2 \+ seqlen .* = 5"):
        causal_conv1d_update_spec(x, torch.zeros(2, 4, 4), w, num_accepted_tokens=torch.ones(2, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"conv_state is too short: state_len .* >= width - 1 = 3"):
        causal_conv1d_update_spec(x, torch.zeros(2, 4, 2), w)
    with pytest.raises(TypeError, match=r"num_accepted_tokens must be int32"):
        causal_conv1d_update_spec(x, torch.zeros(2, 4, 5), w, num_accepted_tokens=torch.ones(2, dtype=torch.int64))
    for validate in (False, True):
        with pytest.raises(ValueError, match=r"num_accepted_tokens\[1\] = 4 must be between 1 and seqlen = 3"):
            causal_conv1d_update_spec(
                x,
                torch.zeros(2, 4, 5),
                w,
                num_accepted_tokens=torch.tensor([1, 4], dtype=torch.int32),
                validate=validate,
            )
        with pytest.raises(ValueError, match=r"conv_state_indices\[0\] = 7 is out of range for conv_state with 3"):
            causal_conv1d_update_spec(
                x,
                torch.zeros(3, 4, 5),
                w,
                conv_state_indices=torch.tensor([7, 0], dtype=torch.int32),
                validate=validate,
            )
    with pytest.raises(ValueError, match=r"conv_state must have batch = x.shape\[0\] = 2 rows"):
        causal_conv1d_update_spec(x, torch.zeros(3, 4, 5), w)
    with pytest.raises(ValueError, match="Invalid activation"):
        causal_conv1d_update_spec(x, torch.zeros(2, 4, 5), w, activation="relu")


@pytest.mark.gpu
def test_cuda_values_are_not_trusted_but_safe() -> None:
    """On CUDA the kernels do not look at index values on the host: an out-of-range cache index
    is skipped like pad_slot_id (output 0, nothing written), num_accepted_tokens is clamped."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    args = {k: (v.cuda() if isinstance(v, torch.Tensor) else v) for k, v in _varlen_args().items()}
    args["cache_indices"] = torch.tensor([0, 99], dtype=torch.int32, device="cuda")
    before = args["conv_states"].clone()
    out = causal_conv1d_varlen_fn(**args)
    assert torch.equal(out[:, 4:], torch.zeros_like(out[:, 4:]))
    assert torch.equal(args["conv_states"][1:], before[1:])
    x = torch.randn(2, 4, 3, device="cuda")
    st = torch.randn(2, 4, 5, device="cuda")
    st2 = st.clone()
    w = torch.randn(4, 4, device="cuda")
    a = causal_conv1d_update_spec(x, st, w, num_accepted_tokens=torch.tensor([9, 0], dtype=torch.int32, device="cuda"))
    b = causal_conv1d_update_spec(x, st2, w, num_accepted_tokens=torch.tensor([3, 1], dtype=torch.int32, device="cuda"))
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    torch.testing.assert_close(st, st2, rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# torch.library: opcheck and torch.compile


@pytest.mark.parametrize("x_layout", ["cf", "cl"])
def test_opcheck_varlen(device, x_layout) -> None:
    x, weight, bias, states, q, ci, hi = _case(device, torch.float32, 4, x_layout, "bsd", 1)
    torch.library.opcheck(
        torch.ops.causal_conv1d.varlen_fwd.default, (x, weight, bias, states, q, ci, hi, True, PAD_SLOT_ID)
    )
    torch.library.opcheck(
        torch.ops.causal_conv1d.varlen_fwd.default, (x, weight, None, states, q, None, None, False, -1)
    )


@pytest.mark.parametrize("two_d", [False, True])
def test_opcheck_spec_update(device, two_d) -> None:
    batch, dim, width, L = 3, 8, 4, 1 if two_d else 3
    x = torch.randn(batch, dim, device=device) if two_d else torch.randn(batch, L, dim, device=device).transpose(1, 2)
    state = torch.randn(5, dim, width - 2 + L, device=device)
    idx = torch.tensor([4, PAD_SLOT_ID, 0], dtype=torch.int32, device=device)
    nacc = torch.tensor([1, 1, L], dtype=torch.int32, device=device)
    torch.library.opcheck(
        torch.ops.causal_conv1d.spec_update.default,
        (
            x,
            state,
            torch.randn(dim, width, device=device),
            torch.randn(dim, device=device),
            True,
            idx,
            nacc,
            PAD_SLOT_ID,
        ),
    )


def test_compile_fullgraph(device) -> None:
    x, weight, bias, states, q, ci, hi = _case(device, torch.float32, 4, "cl", "bds", 1)
    s_eager, s_comp = states.clone(), states.clone()

    def f(x, weight, bias, states, q, ci, hi, xd, sd, idx, nacc):
        out = causal_conv1d_varlen_fn(x, weight, bias, states, q, ci, hi)
        y = causal_conv1d_update_spec(xd, sd, weight, bias, "silu", idx, nacc)
        return out * 2, y + 1

    batch, dim = 3, x.shape[0]
    xd = torch.randn(batch, dim, 2, device=device)
    sd = torch.randn(4, dim, 4, device=device)
    sd2 = sd.clone()
    idx = torch.tensor([3, 0, 1], dtype=torch.int32, device=device)
    nacc = torch.tensor([1, 2, 2], dtype=torch.int32, device=device)
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    got = compiled(x, weight, bias, s_comp, q, ci, hi, xd, sd2, idx, nacc)
    want = f(x, weight, bias, s_eager, q, ci, hi, xd, sd, idx, nacc)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
    torch.testing.assert_close(s_comp, s_eager, rtol=0, atol=0)
    torch.testing.assert_close(sd2, sd, rtol=0, atol=0)


@pytest.mark.gpu
def test_cuda_graph_capture_and_replay() -> None:
    """Both ops capture into one CUDA graph (no host sync) and replay correctly on new inputs."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    dev = "cuda"
    x, weight, bias, states, q, ci, hi = _case(dev, torch.bfloat16, 4, "cl", "bsd", 1)
    xd = torch.randn(4, x.shape[0], 3, device=dev, dtype=torch.bfloat16)
    sd = torch.randn(6, x.shape[0], 5, device=dev, dtype=torch.bfloat16)
    idx = torch.tensor([5, 0, PAD_SLOT_ID, 2], dtype=torch.int32, device=dev)
    nacc = torch.tensor([1, 3, 1, 2], dtype=torch.int32, device=dev)

    def step():
        return (
            causal_conv1d_varlen_fn(x, weight, bias, states, q, ci, hi),
            causal_conv1d_update_spec(xd, sd, weight, bias, "silu", idx, nacc),
        )

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step()  # warm-up (mutates the states: fine, the graph is checked against eager below)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        outs = step()
    for _ in range(2):
        x.copy_(torch.randn_like(x))
        xd.copy_(torch.randn_like(xd))
        nacc.copy_(torch.randint(1, 4, nacc.shape, device=dev, dtype=torch.int32))
        st_before, sd_before = states.clone(), sd.clone()
        want_v, want_states = varlen_loop(x, weight, bias, st_before, q.cpu(), ci.cpu(), hi.cpu(), True)
        want_s, want_sd = spec_loop(xd, sd_before, weight, bias, True, idx.cpu(), nacc.cpu())
        g.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(outs[0].cpu().double(), want_v, rtol=3e-2, atol=3e-2)
        torch.testing.assert_close(states.cpu(), want_states, rtol=0, atol=0)
        torch.testing.assert_close(outs[1].cpu().double(), want_s, rtol=3e-2, atol=3e-2)
        torch.testing.assert_close(sd.cpu(), want_sd, rtol=0, atol=0)
