"""Serving ops (docs/serving.md): the packed varlen prefill (causal_conv1d_varlen_fn, op varlen_fwd)
with prefix caching, and the decode update (causal_conv1d_update_spec, op spec_update): plain,
speculative, ragged, tree drafts, prefix caching; through the native API and the vLLM drop-in
(causal_conv1d.vllm), against the tests' own float64 reference (_serving_ref.py) and against
whole-sequence convolutions; chains of the ops on one cache; mixed state dtypes; index tensors
longer than the batch; opcheck and torch.compile(fullgraph=True). Argument errors:
test_serving_errors.py; vLLM's own kernels: test_serving_vllm_interop.py.
"""

from __future__ import annotations

import random
from typing import Optional

import pytest
import torch
import torch.nn.functional as F
from _serving_ref import API, APIS, decode_ref, prefill_ref

from causal_conv1d import causal_conv1d_update_spec, causal_conv1d_varlen_fn
from causal_conv1d import vllm as cc_vllm
from causal_conv1d.varlen import PAD_SLOT_ID, causal_conv1d_update_spec_ref, causal_conv1d_varlen_ref

# (x dtype, state dtype): same dtype, and mixed (x is cast to the cache's dtype, as in vLLM)
DTYPES = [
    (torch.float32, torch.float32),
    (torch.float16, torch.float16),
    (torch.bfloat16, torch.bfloat16),
    (torch.float64, torch.float64),
    (torch.float32, torch.bfloat16),
    (torch.bfloat16, torch.float32),
    (torch.float16, torch.float32),
    (torch.float32, torch.float64),
]
# tolerance by dtype: outputs are rounded to the cache's dtype and returned in x's (the coarser counts)
TOL = {torch.float64: 1e-10, torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def _skip_f64_off_cpu(device: str, *dtypes: torch.dtype) -> None:
    if device != "cpu" and torch.float64 in dtypes:
        pytest.skip("float64 is CPU-only")


def _close(got: torch.Tensor, want: torch.Tensor, sdt: torch.dtype) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    t = max(TOL[sdt], TOL[got.dtype])  # rounded to the cache's dtype, returned in x's
    torch.testing.assert_close(got.cpu().double(), want.double(), rtol=t, atol=t)


def _x(dim: int, total: int, layout: str, dtype, device) -> torch.Tensor:
    if layout == "cf":
        return torch.randn(dim, total, device=device).to(dtype)
    return torch.randn(total, dim, device=device).to(dtype).t()  # channel-last: (total, dim) as .T


def _cache(lines: int, dim: int, s: int, layout: str, dtype, device) -> torch.Tensor:
    if layout == "bds":
        return torch.randn(lines, dim, s, device=device).to(dtype)
    return torch.randn(lines, s, dim, device=device).to(dtype).transpose(1, 2)  # vLLM's (lines, S, dim)


def _i32(v, device) -> torch.Tensor:
    return torch.tensor(v, dtype=torch.int32, device=device)


def _qsl(lengths: list[int]) -> list[int]:
    q = [0]
    for n in lengths:
        q.append(q[-1] + n)
    return q


def _full_conv(seq: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], silu: bool) -> torch.Tensor:
    """The causal conv of a whole (dim, T) sequence from zeros, float64 (one dot product per token)."""
    w = weight.detach().cpu().double()
    padded = F.pad(seq.double(), (w.shape[1] - 1, 0))
    o = torch.stack([padded[:, t : t + w.shape[1]].mul(w).sum(1) for t in range(seq.shape[1])], 1)
    if bias is not None:
        o = o + bias.detach().cpu().double()[:, None]
    return F.silu(o) if silu else o


# ---------------------------------------------------------------------------------------------
# prefill


def _prefill_case(device, xdt, sdt, width, x_layout, st_layout, s_extra, seed=0, tail=5, pad_rows=3):
    rng = random.Random(seed)
    # lengths: 0, 1, shorter than the window, one starting just before the CUDA chunk edge (64),
    # long ones crossing several chunks
    lens = [63, 1, 0, 2, width - 1, 150, 5, 64, 129, 3]
    rng.shuffle(lens)
    lens = [63, *lens]
    batch = len(lens)
    q = _qsl(lens)
    dim = 37
    lines = batch + 4
    x = _x(dim, q[-1] + tail, x_layout, xdt, device)  # a tail of no request
    weight = (torch.randn(dim, width, device=device) / width**0.5).to(xdt if xdt != torch.float64 else sdt)
    bias = torch.randn(dim, device=device).to(weight.dtype)
    cache = _cache(lines, dim, width - 1 + s_extra, st_layout, sdt, device)
    perm = list(range(lines))
    rng.shuffle(perm)
    ci = perm[:batch] + [10**6] * pad_rows  # rows past the batch are never read
    ci[3] = PAD_SLOT_ID
    hi = [rng.random() < 0.6 for _ in range(batch)] + [True] * pad_rows
    return x, weight, bias, cache, _i32(q, device), _i32(ci, device), torch.tensor(hi, device=device)


@pytest.mark.parametrize("api", APIS, ids=str)
@pytest.mark.parametrize("xdt, sdt", DTYPES, ids=lambda d: str(d).split(".")[-1])
@pytest.mark.parametrize("width", [2, 3, 4, 5, 8])
@pytest.mark.parametrize("x_layout", ["cf", "cl"])
@pytest.mark.parametrize("st_layout, s_extra", [("bds", 0), ("bsd", 0), ("bsd", 3), ("bds", 2)])
def test_prefill(device, api: API, xdt, sdt, width, x_layout, st_layout, s_extra) -> None:
    """Every request of a packed batch against the reference: outputs, the live window [0, W-1) of
    each line, entries [W-1, S) untouched, pad slots skipped, tokens past the last request 0."""
    _skip_f64_off_cpu(device, xdt, sdt)
    x, weight, bias, cache, q, ci, hi = _prefill_case(device, xdt, sdt, width, x_layout, st_layout, s_extra)
    want_out, want_cache = prefill_ref(x, weight, bias, cache, q, ci, hi, True)
    out = api.prefill(x, weight, bias, cache, q, ci, hi, True)
    _close(out, want_out, sdt)
    assert out.stride() == x.stride()  # x's layout
    assert torch.equal(cache.cpu(), want_cache)
    assert torch.all(out[:, int(q[-1]) :] == 0)
    pad_req = 3
    assert torch.all(out[:, int(q[pad_req]) : int(q[pad_req + 1])] == 0)


@pytest.mark.parametrize("api", APIS, ids=str)
def test_prefill_defaults_and_package_ref(device, api: API) -> None:
    """cache_indices / has_initial_state None (line i, zeros), no bias, no activation; the
    package's float64 reference agrees with the tests' own."""
    dim, width = 6, 4
    q = _i32(_qsl([5, 0, 2, 9]), device)
    x = _x(dim, 16, "cl", torch.float32, device)
    weight = torch.randn(dim, width, device=device)
    cache = _cache(4, dim, 5, "bsd", torch.float32, device)
    want_out, want_cache = prefill_ref(x, weight, None, cache, q, silu=False)
    c2 = cache.clone()
    out = api.prefill(x, weight, None, cache, q, silu=False)
    _close(out, want_out, torch.float32)
    assert torch.equal(cache.cpu(), want_cache)
    out2 = causal_conv1d_varlen_ref(x, weight, None, c2, q, activation=None)
    _close(out2, want_out, torch.float32)
    assert torch.equal(c2.cpu(), want_cache)


def test_prefill_int32_has_initial_state(device) -> None:
    x, weight, bias, cache, q, ci, hi = _prefill_case(device, torch.float32, torch.float32, 4, "cf", "bds", 0)
    c2 = cache.clone()
    a = causal_conv1d_varlen_fn(x, weight, bias, cache, q, ci, hi)
    b = causal_conv1d_varlen_fn(x, weight, bias, c2, q, ci, hi.to(torch.int32) * 7)  # nonzero = true
    assert torch.equal(a, b) and torch.equal(cache, c2)


def test_prefill_split_equals_whole(device) -> None:
    """A prefill in two chunks (the second starting from the first's state) equals one prefill."""
    dim, width = 8, 4
    x = _x(dim, 40, "cl", torch.float32, device)
    weight, bias = torch.randn(dim, width, device=device), torch.randn(dim, device=device)
    c1 = _cache(2, dim, 6, "bsd", torch.float32, device)
    c2 = c1.clone()
    whole = causal_conv1d_varlen_fn(x, weight, bias, c1, _i32([0, 40], device))
    first = causal_conv1d_varlen_fn(x[:, :2], weight, bias, c2, _i32([0, 2], device))  # shorter than the window
    second = causal_conv1d_varlen_fn(
        x[:, 2:], weight, bias, c2, _i32([0, 38], device), has_initial_state=torch.tensor([True], device=device)
    )
    torch.testing.assert_close(torch.cat([first, second], 1), whole, rtol=1e-5, atol=1e-5)
    assert torch.equal(c1, c2)
    _close(whole, _full_conv(x.cpu(), weight, bias, True).float(), torch.float32)


@pytest.mark.parametrize("api", APIS, ids=str)
def test_prefill_empty(device, api: API) -> None:
    dim, width = 4, 3
    weight = torch.randn(dim, width, device=device)
    cache = _cache(2, dim, 2, "bds", torch.float32, device)
    before = cache.clone()
    out = api.prefill(torch.randn(dim, 0, device=device), weight, None, cache, _i32([0], device))
    assert out.shape == (dim, 0)
    out = api.prefill(torch.randn(dim, 3, device=device), weight, None, cache, _i32([0, 0, 0], device))
    assert torch.all(out == 0) and torch.equal(cache, before)


# ---------------------------------------------------------------------------------------------
# prefix caching


def _apc_rows(reqs, block: int, lines_per_row: int, rng: random.Random, pad_rows: int = 2):
    """Per request (p0, n, fewer): vLLM's block indices (first = p0 // B, last = (p0 + n - 1) // B,
    init = (p0 - 1) // B) and a table of distinct lines; fewer > 0 writes that many boundaries less."""
    lines = list(range(len(reqs) * lines_per_row))
    rng.shuffle(lines)
    table, first, last, init, done, hinit = [], [], [], [], [], []
    for r, (p0, n, fewer) in enumerate(reqs):
        table.append(lines[r * lines_per_row : (r + 1) * lines_per_row])
        lo, hi = p0 // block, (p0 + n - 1) // block
        first.append(lo + fewer)
        last.append(hi)
        init.append(max(p0 - 1, 0) // block)
        done.append(p0)
        hinit.append(p0 > 0)
    for _ in range(pad_rows):  # rows past the batch: never read
        table.append([10**6] * lines_per_row)
        first.append(-5)
        last.append(10**6)
        init.append(10**6)
        done.append(-1)
        hinit.append(True)
    return table, first, last, init, done, hinit


@pytest.mark.parametrize("api", APIS, ids=str)
@pytest.mark.parametrize("width", [2, 4, 6])
@pytest.mark.parametrize("block", [1, 4, 8, 16])
@pytest.mark.parametrize("xdt, sdt", DTYPES[:1] + DTYPES[4:5], ids=lambda d: str(d).split(".")[-1])
def test_prefix_caching(device, api: API, width, block, xdt, sdt) -> None:
    """Block-boundary states written to the lines of their blocks, the final state to the last block,
    the initial state read from initial_state_idx's block; fewer boundaries than the chunk crosses;
    a chunk inside one block; a skipped request."""
    rng = random.Random(block * 10 + width)
    reqs = [
        (0, 3 * block + 2, 0),  # from the start: boundaries B, 2B, 3B
        (block * 2 + 1, 2 * block + 3, 0),  # from mid-block
        (block * 3, block, 0),  # exactly one block from a boundary: none inside
        (5, 4 * block + 1, 1),  # one boundary fewer than it crosses
        (block, 2, 0),  # inside one block
        (7, 3 * block, 0),  # skipped (pad_slot_id in its input column)
    ]
    lens = [n for _, n, _ in reqs]
    q = _qsl(lens)
    dim = 10
    lines_per_row = max(p0 + n for p0, n, _ in reqs) // block + 2
    table, first, last, init, done, hinit = _apc_rows(reqs, block, lines_per_row, rng)
    table[5][init[5]] = PAD_SLOT_ID
    n_lines = len(reqs) * lines_per_row
    x = _x(dim, q[-1] + 3, "cl", xdt, device)
    weight = torch.randn(dim, width, device=device).to(xdt)
    bias = torch.randn(dim, device=device).to(xdt)
    cache = _cache(n_lines, dim, width + 1, "bsd", sdt, device)
    args = [_i32(v, device) for v in (table, first, last, init, done)]
    ci, fi, la, ii, nc = args
    hi = torch.tensor(hinit, device=device)
    want_out, want_cache = prefill_ref(
        x, weight, bias, cache, _i32(q, device), ci, hi, True, PAD_SLOT_ID, fi, la, ii, nc, block
    )
    c_pkg = cache.clone()
    out = api.prefill(x, weight, bias, cache, _i32(q, device), ci, hi, True, PAD_SLOT_ID, fi, la, ii, nc, block)
    _close(out, want_out, sdt)
    assert torch.equal(cache.cpu(), want_cache)
    out_pkg = causal_conv1d_varlen_ref(
        x, weight, bias, c_pkg, _i32(q, device), ci, hi,
        block_idx_first_scheduled_token=fi, block_idx_last_scheduled_token=la, initial_state_idx=ii,
        num_computed_tokens=nc, block_size_to_align=block,
    )  # fmt: skip
    _close(out_pkg, want_out, sdt)  # the package's reference agrees
    assert torch.equal(c_pkg.cpu(), want_cache)


@pytest.mark.parametrize("api", APIS, ids=str)
@pytest.mark.parametrize("width, block, chunks", [(4, 8, [5, 13, 8, 1, 20]), (2, 4, [4, 4, 9]), (8, 8, [3, 30, 2])])
def test_prefix_caching_chunks_equal_one_prefill(device, api: API, width, block, chunks) -> None:
    """One request prefilled chunk by chunk with prefix caching (each chunk starting from the state in
    its initial block) gives the outputs of one whole-sequence conv, and every block's line holds the
    W - 1 inputs before the block's end (zeros before the start): what prefix caching reuses."""
    dim, total = 6, sum(chunks)
    seq = torch.randn(total, dim, device=device)
    weight, bias = torch.randn(dim, width, device=device), torch.randn(dim, device=device)
    n_blocks = (total + block - 1) // block
    cache = torch.zeros(n_blocks, 3 + width, dim, device=device).transpose(1, 2)
    table = _i32([list(range(n_blocks))], device)
    outs, p0 = [], 0
    for n in chunks:
        xin = seq[p0 : p0 + n].T
        outs.append(
            api.prefill(
                xin, weight, bias, cache, _i32([0, n], device), table, torch.tensor([p0 > 0], device=device), True,
                PAD_SLOT_ID, _i32([p0 // block], device), _i32([(p0 + n - 1) // block], device),
                _i32([max(p0 - 1, 0) // block], device), _i32([p0], device), block,
            )
        )  # fmt: skip
        p0 += n
    want = _full_conv(seq.T.cpu(), weight, bias, True)
    torch.testing.assert_close(torch.cat(outs, 1).cpu().double(), want, rtol=1e-5, atol=1e-5)
    h = width - 1
    padded = torch.cat([torch.zeros(dim, h), seq.T.cpu()], 1)  # padded[:, h + t] = token t
    for b in range(n_blocks):
        end = min((b + 1) * block, total)
        assert torch.equal(cache[b, :, :h].cpu(), padded[:, end : end + h]), f"block {b}"


# ---------------------------------------------------------------------------------------------
# decode


def _decode_case(device, xdt, sdt, width, form, mode, apc, st_layout, seed=0):
    """A decode batch: form "token" (batch, dim), "3d" (batch, dim, L), "ragged" (num_tokens, dim);
    mode "plain", "spec" (num_accepted_tokens), "tree" (retrieve_parent_token), "spec_tree"."""
    rng = random.Random(seed)
    dim, h = 12, width - 1
    batch, pad_rows = 5, 2
    if form == "token":
        lens = [1] * batch
    elif form == "3d":
        lens = [4] * batch
    else:
        lens = [3, 1, 0, 4, 2]
    L = max(lens)
    spec = "spec" in mode
    s = h - 1 + L + 2 if spec else h + 1
    n_lines = batch * 3 + 1
    if form == "token":
        x = torch.randn(batch, dim, device=device).to(xdt)
    elif form == "3d":
        x = torch.randn(batch, L, dim, device=device).to(xdt).transpose(1, 2)  # channel-last
    else:
        x = torch.randn(sum(lens) + 2, dim, device=device).to(xdt)  # 2 tokens of no request
    weight = torch.randn(dim, width, device=device).to(xdt)
    bias = torch.randn(dim, device=device).to(xdt)
    cache = _cache(n_lines, dim, s, st_layout, sdt, device)
    perm = list(range(n_lines))
    rng.shuffle(perm)
    kw = {}
    if apc:
        cols = 3
        table = [perm[b * cols : (b + 1) * cols] for b in range(batch)] + [[10**6] * cols] * pad_rows
        init = [rng.randrange(cols) for _ in range(batch)] + [10**6] * pad_rows
        last = [rng.randrange(cols) for _ in range(batch)] + [10**6] * pad_rows
        table[1][init[1]] = PAD_SLOT_ID
        kw.update(indices=_i32(table, device), last=_i32(last, device), init_idx=_i32(init, device))
    else:
        idx = perm[:batch] + [10**6] * pad_rows
        idx[1] = PAD_SLOT_ID
        kw["indices"] = _i32(idx, device)
    if spec:
        kw["num_accepted"] = _i32([rng.randint(1, s - h + 1) for _ in range(batch)] + [0] * pad_rows, device)
    if "tree" in mode:
        par = [[-1] + [rng.randrange(j) for j in range(1, L)] + [99] for _ in range(batch + pad_rows)]
        kw["parent"] = _i32(par, device)
    if form == "ragged":
        kw["qsl"] = _i32(_qsl(lens), device)
        kw["max_query_len"] = L
    return x, cache, weight, bias, kw


@pytest.mark.parametrize("api", APIS, ids=str)
@pytest.mark.parametrize("mode", ["plain", "spec", "tree", "spec_tree"])
@pytest.mark.parametrize("form", ["token", "3d", "ragged"])
@pytest.mark.parametrize("apc", [False, True], ids=["lines", "apc"])
@pytest.mark.parametrize("width", [2, 4, 7])
@pytest.mark.parametrize("xdt, sdt", DTYPES[:1] + DTYPES[3:5], ids=lambda d: str(d).split(".")[-1])
def test_decode(device, api: API, mode, form, apc, width, xdt, sdt) -> None:
    _skip_f64_off_cpu(device, xdt, sdt)
    if api.kind == "vllm" and form == "ragged":
        # vLLM's batch is len(conv_state_indices): index tensors exactly as long as the batch
        x, cache, weight, bias, kw = _decode_case(device, xdt, sdt, width, form, mode, apc, "bsd")
        kw = {k: (v[:5] if k != "qsl" and isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
    else:
        x, cache, weight, bias, kw = _decode_case(device, xdt, sdt, width, form, mode, apc, "bsd")
    want_out, want_cache = decode_ref(x, cache, weight, bias, True, **kw)
    out = api.decode(x, cache, weight, bias, True, **kw)
    _close(out, want_out, sdt)
    assert torch.equal(cache.cpu(), want_cache)
    c2 = cache.clone()
    # the package's reference agrees (a second step on the updated cache)
    want2, want_c2 = decode_ref(x, c2, weight, bias, True, **kw)
    pkg_kw = {"query_start_loc": kw.get("qsl"), "block_idx_last_scheduled_token": kw.get("last"),
              "initial_state_idx": kw.get("init_idx"), "retrieve_parent_token": kw.get("parent")}  # fmt: skip
    got2 = causal_conv1d_update_spec_ref(
        x, c2, weight, bias, "silu", kw["indices"], kw.get("num_accepted"), PAD_SLOT_ID, **pkg_kw
    )
    _close(got2, want2, sdt)
    assert torch.equal(c2.cpu(), want_c2)


@pytest.mark.parametrize("api", APIS, ids=str)
@pytest.mark.parametrize("st_layout", ["bds", "bsd"])
def test_decode_defaults(device, api: API, st_layout) -> None:
    """conv_state_indices None (line b of a cache with more lines than the batch), no bias, identity."""
    x = torch.randn(3, 8, 2, device=device)
    cache = _cache(5, 8, 4, st_layout, torch.float32, device)
    weight = torch.randn(8, 4, device=device)
    want_out, want_cache = decode_ref(x, cache, weight)
    out = api.decode(x, cache, weight)
    _close(out, want_out, torch.float32)
    assert torch.equal(cache.cpu(), want_cache)


@pytest.mark.parametrize("api", APIS, ids=str)
def test_spec_decode_equals_conv_of_accepted_history(device, api: API) -> None:
    """A prefill then speculative steps (num_accepted_tokens = 1 right after the prefill, then the
    accepted count of the step before): every output equals the whole-sequence conv of the accepted
    history followed by the step's tokens up to it."""
    dim, width, drafts = 5, 4, 3
    h = width - 1
    weight, bias = torch.randn(dim, width, device=device), torch.randn(dim, device=device)
    cache = torch.zeros(2, h - 1 + drafts + 1, dim, device=device).transpose(1, 2)  # vLLM: W - 1 + drafts
    prompt = torch.randn(dim, 7, device=device)
    api.prefill(prompt, weight, bias, cache, _i32([0, 7], device), _i32([1], device))
    history = prompt.cpu()
    accepted = 1
    rng = random.Random(3)
    for _ in range(5):
        step = torch.randn(1, dim, drafts + 1, device=device)
        out = api.decode(step, cache, weight, bias, True, _i32([1], device), _i32([accepted], device))
        for j in range(drafts + 1):
            seq = torch.cat([history, step[0, :, : j + 1].cpu()], 1)
            want = _full_conv(seq, weight, bias, True)[:, -1]
            torch.testing.assert_close(out[0, :, j].cpu().double(), want, rtol=1e-5, atol=1e-5)
        accepted = rng.randint(1, drafts + 1)
        history = torch.cat([history, step[0, :, :accepted].cpu()], 1)


@pytest.mark.parametrize("api", APIS, ids=str)
def test_tree_draft_equals_conv_of_path(device, api: API) -> None:
    """A tree draft: token j's output equals the conv of the history followed by the path root .. j."""
    dim, width = 4, 4
    weight = torch.randn(dim, width, device=device)
    cache = torch.randn(1, dim, width - 1 + 5, device=device)
    history = cache[0, :, : width - 1].cpu().clone()  # a = 1: the window is [0, W - 1)
    parent = [-1, 0, 0, 1, 3, 2]
    x = torch.randn(1, dim, 6, device=device)
    out = api.decode(x, cache, weight, None, False, _i32([0], device), _i32([1], device), parent=_i32([parent], device))
    for j in range(6):
        path, c = [], j
        while c > 0:
            path.append(c)
            c = parent[c]
        path = [0, *reversed(path)]
        seq = torch.cat([history, x[0, :, path].cpu()], 1)
        want = _full_conv(seq, weight, None, False)[:, -1]
        torch.testing.assert_close(out[0, :, j].cpu().double(), want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# random configurations


def _random_prefill(rng: random.Random, device: str):
    """A random valid prefill: width, dim, lengths, layouts, pad slots, initial states, and half the
    time prefix caching with random positions, block sizes and fewer boundary writes."""
    width, dim = rng.randint(2, 8), rng.randint(1, 9)
    batch = rng.randint(1, 5)
    lens = [rng.choice([0, 1, 2, rng.randint(1, 40)]) for _ in range(batch)]
    q = _qsl(lens)
    s = width - 1 + rng.randint(0, 3)
    apc = rng.random() < 0.5
    x = _x(dim, q[-1] + rng.randint(0, 3), rng.choice(["cf", "cl"]), torch.float32, device)
    weight, bias = torch.randn(dim, width, device=device), rng.choice([None, torch.randn(dim, device=device)])
    hi = [rng.random() < 0.5 for _ in range(batch)]
    kw = {}
    if apc:
        block = rng.choice([1, 2, 4, 8])
        cols = 12
        lines = list(range(batch * cols))
        rng.shuffle(lines)
        table, first, last, init, done = [], [], [], [], []
        for i, n in enumerate(lens):
            p0 = rng.randint(0, 3 * block)
            row = lines[i * cols : (i + 1) * cols]
            hi_blk = max(p0 + n - 1, p0) // block  # the block of the last token
            inside = (p0 + n - 1) // block - p0 // block if n > 0 else 0
            k = rng.randint(0, max(inside, 0))
            last_col = min(hi_blk, cols - 1)
            first.append(max(last_col - k, 0))
            last.append(last_col)
            init.append(rng.randrange(cols))
            done.append(p0)
            if rng.random() < 0.15:
                row[init[-1]] = PAD_SLOT_ID
            table.append(row)
        ci = _i32(table, device)
        kw = dict(first=_i32(first, device), last=_i32(last, device), init_idx=_i32(init, device),
                  computed=_i32(done, device), block=block)  # fmt: skip
        n_lines = batch * cols
    else:
        n_lines = batch + rng.randint(0, 3)
        perm = list(range(n_lines))
        rng.shuffle(perm)
        idx = perm[:batch]
        if rng.random() < 0.3:
            idx[rng.randrange(batch)] = PAD_SLOT_ID
        ci = _i32(idx, device) if rng.random() < 0.8 else None
    cache = _cache(n_lines, dim, s, rng.choice(["bds", "bsd"]), torch.float32, device)
    return x, weight, bias, cache, _i32(q, device), ci, torch.tensor(hi, device=device), kw


@pytest.mark.parametrize("seed", range(40))
def test_prefill_random(device, seed) -> None:
    rng = random.Random(seed)
    x, weight, bias, cache, q, ci, hi, kw = _random_prefill(rng, device)
    silu = rng.random() < 0.5
    want_out, want_cache = prefill_ref(x, weight, bias, cache, q, ci, hi, silu, PAD_SLOT_ID, *kw.values())
    out = APIS[seed % 2].prefill(x, weight, bias, cache, q, ci, hi, silu, PAD_SLOT_ID, *kw.values(), validate=True)
    _close(out, want_out, torch.float32)
    assert torch.equal(cache.cpu(), want_cache)


@pytest.mark.parametrize("seed", range(40))
def test_decode_random(device, seed) -> None:
    rng = random.Random(seed)
    form = rng.choice(["token", "3d", "ragged"])
    mode = rng.choice(["plain", "spec", "tree", "spec_tree"])
    width = rng.randint(2, 8)
    x, cache, weight, bias, kw = _decode_case(
        device, torch.float32, torch.float32, width, form, mode, rng.random() < 0.5, rng.choice(["bds", "bsd"]), seed
    )
    silu = rng.random() < 0.5
    want_out, want_cache = decode_ref(x, cache, weight, bias, silu, **kw)
    out = API("native").decode(x, cache, weight, bias, silu, **kw, validate=True)
    _close(out, want_out, torch.float32)
    assert torch.equal(cache.cpu(), want_cache)


# ---------------------------------------------------------------------------------------------
# chains on one cache


@pytest.mark.parametrize("api", APIS, ids=str)
@pytest.mark.parametrize("sdt", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("width", [3, 4])
def test_chain_prefill_spec_decode_prefix_prefill(device, api: API, sdt, width) -> None:
    """prefill -> speculative update (num_accepted_tokens = 1 right after the prefill) -> plain decode
    -> prefill with prefix caching, on one cache with state_len > width - 1, against the reference
    step by step (the cache carried through both)."""
    dim, h, block = 9, width - 1, 4
    s = h - 1 + 4  # room for a 4-token speculative step
    lines = 12
    cache = _cache(lines, dim, s, "bsd", sdt, device)
    ref_cache = cache.detach().cpu().clone()
    weight, bias = torch.randn(dim, width, device=device), torch.randn(dim, device=device)
    # 1. prefill of three requests into lines 4, 7, 1
    q = _i32([0, 6, 7, 17], device)
    x = _x(dim, 17, "cl", torch.float32, device)
    ci, hi = _i32([4, 7, 1], device), torch.tensor([False, True, False], device=device)
    want, ref_cache = prefill_ref(x, weight, bias, ref_cache, q, ci, hi)
    _close(api.prefill(x, weight, bias, cache, q, ci, hi), want, sdt)
    assert torch.equal(cache.cpu(), ref_cache)
    # 2. speculative step, 4 tokens each, right after the prefill: num_accepted_tokens = 1
    xs = torch.randn(3, dim, 4, device=device)
    nacc = _i32([1, 1, 1], device)
    want, ref_cache = decode_ref(xs, ref_cache, weight, bias, True, ci, nacc)
    _close(api.decode(xs, cache, weight, bias, True, ci, nacc), want, sdt)
    assert torch.equal(cache.cpu(), ref_cache)
    # 3. plain one-token decode
    xd = torch.randn(3, dim, device=device)
    want, ref_cache = decode_ref(xd, ref_cache, weight, bias, True, ci)
    _close(api.decode(xd, cache, weight, bias, True, ci), want, sdt)
    assert torch.equal(cache.cpu(), ref_cache)
    # 4. prefill with prefix caching: request 0 continues from line 4 (its block 0) at p0 = 11,
    #    writing blocks 2.. into lines 0, 2, 3; request 1 starts fresh into lines 5, 6
    q = _i32([0, 9, 14], device)
    x = _x(dim, 14, "cf", torch.float32, device)
    table = _i32([[4, 8, 0, 2, 3], [5, 6, 9, 10, 11]], device)
    first, last = _i32([11 // block, 0], device), _i32([19 // block, 4 // block], device)
    init, done = _i32([0, 0], device), _i32([11, 0], device)
    hi = torch.tensor([True, False], device=device)
    want, ref_cache = prefill_ref(
        x, weight, bias, ref_cache, q, table, hi, True, PAD_SLOT_ID, first, last, init, done, block
    )
    got = api.prefill(x, weight, bias, cache, q, table, hi, True, PAD_SLOT_ID, first, last, init, done, block)
    _close(got, want, sdt)
    assert torch.equal(cache.cpu(), ref_cache)


# ---------------------------------------------------------------------------------------------
# the vLLM layer's own arguments


def test_vllm_activation_forms(device) -> None:
    """activation True / "silu" / "swish" = SiLU; False / None = identity (vLLM's forms)."""
    x = torch.randn(6, 9, device=device)
    weight = torch.randn(6, 3, device=device)
    q = _i32([0, 9], device)
    outs = {}
    for act in (True, "silu", "swish", False, None):
        cache = torch.zeros(1, 6, 2, device=device)
        outs[act] = cc_vllm.causal_conv1d_fn(x, weight, None, cache, q, activation=act)
    assert torch.equal(outs[True], outs["silu"]) and torch.equal(outs["silu"], outs["swish"])
    assert torch.equal(outs[False], outs[None]) and not torch.equal(outs[True], outs[None])
    xd = torch.randn(1, 6, device=device)
    d = [
        cc_vllm.causal_conv1d_update(xd, torch.zeros(1, 6, 2, device=device), weight, activation=a)
        for a in (True, "silu", False)
    ]
    assert torch.equal(d[0], d[1]) and not torch.equal(d[0], d[2])


@pytest.mark.parametrize("bad", ["relu", "gelu", 1])
def test_vllm_unknown_activation_raises(bad) -> None:
    """vLLM's prefill would run an unknown string as no activation: the layer refuses it."""
    with pytest.raises(ValueError, match="Invalid activation"):
        cc_vllm.causal_conv1d_fn(
            torch.randn(4, 3), torch.randn(4, 3), None, torch.zeros(1, 4, 2), _i32([0, 3], "cpu"), activation=bad
        )
    with pytest.raises(ValueError, match="Invalid activation"):
        cc_vllm.causal_conv1d_update(torch.randn(1, 4), torch.zeros(1, 4, 2), torch.randn(4, 3), activation=bad)


def test_vllm_metadata_ignored_and_pad_none(device) -> None:
    """metadata (vLLM's host-built launch plan) changes nothing; pad_slot_id=None skips nothing."""
    x = torch.randn(4, 7, device=device)
    weight = torch.randn(4, 3, device=device)
    q, ci = _i32([0, 3, 7], device), _i32([1, 0], device)
    c1, c2, c3 = (torch.randn(2, 4, 2, device=device) for _ in range(3))
    c2.copy_(c1)
    c3.copy_(c1)
    a = cc_vllm.causal_conv1d_fn(x, weight, None, c1, q, ci)
    b = cc_vllm.causal_conv1d_fn(x, weight, None, c2, q, ci, metadata=object())
    c = cc_vllm.causal_conv1d_fn(x, weight, None, c3, q, ci, pad_slot_id=None)
    assert torch.equal(a, b) and torch.equal(a, c) and torch.equal(c1, c2) and torch.equal(c1, c3)


def test_vllm_casts_any_x_dtype() -> None:
    """x of a dtype the ops do not take (float64 off the CPU, or an integer) is cast to the cache's
    dtype like vLLM; here an int x on the CPU, and the result comes back in x's dtype."""
    x = torch.randint(-3, 4, (4, 6), dtype=torch.int32)
    weight = torch.randn(4, 3)
    cache = torch.zeros(1, 4, 2)
    out = cc_vllm.causal_conv1d_fn(x, weight, None, cache, _i32([0, 6], "cpu"), activation=None)
    want, want_cache = prefill_ref(x.float(), weight, None, torch.zeros(1, 4, 2), _i32([0, 6], "cpu"), silu=False)
    assert out.dtype == torch.int32
    assert torch.equal(out, want.to(torch.int32))
    assert torch.equal(cache, want_cache)


def test_vllm_query_start_loc_cut_to_batch(device) -> None:
    """As in vLLM, a ragged update's batch is len(conv_state_indices); a longer query_start_loc is cut."""
    x = torch.randn(6, 4, device=device)
    cache = torch.randn(3, 4, 5, device=device)
    c2 = cache.clone()
    weight = torch.randn(4, 3, device=device)
    q_long, idx = _i32([0, 2, 5, 6, 6], device), _i32([2, 0], device)
    nacc = _i32([1, 2], device)
    a = cc_vllm.causal_conv1d_update(x, cache, weight, None, True, idx, nacc, q_long, 3)
    b = causal_conv1d_update_spec(x, c2, weight, None, "silu", idx, nacc, query_start_loc=q_long[:3], max_query_len=3)
    assert torch.equal(a, b) and torch.equal(cache, c2)
    assert torch.all(a[5:] == 0)  # token 5 belongs to no request of the batch


# ---------------------------------------------------------------------------------------------
# torch.library: opcheck and torch.compile


def _apc_prefill_args(device):
    dim, width, block = 8, 4, 4
    x = _x(dim, 21, "cl", torch.float32, device)
    table = _i32([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]], device)
    return (
        x, torch.randn(dim, width, device=device), torch.randn(dim, device=device),
        _cache(12, dim, 5, "bsd", torch.float32, device), _i32([0, 9, 12, 21, 21][:4], device), table,
        torch.tensor([True, False, True], device=device), True, PAD_SLOT_ID,
        _i32([1, 0, 0], device), _i32([3, 0, 2], device), _i32([0, 0, 0], device), _i32([5, 0, 1], device), block,
    )  # fmt: skip


@pytest.mark.parametrize("x_layout", ["cf", "cl"])
def test_opcheck_varlen(device, x_layout) -> None:
    x, weight, bias, cache, q, ci, hi = _prefill_case(device, torch.float32, torch.float32, 4, x_layout, "bsd", 1)
    op = torch.ops.causal_conv1d.varlen_fwd.default
    torch.library.opcheck(op, (x, weight, bias, cache, q, ci, hi, True, PAD_SLOT_ID, None, None, None, None, 0))
    torch.library.opcheck(op, (x, weight, None, cache, q, None, None, False, -1, None, None, None, None, 8))
    torch.library.opcheck(op, _apc_prefill_args(device))
    torch.library.opcheck(  # mixed dtype: out in x's dtype
        op, (x.half(), weight, bias, cache, q, ci, hi, True, PAD_SLOT_ID, None, None, None, None, 0)
    )


@pytest.mark.parametrize("form", ["token", "3d", "ragged"])
@pytest.mark.parametrize("mode", ["plain", "spec_tree"])
@pytest.mark.parametrize("apc", [False, True], ids=["lines", "apc"])
def test_opcheck_spec_update(device, form, mode, apc) -> None:
    x, cache, weight, bias, kw = _decode_case(device, torch.float32, torch.float32, 4, form, mode, apc, "bsd")
    args = (
        x, cache, weight, bias, True, kw["indices"], kw.get("num_accepted"), PAD_SLOT_ID, kw.get("qsl"),
        kw.get("max_query_len", -1), kw.get("last"), kw.get("init_idx"), kw.get("parent"),
    )  # fmt: skip
    torch.library.opcheck(torch.ops.causal_conv1d.spec_update.default, args)


def test_compile_fullgraph(device) -> None:
    """Both ops, every new argument, in one torch.compile(fullgraph=True) graph; same results and caches."""
    pre = _apc_prefill_args(device)
    xd, cd, weight, bias, kw = _decode_case(device, torch.float32, torch.float32, 4, "ragged", "spec_tree", True, "bsd")

    def f(x, w, b, cache, q, ci, hi, fi, la, ii, nc, xd, cd, wd, idx, nacc, qd, last, init, parent):
        out = causal_conv1d_varlen_fn(
            x, w, b, cache, q, ci, hi, block_idx_first_scheduled_token=fi, block_idx_last_scheduled_token=la,
            initial_state_idx=ii, num_computed_tokens=nc, block_size_to_align=4,
        )  # fmt: skip
        y = cc_vllm.causal_conv1d_update(xd, cd, wd, None, True, idx, nacc, qd, 4, PAD_SLOT_ID, last, init, parent)
        return out * 2, y + 1

    x, w, b, cache, q, ci, hi, _, _, fi, la, ii, nc, _ = pre
    idx, nacc, qd = kw["indices"][:5], kw["num_accepted"][:5], kw["qsl"]
    last, init, parent = kw["last"][:5], kw["init_idx"][:5], kw["parent"][:5]
    c_eager, cd_eager = cache.clone(), cd.clone()
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    got = compiled(x, w, b, cache, q, ci, hi, fi, la, ii, nc, xd, cd, weight, idx, nacc, qd, last, init, parent)
    want = f(x, w, b, c_eager, q, ci, hi, fi, la, ii, nc, xd, cd_eager, weight, idx, nacc, qd, last, init, parent)
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e, rtol=0, atol=0)
    assert torch.equal(cache, c_eager) and torch.equal(cd, cd_eager)


# ---------------------------------------------------------------------------------------------
# CUDA only: values not looked at on the host, CUDA-graph capture


@pytest.mark.gpu
def test_cuda_values_are_not_trusted_but_safe() -> None:
    """On CUDA the kernels do not read index values on the host: a line outside the cache is skipped
    like pad_slot_id (output 0, nothing written), num_accepted_tokens is clamped into [1, S - W + 2]."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    dev = "cuda"
    x = torch.randn(4, 8, device=dev)
    weight = torch.randn(4, 3, device=dev)
    cache = torch.randn(2, 4, 2, device=dev)
    before = cache.clone()
    out = causal_conv1d_varlen_fn(x, weight, None, cache, _i32([0, 4, 8], dev), _i32([0, 99], dev))
    assert torch.all(out[:, 4:] == 0) and torch.equal(cache[1:], before[1:])
    xs = torch.randn(2, 4, 3, device=dev)
    st = torch.randn(2, 4, 5, device=dev)  # S - W + 2 = 4
    st2 = st.clone()
    a = causal_conv1d_update_spec(xs, st, weight, num_accepted_tokens=_i32([9, 0], dev))
    b = causal_conv1d_update_spec(xs, st2, weight, num_accepted_tokens=_i32([4, 1], dev))
    assert torch.equal(a, b) and torch.equal(st, st2)


@pytest.mark.gpu
def test_cuda_graph_capture_and_replay() -> None:
    """Both ops, with prefix caching and a ragged speculative update, capture into one CUDA graph
    (no host sync, no host metadata) and replay correctly on new inputs."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    dev = "cuda"
    pre = list(_apc_prefill_args(dev))
    xd, cd, weight, bias, kw = _decode_case(dev, torch.bfloat16, torch.bfloat16, 4, "ragged", "spec", False, "bsd")

    def step():
        return (
            torch.ops.causal_conv1d.varlen_fwd.default(*pre),
            causal_conv1d_update_spec(
                xd, cd, weight, bias, "silu", kw["indices"], kw["num_accepted"], query_start_loc=kw["qsl"],
                max_query_len=kw["max_query_len"],
            ),
        )  # fmt: skip

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        outs = step()
    for _ in range(2):
        pre[0].copy_(torch.randn_like(pre[0]))
        xd.copy_(torch.randn_like(xd))
        want_v, want_c = prefill_ref(*pre[:8], pre[8], *pre[9:])
        want_s, want_cd = decode_ref(xd, cd, weight, bias, True, kw["indices"], kw["num_accepted"], qsl=kw["qsl"])
        g.replay()
        torch.cuda.synchronize()
        _close(outs[0], want_v, torch.float32)
        assert torch.equal(pre[3].cpu(), want_c)
        _close(outs[1], want_s, torch.bfloat16)
        assert torch.equal(cd.cpu(), want_cd)
