"""causal_conv1d_fn / causal_conv1d_fwd_function against a float64 reference."""

from __future__ import annotations

import pytest
import torch
from _cc1d_ref import LAYOUTS, fp32_inputs, make_bdl, make_seq_idx, tol

from causal_conv1d import causal_conv1d_fn
from causal_conv1d._reference import fwd_ref
from causal_conv1d.causal_conv1d_interface import causal_conv1d_ref
from causal_conv1d.cpp_functions import causal_conv1d_fwd_function

SEQLENS = [1, 2, 3, 127, 129, 1025]
WIDTHS = [2, 3, 4, 5, 6, 7, 8]
FLOAT_DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.mark.parametrize("seqlen", SEQLENS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("with_init", [False, True])
def test_fwd_shapes(device: str, seqlen: int, layout: str, width: int, with_init: bool) -> None:
    batch, dim = 2, 12
    x, weight, bias = fp32_inputs(batch, dim, seqlen, layout, width, device)
    init = torch.randn(batch, dim, width - 1, device=device) if with_init else None
    silu = (seqlen + width) % 2 == 0  # both activations across the grid
    out = causal_conv1d_fn(x, weight, bias, initial_states=init, activation="silu" if silu else None)
    ref, _ = fwd_ref(x, weight, bias, initial_states=init, silu=silu)
    assert out.shape == x.shape and out.dtype == x.dtype
    torch.testing.assert_close(out.double(), ref, **tol(torch.float32))
    if layout in ("cl", "cl_view"):
        assert out.stride(1) == 1  # x's layout is kept
    else:
        assert out.stride(2) == 1


@pytest.mark.parametrize("x_dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("w_dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("width", [2, 4, 8])
@pytest.mark.parametrize("layout", ["cf", "cl"])
@pytest.mark.parametrize("activation", [None, "silu", "swish"])
def test_fwd_dtypes(
    device: str, x_dtype: torch.dtype, w_dtype: torch.dtype, width: int, layout: str, activation
) -> None:
    batch, dim, seqlen = 2, 40, 129
    x = make_bdl(batch, dim, seqlen, layout, x_dtype, device)
    weight = torch.randn(dim, width, device=device, dtype=w_dtype)
    bias = torch.randn(dim, device=device, dtype=w_dtype)
    init = torch.randn(batch, dim, width - 1, device=device, dtype=x_dtype)
    out = causal_conv1d_fn(x, weight, bias, initial_states=init, activation=activation)
    ref, _ = fwd_ref(x, weight, bias, initial_states=init, silu=activation is not None)
    assert out.dtype == x_dtype
    torch.testing.assert_close(out.double(), ref, **tol(x_dtype, w_dtype))


def test_fwd_float64_cpu() -> None:
    x = torch.randn(2, 7, 33, dtype=torch.float64)
    weight = torch.randn(7, 4, dtype=torch.float64)
    out = causal_conv1d_fn(x, weight, activation="silu")
    ref, _ = fwd_ref(x, weight, silu=True)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seqlen", [1, 3, 129, 1025])
@pytest.mark.parametrize("layout", ["cf", "cl", "cl_view"])
@pytest.mark.parametrize("width", [2, 4, 7])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fwd_seq_idx(device: str, seqlen: int, layout: str, width: int, dtype: torch.dtype) -> None:
    batch, dim = 3, 20
    x = make_bdl(batch, dim, seqlen, layout, dtype, device)
    weight = torch.randn(dim, width, device=device)
    bias = torch.randn(dim, device=device)
    seq_idx = make_seq_idx(batch, seqlen, device)
    out = causal_conv1d_fn(x, weight, bias, seq_idx=seq_idx, activation="silu")
    ref, _ = fwd_ref(x, weight, bias, seq_idx=seq_idx, silu=True)
    torch.testing.assert_close(out.double(), ref, **tol(dtype, torch.float32))
    padding = (seq_idx < 0)[:, None, :].expand_as(out)
    assert torch.all(out[padding] == 0), "padding positions (seq_idx < 0) must give 0"


def test_fwd_seq_idx_separates_sequences() -> None:
    # Two packed sequences equal to running them separately.
    dim, width = 6, 4
    a, b = torch.randn(1, dim, 10), torch.randn(1, dim, 7)
    weight, bias = torch.randn(dim, width), torch.randn(dim)
    packed = torch.cat([a, b], dim=-1)
    seq_idx = torch.tensor([[0] * 10 + [1] * 7], dtype=torch.int32)
    out = causal_conv1d_fn(packed, weight, bias, seq_idx=seq_idx)
    torch.testing.assert_close(out[..., :10], causal_conv1d_fn(a, weight, bias))
    torch.testing.assert_close(out[..., 10:], causal_conv1d_fn(b, weight, bias))


@pytest.mark.parametrize("seqlen", [1, 2, 3, 129])
@pytest.mark.parametrize("layout", ["cf", "cl", "cf_view"])
@pytest.mark.parametrize("width", [2, 4, 8])
@pytest.mark.parametrize("with_init", [False, True])
def test_final_states(device: str, seqlen: int, layout: str, width: int, with_init: bool) -> None:
    batch, dim = 2, 9
    x = make_bdl(batch, dim, seqlen, layout, torch.float32, device)
    weight = torch.randn(dim, width, device=device)
    init = torch.randn(batch, dim, width - 1, device=device) if with_init else None
    out, final = causal_conv1d_fn(x, weight, initial_states=init, return_final_states=True)
    ref_out, ref_final = fwd_ref(x, weight, initial_states=init)
    torch.testing.assert_close(out.double(), ref_out, **tol(torch.float32))
    assert final.shape == (batch, dim, width - 1)
    torch.testing.assert_close(final.double(), ref_final, rtol=0, atol=0)  # a copy: exact
    # A pre-allocated final_states_out (either layout) is written and returned.
    for fs_out in (
        torch.empty(batch, dim, width - 1, device=device),
        torch.empty(batch, width - 1, dim, device=device).transpose(1, 2),
    ):
        out2, final2 = causal_conv1d_fn(
            x, weight, initial_states=init, return_final_states=True, final_states_out=fs_out
        )
        assert final2 is fs_out
        torch.testing.assert_close(fs_out, final, rtol=0, atol=0)
        torch.testing.assert_close(out2, out, rtol=0, atol=0)


def test_chunked_equals_whole(device: str) -> None:
    # Running two halves with final -> initial states equals one pass (the streaming contract).
    batch, dim, width = 2, 16, 4
    x = torch.randn(batch, dim, 300, device=device)
    weight, bias = torch.randn(dim, width, device=device), torch.randn(dim, device=device)
    whole = causal_conv1d_fn(x, weight, bias)
    first, state = causal_conv1d_fn(x[..., :131], weight, bias, return_final_states=True)
    second = causal_conv1d_fn(x[..., 131:], weight, bias, initial_states=state)
    torch.testing.assert_close(torch.cat([first, second], -1), whole, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("layout", ["cf", "cl"])
def test_fwd_function_and_ref_agree(device: str, layout: str) -> None:
    batch, dim, seqlen, width = 2, 10, 65, 4
    x, weight, bias = fp32_inputs(batch, dim, seqlen, layout, width, device)
    init = torch.randn(batch, dim, width - 1, device=device)
    fs_out = torch.empty(batch, dim, width - 1, device=device)
    out = causal_conv1d_fwd_function(x, weight, bias, None, init, fs_out, True)
    ref_out, ref_fs = causal_conv1d_ref(x, weight, bias, init, True, None, "silu")
    torch.testing.assert_close(out, ref_out, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(fs_out, ref_fs)
    assert causal_conv1d_fwd_function(x, weight, None, None, None, None, False).shape == x.shape


def test_zero_sized(device: str) -> None:
    weight = torch.randn(4, 3, device=device)
    for shape in [(0, 4, 5), (2, 4, 0)]:
        x = torch.randn(*shape, device=device)
        out, final = causal_conv1d_fn(x, weight, return_final_states=True)
        assert out.shape == x.shape and final.shape == (shape[0], 4, 2)
    _, final = causal_conv1d_fn(torch.randn(2, 4, 0, device=device), weight, return_final_states=True)
    assert torch.all(final == 0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout", ["cf", "cl"])
@pytest.mark.parametrize("width", [3, 8])
def test_fwd_long_reduced_precision(device: str, dtype: torch.dtype, layout: str, width: int) -> None:
    # Rows longer than the CPU kernel's conversion chunk (1024): the W-1 carried inputs at each
    # chunk boundary must be right.
    batch, dim, seqlen = 2, 4, 2500
    x = make_bdl(batch, dim, seqlen, layout, dtype, device)
    weight, bias = torch.randn(dim, width, device=device), torch.randn(dim, device=device)
    init = torch.randn(batch, dim, width - 1, device=device, dtype=dtype)
    out = causal_conv1d_fn(x, weight, bias, initial_states=init, activation="silu")
    ref, _ = fwd_ref(x, weight, bias, initial_states=init, silu=True)
    torch.testing.assert_close(out.double(), ref, **tol(dtype, torch.float32))
