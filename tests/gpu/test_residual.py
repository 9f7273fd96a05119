"""The fused residual on the CUDA kernel paths: fwd with a residual in x's layout runs the fast paths
(fwd_cf_fast, fwd_cl_fast) and packed_fwd the fast varlen ones (varlen_cf_fast, varlen_cl_fast) or,
channel-last without states, the channel-last fast forward (packed_fwd_cl_fast), against the float64 reference; the general paths (switched to, or taken for a residual the fast
paths cannot read by vectors) give the same result. (tests/causal_conv1d/test_residual.py runs the
API-level cases, gradients, opcheck and torch.compile on CUDA as well.)"""

from __future__ import annotations

import pytest
import torch
from gpu_ops import kernel_path

from causal_conv1d._reference import REL_TOL, fwd_ref, packed_fwd_ref, rel_err

pytestmark = pytest.mark.gpu

DEV = "cuda"
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def make_bdl(batch: int, dim: int, seqlen: int, layout: str, dtype: torch.dtype) -> torch.Tensor:
    if layout == "cf":
        return torch.randn(batch, dim, seqlen, device=DEV, dtype=dtype)
    if layout == "cl":
        return torch.randn(batch, seqlen, dim, device=DEV, dtype=dtype).transpose(1, 2)
    raise ValueError(layout)


def cu_of(lens: list[int]) -> torch.Tensor:
    return torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device=DEV)


FAST = {"cf": "fwd_cf_fast", "cl": "fwd_cl_fast"}


@pytest.mark.parametrize("layout", ["cf", "cl"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("width", [2, 3, 4])
@pytest.mark.parametrize("shape", [(2, 256, 1024), (4, 512, 4096), (3, 96, 200)])
def test_fwd_fast_path_runs_with_residual(ops, layout: str, dtype: torch.dtype, width: int, shape: tuple) -> None:
    """(4, 512, 4096): the 16-bit cf kernels of 8 vectors per lane and their drain; (3, 96, 200): short rows."""
    batch, dim, seqlen = shape
    x = make_bdl(batch, dim, seqlen, layout, dtype)
    w = torch.randn(dim, width, device=DEV, dtype=dtype)
    b = torch.randn(dim, device=DEV, dtype=dtype)
    init = torch.randn(batch, dim, width - 1, device=DEV, dtype=dtype)
    res = torch.randn_like(x)  # x's layout
    for silu in (False, True):
        out, final = ops.fwd(x, w, b, None, init, True, silu, res)
        assert ops._last_kernel_path("fwd") == FAST[layout]
        ref, ref_final = fwd_ref(x, w, b, None, init, silu, residual=res)
        assert rel_err(out, ref) < REL_TOL[dtype], silu
        assert torch.equal(final, ref_final.to(dtype))
        with kernel_path(ops, FAST[layout], 0):
            out_g, _ = ops.fwd(x, w, b, None, init, True, silu, res)
            assert ops._last_kernel_path("fwd") == "fwd_general"
        assert rel_err(out_g, ref) < REL_TOL[dtype], silu
        # a zero residual: the no-residual output, bit for bit
        out_0, _ = ops.fwd(x, w, b, None, init, True, silu, torch.zeros_like(x))
        out_n, _ = ops.fwd(x, w, b, None, init, True, silu)
        assert ops._last_kernel_path("fwd") == FAST[layout]
        assert torch.equal(out_0, out_n)


@pytest.mark.parametrize("layout", ["cf", "cl"])
def test_fwd_residual_the_fast_path_cannot_vectorise_runs_the_general_path(ops, layout: str) -> None:
    """A residual one element off 16-byte alignment (cf) or with an odd token pitch (cl, 16-bit): the
    general path, with the right result; the same residual copied to an aligned tensor: the fast path."""
    dtype, batch, dim, seqlen = torch.bfloat16, 2, 256, 1024
    x = make_bdl(batch, dim, seqlen, layout, dtype)
    w = torch.randn(dim, 4, device=DEV, dtype=dtype)
    if layout == "cf":
        res = torch.randn(batch, dim, seqlen + 1, device=DEV, dtype=dtype)[:, :, 1:]
    else:
        res = torch.randn(batch, seqlen, dim + 1, device=DEV, dtype=dtype)[:, :, :dim].transpose(1, 2)
    out, _ = ops.fwd(x, w, None, None, None, False, True, res)
    assert ops._last_kernel_path("fwd") == "fwd_general"
    ref, _ = fwd_ref(x, w, silu=True, residual=res)
    assert rel_err(out, ref) < REL_TOL[dtype]
    out2, _ = ops.fwd(x, w, None, None, None, False, True, res.clone(memory_format=torch.preserve_format))
    assert ops._last_kernel_path("fwd") == FAST[layout]
    assert rel_err(out2, ref) < REL_TOL[dtype]


@pytest.mark.parametrize("layout", ["cf", "cl"])
def test_fwd_residual_in_the_other_layout_is_copied_and_runs_the_fast_path(ops, layout: str) -> None:
    dtype, batch, dim, seqlen = torch.bfloat16, 2, 256, 1024
    x = make_bdl(batch, dim, seqlen, layout, dtype)
    w = torch.randn(dim, 4, device=DEV, dtype=dtype)
    res = make_bdl(batch, dim, seqlen, "cl" if layout == "cf" else "cf", dtype)
    out, _ = ops.fwd(x, w, None, None, None, False, True, res)
    assert ops._last_kernel_path("fwd") == FAST[layout]
    ref, _ = fwd_ref(x, w, silu=True, residual=res)
    assert rel_err(out, ref) < REL_TOL[dtype]


@pytest.mark.parametrize("layout", ["cf", "cl"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_fwd_general_path_with_seq_idx_and_residual(ops, layout: str, dtype: torch.dtype) -> None:
    batch, dim, seqlen, width = 2, 64, 300, 4
    x = make_bdl(batch, dim, seqlen, layout, dtype)
    w = torch.randn(dim, width, device=DEV, dtype=dtype)
    seq = torch.zeros(batch, seqlen, dtype=torch.int32, device=DEV)
    seq[:, 100:] = 1
    seq[:, 150:170] = -1
    seq[:, 170:] = 2
    init = torch.randn(batch, dim, width - 1, device=DEV, dtype=dtype)
    res = torch.randn_like(x)
    out, _ = ops.fwd(x, w, None, seq, init, False, True, res)
    assert ops._last_kernel_path("fwd") == "fwd_general"
    ref, _ = fwd_ref(x, w, None, seq, init, True, residual=res)
    assert rel_err(out, ref) < REL_TOL[dtype]
    assert torch.equal(out[..., 150:170], res[..., 150:170])  # padding: 0 + residual


VARLEN_FAST = {"cf": "varlen_cf_fast", "cl": "varlen_cl_fast"}


@pytest.mark.parametrize("layout", ["cf", "cl"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("width", [2, 4])
@pytest.mark.parametrize("lens", [[500, 0, 37, 1000], [1, 2, 1, 3, 5, 2, 1, 40, 3, 7, 1]])
def test_packed_fwd_fast_paths_run_with_residual(ops, layout: str, dtype: torch.dtype, width: int, lens) -> None:
    """The second lens: requests shorter than a vector (varlen_cf_fast's token-by-token path)."""
    dim = 128
    cu = cu_of(lens)
    x = make_bdl(1, dim, sum(lens), layout, dtype)
    w = torch.randn(dim, width, device=DEV, dtype=dtype)
    b = torch.randn(dim, device=DEV, dtype=dtype)
    res = torch.randn_like(x)
    for init in (None, torch.randn(len(lens), dim, width - 1, device=DEV, dtype=dtype)):
        out, final = ops.packed_fwd(x, w, b, cu, init, True, True, res)
        assert ops._last_kernel_path("varlen_fwd") == VARLEN_FAST[layout]
        ref, ref_final = packed_fwd_ref(x, w, b, cu, init, silu=True, residual=res)
        assert rel_err(out, ref) < REL_TOL[dtype]
        assert torch.equal(final, ref_final.to(dtype))
        with kernel_path(ops, VARLEN_FAST[layout], 0):
            out_g, _ = ops.packed_fwd(x, w, b, cu, init, True, True, res)
            assert ops._last_kernel_path("varlen_fwd") == "varlen_general"
        assert rel_err(out_g, ref) < REL_TOL[dtype]
        out_0, _ = ops.packed_fwd(x, w, b, cu, init, True, True, torch.zeros_like(x))
        out_n, _ = ops.packed_fwd(x, w, b, cu, init, True, True)
        assert torch.equal(out_0, out_n)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("width", [2, 3, 4])
@pytest.mark.parametrize("lens", [[500, 0, 37, 1000], [1, 2, 1, 3, 5, 2, 1, 40, 3, 7, 1], [4096, 3000, 9000]])
@pytest.mark.parametrize("tail", [0, 37])
def test_packed_fwd_cl_fast_runs_with_residual(ops, dtype: torch.dtype, width: int, lens, tail: int) -> None:
    """Channel-last without states: the fast forward with sequences and a residual, the residual in
    x's layout or in the other one (copied); tokens after the last sequence get the residual; a zero
    residual gives the no-residual output bit for bit."""
    dim, n = 256, sum(lens)
    cu = cu_of(lens)
    x = make_bdl(1, dim, n + tail, "cl", dtype)
    w = torch.randn(dim, width, device=DEV, dtype=dtype)
    b = torch.randn(dim, device=DEV, dtype=dtype)
    for res in (torch.randn_like(x), make_bdl(1, dim, n + tail, "cf", dtype)):
        out, final = ops.packed_fwd(x, w, b, cu, None, False, True, res)
        assert ops._last_kernel_path("varlen_fwd") == "packed_fwd_cl_fast"
        assert final.numel() == 0
        ref, _ = packed_fwd_ref(x[:, :, :n], w, b, cu, None, silu=True, residual=res[:, :, :n])
        assert rel_err(out[:, :, :n], ref) < REL_TOL[dtype]
        assert torch.equal(out[:, :, n:], res[:, :, n:])
        with kernel_path(ops, "packed_fwd_cl_fast", 0):
            out_v, _ = ops.packed_fwd(x, w, b, cu, None, False, True, res)
            assert ops._last_kernel_path("varlen_fwd") == "varlen_cl_fast"
        assert rel_err(out_v[:, :, :n], ref) < REL_TOL[dtype]
        assert torch.equal(out_v[:, :, n:], res[:, :, n:])
    out_0, _ = ops.packed_fwd(x, w, b, cu, None, False, True, torch.zeros_like(x))
    assert ops._last_kernel_path("varlen_fwd") == "packed_fwd_cl_fast"
    out_n, _ = ops.packed_fwd(x, w, b, cu, None, False, True)
    assert torch.equal(out_0, out_n)


def test_packed_fwd_general_path_with_residual_width_8(ops) -> None:
    dim, lens, dtype = 64, [300, 1, 0, 77], torch.bfloat16
    cu = cu_of(lens)
    x = make_bdl(1, dim, sum(lens), "cl", dtype)
    w = torch.randn(dim, 8, device=DEV, dtype=dtype)
    init = torch.randn(len(lens), dim, 7, device=DEV, dtype=dtype)
    res = torch.randn_like(x)
    out, _ = ops.packed_fwd(x, w, None, cu, init, False, False, res)
    assert ops._last_kernel_path("varlen_fwd") == "varlen_general"
    ref, _ = packed_fwd_ref(x, w, None, cu, init, residual=res)
    assert rel_err(out, ref) < REL_TOL[dtype]


@pytest.mark.parametrize("layout", ["cf", "cl"])
def test_packed_fwd_misaligned_residual_runs_the_general_path(ops, layout: str) -> None:
    dim, lens, dtype = 128, [500, 37, 1000], torch.bfloat16
    total = sum(lens)
    cu = cu_of(lens)
    x = make_bdl(1, dim, total, layout, dtype)
    w = torch.randn(dim, 4, device=DEV, dtype=dtype)
    if layout == "cf":
        res = torch.randn(1, dim, total + 1, device=DEV, dtype=dtype)[:, :, 1:]
    else:
        res = torch.randn(1, total, dim + 1, device=DEV, dtype=dtype)[:, :, :dim].transpose(1, 2)
    out, _ = ops.packed_fwd(x, w, None, cu, None, False, True, res)
    assert ops._last_kernel_path("varlen_fwd") == "varlen_general"
    ref, _ = packed_fwd_ref(x, w, None, cu, silu=True, residual=res)
    assert rel_err(out, ref) < REL_TOL[dtype]


def test_residual_capture_in_a_cuda_graph(ops) -> None:
    x = make_bdl(2, 256, 1024, "cl", torch.bfloat16)
    w = torch.randn(256, 4, device=DEV, dtype=torch.bfloat16)
    res = torch.randn_like(x)
    ops.fwd(x, w, None, None, None, False, True, res)  # warm up
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out, _ = ops.fwd(x, w, None, None, None, False, True, res)
    res.copy_(torch.randn_like(res))
    g.replay()
    torch.cuda.synchronize()
    ref, _ = fwd_ref(x, w, silu=True, residual=res)
    assert rel_err(out, ref) < REL_TOL[torch.bfloat16]
