"""Bad input to the serving ops (docs/serving.md): every host check of csrc/varlen_checks.h (shape,
dtype, missing or unexpected argument; TypeError / ValueError naming the argument), and every index
value check, raised the same by the CPU kernels and by validate=True (native API and the vLLM
drop-in's validate_data=True), before anything is written to the cache.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch

from causal_conv1d import vllm as cc_vllm
from causal_conv1d.varlen import PAD_SLOT_ID, causal_conv1d_update_spec, causal_conv1d_varlen_fn

I32 = torch.int32


def _i32(v) -> torch.Tensor:
    return torch.tensor(v, dtype=I32)


def _prefill(apc: bool = False) -> dict[str, Any]:
    """A valid prefill: two requests of 4 and 6 tokens; with prefix caching (block 4), request 1
    starts at position 2 and crosses one boundary (position 4)."""
    torch.manual_seed(0)
    kw: dict[str, Any] = dict(
        x=torch.randn(4, 10),
        weight=torch.randn(4, 3),
        bias=torch.randn(4),
        conv_states=torch.randn(8, 4, 3),
        query_start_loc=_i32([0, 4, 10]),
        cache_indices=_i32([1, 3]),
        has_initial_state=torch.tensor([True, False]),
    )
    if apc:
        kw.update(
            cache_indices=_i32([[0, 1, 2], [3, 4, 5]]),
            block_idx_first_scheduled_token=_i32([0, 0]),
            block_idx_last_scheduled_token=_i32([0, 1]),
            initial_state_idx=_i32([0, 0]),
            num_computed_tokens=_i32([0, 2]),
            block_size_to_align=4,
        )
    return kw


def _decode(form: str = "3d", spec: bool = True, apc: bool = False, tree: bool = False) -> dict[str, Any]:
    """A valid decode: 3 requests of 3 tokens ("3d"), or ragged 2, 3, 1 tokens; width 3, state_len 5."""
    torch.manual_seed(0)
    if form == "3d":
        x = torch.randn(3, 4, 3)
    else:
        x = torch.randn(6, 4)
    kw: dict[str, Any] = dict(x=x, conv_state=torch.randn(6, 4, 5), weight=torch.randn(4, 3), bias=None)
    kw["conv_state_indices"] = _i32([[0, 1], [2, 3], [4, 5]]) if apc else _i32([5, 0, 2])
    if apc:
        kw.update(block_idx_last_scheduled_token=_i32([1, 1, 0]), initial_state_idx=_i32([0, 0, 0]))
    if spec:
        kw["num_accepted_tokens"] = _i32([1, 2, 3])
    if form == "ragged":
        kw.update(query_start_loc=_i32([0, 2, 5, 6]), max_query_len=3)
    if tree:
        kw["retrieve_parent_token"] = _i32([[-1, 0, 0], [-1, 0, 1], [-1, 0, 0]])
    return kw


def _run_prefill(kw: dict[str, Any], validate: bool = False) -> torch.Tensor:
    kw = dict(kw)
    pos = [kw.pop(k) for k in ("x", "weight", "bias", "conv_states", "query_start_loc")]
    return causal_conv1d_varlen_fn(*pos, **kw, validate=validate)


def _run_decode(kw: dict[str, Any], validate: bool = False) -> torch.Tensor:
    kw = dict(kw)
    pos = [kw.pop(k) for k in ("x", "conv_state", "weight")]
    return causal_conv1d_update_spec(*pos, **kw, validate=validate)


def _set(**changes: Any) -> Callable[[dict], None]:
    def f(kw: dict) -> None:
        kw.update(changes)

    return f


def _drop(name: str) -> Callable[[dict], None]:
    def f(kw: dict) -> None:
        kw.pop(name)

    return f


def _tweak(name: str, fn: Callable[[Any], Any]) -> Callable[[dict], None]:
    def f(kw: dict) -> None:
        kw[name] = fn(kw[name])

    return f


def test_the_valid_cases_run() -> None:
    """The bases of the error cases below are valid (so each case fails for its one change)."""
    _run_prefill(_prefill())
    _run_prefill(_prefill(apc=True), validate=True)
    for form in ("3d", "ragged"):
        for apc in (False, True):
            _run_decode(_decode(form, apc=apc, tree=True), validate=True)
            _run_decode(_decode(form, spec=False, apc=apc))


# ---------------------------------------------------------------------------------------------
# host checks (shapes, dtypes, arguments): the same on every device

PREFILL_HOST = [
    # x 3-D (a (batch, dim, seqlen) x is not the packed layout)
    (False, _tweak("x", lambda t: t[None]), ValueError, r"x must be 2-D \(dim, total_tokens\)"),
    # x an integer tensor
    (False, _tweak("x", lambda t: t.to(I32)), TypeError, r"x must be float32, float16 or bfloat16"),
    # x in neither layout: every other token of a wider tensor
    (False, _set(x=torch.randn(4, 20)[:, ::2]), ValueError, r"x must be channel-first .* or channel-last"),
    # weight 1-D
    (False, _set(weight=torch.randn(3)), ValueError, r"weight must be 2-D \(dim, width\)"),
    # weight's dim differs from x's
    (
        False,
        _set(weight=torch.randn(5, 3)),
        ValueError,
        r"weight must have shape \(dim, width\) with dim = x.shape\[0\]",
    ),
    # width 1 and 9: outside 2..8
    (False, _set(weight=torch.randn(4, 1)), ValueError, r"width \(weight.shape\[1\]\) between 2 and 8, got 1"),
    (False, _set(weight=torch.randn(4, 9), conv_states=torch.randn(8, 4, 8)), ValueError, r"between 2 and 8, got 9"),
    # bias of another dtype than weight
    (False, _set(bias=torch.randn(4).double()), TypeError, r"bias must have weight's dtype"),
    # bias of the wrong length
    (False, _set(bias=torch.randn(5)), ValueError, r"bias must have shape \(dim,\)"),
    # conv_states 2-D
    (
        False,
        _set(conv_states=torch.randn(8, 4)),
        ValueError,
        r"conv_states must be 3-D \(num_cache_lines, dim, state_len\)",
    ),
    # conv_states of another dim
    (False, _set(conv_states=torch.randn(8, 5, 3)), ValueError, r"conv_states must have dim = 4 in its second axis"),
    # conv_states shorter than the window (width - 1)
    (
        False,
        _set(conv_states=torch.randn(8, 4, 1)),
        ValueError,
        r"conv_states is too short: state_len .* >= width - 1 = 2",
    ),
    # conv_states an integer tensor
    (
        False,
        _set(conv_states=torch.zeros(8, 4, 3, dtype=I32)),
        TypeError,
        r"conv_states must be float32, float16 or bfloat16",
    ),
    # query_start_loc int64
    (
        False,
        _tweak("query_start_loc", lambda t: t.long()),
        TypeError,
        r"query_start_loc must be int32 .*to\(torch.int32\)",
    ),
    # query_start_loc 2-D
    (False, _tweak("query_start_loc", lambda t: t[None]), ValueError, r"query_start_loc must be 1-D \(batch \+ 1,\)"),
    # cache_indices int64
    (False, _tweak("cache_indices", lambda t: t.long()), TypeError, r"cache_indices must be int32"),
    # cache_indices shorter than the batch
    (False, _set(cache_indices=_i32([1])), ValueError, r"cache_indices must be 1-D with at least batch = 2 entries"),
    # a 2-D cache_indices without prefix caching
    (False, _set(cache_indices=_i32([[1], [3]])), ValueError, r"a 2-D table is for prefix caching"),
    # no cache_indices and fewer lines than requests
    (
        False,
        _set(cache_indices=None, conv_states=torch.randn(1, 4, 3)),
        ValueError,
        r"conv_states must have at least batch = 2 cache lines",
    ),
    # has_initial_state float
    (False, _set(has_initial_state=torch.ones(2)), TypeError, r"has_initial_state must be bool \(or int32"),
    # has_initial_state shorter than the batch
    (
        False,
        _set(has_initial_state=torch.tensor([True])),
        ValueError,
        r"has_initial_state must be 1-D with at least batch = 2",
    ),
    # a prefix-caching tensor without block_idx_last_scheduled_token (the switch)
    (
        False,
        _set(initial_state_idx=_i32([0, 0])),
        ValueError,
        r"initial_state_idx is given but block_idx_last_scheduled_token is None",
    ),
    (
        False,
        _set(num_computed_tokens=_i32([0, 0])),
        ValueError,
        r"num_computed_tokens is given but block_idx_last_scheduled_token",
    ),
    (
        False,
        _set(block_idx_first_scheduled_token=_i32([0, 0])),
        ValueError,
        r"block_idx_first_scheduled_token is given but",
    ),
    # a negative block_size_to_align
    (False, _set(block_size_to_align=-8), ValueError, r"block_size_to_align must be >= 0"),
    # prefix caching: a 1-D cache_indices
    (True, _set(cache_indices=_i32([1, 3])), ValueError, r"cache_indices must be 2-D \(batch, max_blocks\)"),
    # prefix caching: no cache_indices
    (True, _set(cache_indices=None), ValueError, r"cache_indices is required with block_idx_last_scheduled_token"),
    # prefix caching: each of the other tensors missing
    (
        True,
        _drop("block_idx_first_scheduled_token"),
        ValueError,
        r"block_idx_first_scheduled_token is required with block_idx_last",
    ),
    (
        True,
        _drop("initial_state_idx"),
        ValueError,
        r"initial_state_idx is required with block_idx_last_scheduled_token",
    ),
    (
        True,
        _drop("num_computed_tokens"),
        ValueError,
        r"num_computed_tokens is required with block_idx_last_scheduled_token",
    ),
    # prefix caching: block_size_to_align 0 (vLLM's default, meaningless with prefix caching)
    (
        True,
        _set(block_size_to_align=0),
        ValueError,
        r"block_size_to_align must be >= 1 .* when block_idx_last_scheduled_token",
    ),
    # prefix caching: an int64 index tensor, a short one
    (True, _tweak("num_computed_tokens", lambda t: t.long()), TypeError, r"num_computed_tokens must be int32"),
    (
        True,
        _set(block_idx_last_scheduled_token=_i32([0])),
        ValueError,
        r"block_idx_last_scheduled_token must be 1-D with at least batch = 2",
    ),
]


@pytest.mark.parametrize("apc, change, exc, match", PREFILL_HOST)
def test_prefill_host_errors(apc, change, exc, match) -> None:
    kw = _prefill(apc)
    change(kw)
    with pytest.raises(exc, match=match):
        _run_prefill(kw)


DECODE_HOST = [
    # x 4-D; x 1-D
    ({}, _tweak("x", lambda t: t[None]), ValueError, r"x must be \(batch, dim\) or \(batch, dim, seqlen\)"),
    ({}, _set(x=torch.randn(4)), ValueError, r"x must be \(batch, dim\) or \(batch, dim, seqlen\)"),
    # x an integer tensor
    ({}, _tweak("x", lambda t: t.to(I32)), TypeError, r"x must be float32, float16 or bfloat16"),
    # ragged: x 3-D
    (
        {"form": "ragged"},
        _set(x=torch.randn(3, 4, 2)),
        ValueError,
        r"x must be 2-D \(num_tokens, dim\) when query_start_loc",
    ),
    # weight's dim differs from x.shape[1]
    (
        {},
        _set(weight=torch.randn(5, 3)),
        ValueError,
        r"weight must have shape \(dim, width\) with dim = x.shape\[1\] = 4",
    ),
    # conv_state too short for the speculative window: width - 2 + seqlen = 4
    ({}, _set(conv_state=torch.randn(6, 4, 3)), ValueError, r"conv_state is too short: .* width - 2 \+ seqlen .* = 4"),
    # ragged: the same bound with max_query_len
    (
        {"form": "ragged"},
        _set(max_query_len=5),
        ValueError,
        r"width - 2 \+ max_query_len \(num_accepted_tokens given\) = 6",
    ),
    # plain: conv_state shorter than width - 1
    ({"spec": False}, _set(conv_state=torch.randn(6, 4, 1)), ValueError, r"conv_state is too short: .* width - 1 = 2"),
    # conv_state of another dim; an integer conv_state
    ({}, _set(conv_state=torch.randn(6, 5, 5)), ValueError, r"conv_state must have dim = 4 in its second axis"),
    (
        {},
        _set(conv_state=torch.zeros(6, 4, 5, dtype=I32)),
        TypeError,
        r"conv_state must be float32, float16 or bfloat16",
    ),
    # ragged without conv_state_indices (vLLM needs them too)
    (
        {"form": "ragged"},
        _set(conv_state_indices=None),
        ValueError,
        r"conv_state_indices is required when query_start_loc",
    ),
    # ragged speculative step without max_query_len
    ({"form": "ragged"}, _set(max_query_len=-1), ValueError, r"max_query_len must be >= 1 .* with num_accepted_tokens"),
    # ragged tree draft without max_query_len
    (
        {"form": "ragged", "spec": False, "tree": True},
        _set(max_query_len=-1),
        ValueError,
        r"max_query_len must be >= 1 .* with retrieve_parent_token",
    ),
    # ragged: max_query_len neither >= 1 nor -1
    (
        {"form": "ragged", "spec": False},
        _set(max_query_len=-3),
        ValueError,
        r"max_query_len must be >= 1, or -1 \(not given\), got -3",
    ),
    # without query_start_loc: a max_query_len that is not x's seqlen
    (
        {},
        _set(max_query_len=7),
        ValueError,
        r"max_query_len is read only with query_start_loc: pass -1 \(or x's seqlen = 3\)",
    ),
    # query_start_loc int64
    ({"form": "ragged"}, _tweak("query_start_loc", lambda t: t.long()), TypeError, r"query_start_loc must be int32"),
    # conv_state_indices shorter than the batch; int64
    ({}, _set(conv_state_indices=_i32([0, 1])), ValueError, r"conv_state_indices must be 1-D with at least batch = 3"),
    ({}, _tweak("conv_state_indices", lambda t: t.long()), TypeError, r"conv_state_indices must be int32"),
    # no conv_state_indices and fewer lines than the batch
    (
        {},
        _set(conv_state_indices=None, conv_state=torch.randn(2, 4, 5)),
        ValueError,
        r"conv_state must have at least batch = x.shape\[0\] = 3 cache lines",
    ),
    # a 2-D conv_state_indices without prefix caching
    ({}, _set(conv_state_indices=_i32([[5], [0], [2]])), ValueError, r"a 2-D table is for prefix caching"),
    # prefix caching: a 1-D table; no table; no initial_state_idx
    (
        {"apc": True},
        _set(conv_state_indices=_i32([0, 1, 2])),
        ValueError,
        r"conv_state_indices must be 2-D \(batch, max_blocks\)",
    ),
    (
        {"apc": True},
        _set(conv_state_indices=None),
        ValueError,
        r"conv_state_indices is required with block_idx_last_scheduled_token",
    ),
    (
        {"apc": True},
        _drop("initial_state_idx"),
        ValueError,
        r"initial_state_idx is required with block_idx_last_scheduled_token",
    ),
    # initial_state_idx without block_idx_last_scheduled_token
    (
        {},
        _set(initial_state_idx=_i32([0, 0, 0])),
        ValueError,
        r"initial_state_idx is given but block_idx_last_scheduled_token is None",
    ),
    # num_accepted_tokens int64; shorter than the batch
    ({}, _tweak("num_accepted_tokens", lambda t: t.long()), TypeError, r"num_accepted_tokens must be int32"),
    ({}, _set(num_accepted_tokens=_i32([1])), ValueError, r"num_accepted_tokens must be 1-D with at least batch = 3"),
    # retrieve_parent_token int64; fewer columns than seqlen; 1-D
    (
        {"tree": True},
        _tweak("retrieve_parent_token", lambda t: t.long()),
        TypeError,
        r"retrieve_parent_token must be int32",
    ),
    (
        {"tree": True},
        _tweak("retrieve_parent_token", lambda t: t[:, :2]),
        ValueError,
        r"retrieve_parent_token must be 2-D \(batch, seqlen\) .* seqlen = 3 columns",
    ),
    ({"tree": True}, _set(retrieve_parent_token=_i32([0, 0, 0])), ValueError, r"retrieve_parent_token must be 2-D"),
]


@pytest.mark.parametrize("base, change, exc, match", DECODE_HOST)
def test_decode_host_errors(base, change, exc, match) -> None:
    kw = _decode(**base)
    change(kw)
    with pytest.raises(exc, match=match):
        _run_decode(kw)


def test_invalid_activation() -> None:
    with pytest.raises(ValueError, match="Invalid activation"):
        causal_conv1d_varlen_fn(**{**_prefill(), "activation": "relu"})
    with pytest.raises(ValueError, match="Invalid activation"):
        causal_conv1d_update_spec(torch.randn(1, 4), torch.zeros(1, 4, 2), torch.randn(4, 3), activation="gelu")


def _bad(setup: Any, *, match: str, **index_values: Any) -> tuple[Any, Callable[[dict], None], str]:
    """A case of PREFILL_VALUES / DECODE_VALUES: the valid call's setup, the change that sets the named
    index tensors to these (int32) values, and the error it must raise."""
    return setup, _set(**{name: _i32(v) for name, v in index_values.items()}), match


# ---------------------------------------------------------------------------------------------
# index values: the CPU kernel, validate=True and the vLLM layer's validate_data=True

PREFILL_VALUES = [
    # query_start_loc starting below 0
    _bad(False, query_start_loc=[-1, 4, 10], match=r"query_start_loc\[0\] must be >= 0, got -1"),
    # query_start_loc decreasing
    _bad(
        False,
        query_start_loc=[0, 6, 4],
        match=r"query_start_loc must be non-decreasing, got query_start_loc\[1\] = 6 > query_start_loc\[2\] = 4",
    ),
    # query_start_loc past the end of x
    _bad(
        False,
        query_start_loc=[0, 4, 11],
        match=r"query_start_loc\[2\] = 11 must be <= total_tokens \(x.shape\[1\]\) = 10",
    ),
    # a cache line past the cache, and a negative one that is not pad_slot_id
    _bad(
        False, cache_indices=[1, 8], match=r"cache_indices\[1\] = 8 is out of range for conv_states with 8 cache lines"
    ),
    _bad(False, cache_indices=[-2, 3], match=r"cache_indices\[0\] = -2 is out of range .* pad_slot_id = -1"),
    # prefix caching: a column past the table (initial_state_idx, block_idx_last/first_scheduled_token)
    _bad(
        True,
        initial_state_idx=[0, 3],
        match=r"initial_state_idx\[1\] = 3 is out of range: it indexes a column of cache_indices, which has max_blocks = 3",
    ),
    _bad(
        True, block_idx_last_scheduled_token=[-1, 1], match=r"block_idx_last_scheduled_token\[0\] = -1 is out of range"
    ),
    _bad(
        True, block_idx_first_scheduled_token=[0, 5], match=r"block_idx_first_scheduled_token\[1\] = 5 is out of range"
    ),
    # prefix caching: first > last
    _bad(
        True,
        block_idx_first_scheduled_token=[1, 0],
        match=r"block_idx_first_scheduled_token\[0\] = 1 must be <= block_idx_last_scheduled_token\[0\] = 0",
    ),
    # prefix caching: a negative num_computed_tokens
    _bad(True, num_computed_tokens=[-4, 2], match=r"num_computed_tokens\[0\] = -4 must be >= 0"),
    # prefix caching: a line of the table out of range (request 0's input; request 1's output; request 1's
    # boundary block, its input line too)
    _bad(
        True, cache_indices=[[9, 1, 2], [3, 4, 5]], match=r"cache_indices\[0, 0\] = 9 is out of range for conv_states"
    ),
    _bad(True, cache_indices=[[0, 1, 2], [3, 40, 5]], match=r"cache_indices\[1, 1\] = 40 is out of range"),
    _bad(True, cache_indices=[[0, 1, 2], [-7, 4, 5]], match=r"cache_indices\[1, 0\] = -7 is out of range"),
    # prefix caching: more boundary states than boundaries the chunk crosses
    _bad(
        True,
        block_idx_last_scheduled_token=[0, 2],
        match=r"= 2 block-boundary states to write, but request 1 .* crosses only 1 boundaries of block_size_to_align = 4",
    ),
]


def _prefill_runners():
    def kernel(kw):  # the CPU kernel's own checks
        return _run_prefill(kw)

    def validate(kw):  # the host checks of validate=True, before the op
        return _run_prefill(kw, validate=True)

    def vllm_validate(kw):  # the vLLM layer's validate_data=True
        kw = dict(kw)
        pos = [kw.pop(k) for k in ("x", "weight", "bias", "conv_states", "query_start_loc")]
        return cc_vllm.causal_conv1d_fn(*pos, **kw, validate_data=True)

    return [kernel, validate, vllm_validate]


@pytest.mark.parametrize("runner", _prefill_runners(), ids=["kernel", "validate", "vllm_validate"])
@pytest.mark.parametrize("apc, change, match", PREFILL_VALUES)
def test_prefill_value_errors(runner, apc, change, match) -> None:
    kw = _prefill(apc)
    change(kw)
    before = kw["conv_states"].clone()
    with pytest.raises(ValueError, match=match):
        runner(kw)
    assert torch.equal(kw["conv_states"], before)  # checked before anything is written


DECODE_VALUES = [
    # a cache line past the cache; a negative one that is not pad_slot_id
    _bad(
        {},
        conv_state_indices=[5, 6, 2],
        match=r"conv_state_indices\[1\] = 6 is out of range for conv_state with 6 cache lines",
    ),
    _bad({}, conv_state_indices=[5, 0, -3], match=r"conv_state_indices\[2\] = -3 is out of range"),
    # num_accepted_tokens 0 and past the line: a in [1, state_len - (width - 1) + 1 = 4]
    _bad(
        {},
        num_accepted_tokens=[0, 1, 1],
        match=r"num_accepted_tokens\[0\] = 0 must be between 1 and state_len - \(width - 1\) \+ 1 = 4",
    ),
    _bad({}, num_accepted_tokens=[1, 5, 1], match=r"num_accepted_tokens\[1\] = 5 must be between 1 and"),
    # ragged: query_start_loc decreasing, past x, a request longer than max_query_len
    _bad({"form": "ragged"}, query_start_loc=[0, 3, 2, 6], match=r"query_start_loc must be non-decreasing"),
    _bad(
        {"form": "ragged"},
        query_start_loc=[0, 2, 5, 7],
        match=r"query_start_loc\[3\] = 7 must be <= total_tokens \(x.shape\[0\]\) = 6",
    ),
    _bad(
        {"form": "ragged"},
        query_start_loc=[0, 4, 5, 6],
        match=r"request 0 has query_start_loc\[1\] - query_start_loc\[0\] = 4 tokens, more than max_query_len = 3",
    ),
    # tree: a parent that is not an earlier token (itself, later, negative)
    _bad(
        {"tree": True},
        retrieve_parent_token=[[-1, 0, 2], [-1, 0, 1], [-1, 0, 0]],
        match=r"retrieve_parent_token\[0, 2\] = 2 must be the index of an earlier token of the request: 0 <= value < 2",
    ),
    _bad(
        {"tree": True},
        retrieve_parent_token=[[-1, 0, 0], [-1, -1, 1], [-1, 0, 0]],
        match=r"retrieve_parent_token\[1, 1\] = -1 must be",
    ),
    _bad(
        {"tree": True, "form": "ragged"},
        retrieve_parent_token=[[-1, 0, 0], [-1, 0, 3], [-1, 0, 0]],
        match=r"retrieve_parent_token\[1, 2\] = 3 must be",
    ),
    # prefix caching: a column past the table; a line out of range
    _bad(
        {"apc": True},
        initial_state_idx=[0, 2, 0],
        match=r"initial_state_idx\[1\] = 2 is out of range: it indexes a column of conv_state_indices, which has max_blocks = 2",
    ),
    _bad(
        {"apc": True},
        block_idx_last_scheduled_token=[1, 1, -1],
        match=r"block_idx_last_scheduled_token\[2\] = -1 is out of range",
    ),
    _bad(
        {"apc": True},
        conv_state_indices=[[0, 1], [2, 30], [4, 5]],
        match=r"conv_state_indices\[1, 1\] = 30 is out of range for conv_state",
    ),
]


def _decode_runners():
    def kernel(kw):
        return _run_decode(kw)

    def validate(kw):
        return _run_decode(kw, validate=True)

    def vllm_validate(kw):
        kw = dict(kw)
        pos = [kw.pop(k) for k in ("x", "conv_state", "weight")]
        return cc_vllm.causal_conv1d_update(*pos, **kw, validate_data=True)

    return [kernel, validate, vllm_validate]


@pytest.mark.parametrize("runner", _decode_runners(), ids=["kernel", "validate", "vllm_validate"])
@pytest.mark.parametrize("base, change, match", DECODE_VALUES)
def test_decode_value_errors(runner, base, change, match) -> None:
    kw = _decode(**base)
    change(kw)
    before = kw["conv_state"].clone()
    with pytest.raises(ValueError, match=match):
        runner(kw)
    assert torch.equal(kw["conv_state"], before)


def test_pad_slot_id_is_not_out_of_range() -> None:
    """pad_slot_id (any value) is accepted where a line is expected, and skips the request."""
    kw = _prefill()
    kw["cache_indices"] = _i32([-9, 3])
    out = causal_conv1d_varlen_fn(**kw, pad_slot_id=-9, validate=True)
    assert torch.all(out[:, :4] == 0)
    kw = _decode(spec=False)
    kw["conv_state_indices"] = _i32([PAD_SLOT_ID, 0, 2])
    out = _run_decode(kw, validate=True)
    assert torch.all(out[0] == 0)
