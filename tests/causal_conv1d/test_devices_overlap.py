"""Arguments on the meta device (or any other device than x) and self-overlapping in-place outputs are
refused on every op, instead of returning uninitialised memory or writing through aliases."""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
from _cc1d_ref import raises_from_op

from causal_conv1d import causal_conv1d_fn, causal_conv1d_update, causal_conv1d_update_spec, causal_conv1d_varlen_fn

B, D, L, W = 2, 8, 16, 4
META = r"must be on the same device as x \(cpu\), got meta; tensors on the meta device hold no data"

fwd = torch.ops.causal_conv1d.fwd.default
bwd = torch.ops.causal_conv1d.bwd.default
update = torch.ops.causal_conv1d.update.default


def _meta(t: torch.Tensor) -> torch.Tensor:
    return t.to("meta")


def _fwd_args() -> dict[str, Any]:
    return {
        "x": torch.randn(B, D, L),
        "weight": torch.randn(D, W),
        "bias": torch.randn(D),
        "initial_states": torch.randn(B, D, W - 1),
    }


# (case id, call building its arguments with one of them on the meta device, the argument named)
META_CASES: list[tuple[str, Callable[[], Any], str]] = [
    # an empty-weights init leaves the weight on meta while the activations are real
    ("fn weight", lambda: causal_conv1d_fn(torch.randn(B, D, L), _meta(torch.randn(D, W))), "weight"),
    ("fn bias", lambda: causal_conv1d_fn(torch.randn(B, D, L), torch.randn(D, W), _meta(torch.randn(D))), "bias"),
    (
        "fn initial_states",
        lambda: causal_conv1d_fn(
            torch.randn(B, D, L).transpose(1, 2).contiguous().transpose(1, 2),
            torch.randn(D, W),
            None,
            initial_states=_meta(torch.randn(B, L, D)[:, : W - 1].transpose(1, 2)),
        ),
        "initial_states",
    ),
    (
        "fwd op weight",
        lambda: fwd(torch.randn(B, D, L), _meta(torch.randn(D, W)), None, None, None, False, False),
        "weight",
    ),
    (
        "bwd op dout",
        lambda: bwd(
            torch.randn(B, D, L), torch.randn(D, W), None, _meta(torch.randn(B, D, L)), None, None, None, False, False
        ),
        "dout",
    ),
    (
        "bwd op weight",
        lambda: bwd(
            torch.randn(B, D, L), _meta(torch.randn(D, W)), None, torch.randn(B, D, L), None, None, None, False, False
        ),
        "weight",
    ),
    (
        "update conv_state",
        lambda: causal_conv1d_update(torch.randn(B, D), _meta(torch.randn(B, D, W - 1)), torch.randn(D, W)),
        "conv_state",
    ),
    (
        "update weight",
        lambda: causal_conv1d_update(torch.randn(B, D), torch.randn(B, D, W - 1), _meta(torch.randn(D, W))),
        "weight",
    ),
    (
        "update bias",
        lambda: causal_conv1d_update(
            torch.randn(B, D), torch.randn(B, D, W - 1), torch.randn(D, W), _meta(torch.randn(D))
        ),
        "bias",
    ),
    (
        "update cache_seqlens",
        lambda: update(
            torch.randn(B, D, 1),
            torch.randn(B, D, W - 1),
            torch.randn(D, W),
            None,
            False,
            _meta(torch.zeros(B, dtype=torch.int32)),
            None,
        ),
        "cache_seqlens",
    ),
    # the serving ops: x (dim, total_tokens) with a query_start_loc, and the decode step
    (
        "varlen weight",
        lambda: causal_conv1d_varlen_fn(
            torch.randn(D, L),
            _meta(torch.randn(D, W)),
            None,
            torch.randn(2, D, W - 1),
            torch.tensor([0, 5, L], dtype=torch.int32),
        ),
        "weight",
    ),
    (
        "varlen conv_states",
        lambda: causal_conv1d_varlen_fn(
            torch.randn(D, L),
            torch.randn(D, W),
            None,
            _meta(torch.randn(2, D, W - 1)),
            torch.tensor([0, 5, L], dtype=torch.int32),
        ),
        "conv_states",
    ),
    (
        "spec conv_state",
        lambda: causal_conv1d_update_spec(torch.randn(B, D), _meta(torch.randn(B, D, W - 1)), torch.randn(D, W)),
        "conv_state",
    ),
    (
        "spec bias",
        lambda: causal_conv1d_update_spec(
            torch.randn(B, D), torch.randn(B, D, W - 1), torch.randn(D, W), _meta(torch.randn(D))
        ),
        "bias",
    ),
]


@pytest.mark.parametrize("case, call, name", META_CASES, ids=[c[0] for c in META_CASES])
def test_meta_argument_with_a_cpu_x_is_refused(case: str, call: Callable[[], Any], name: str) -> None:
    with pytest.raises(RuntimeError, match=f"{name} {META}"):
        call()


def test_meta_x_with_cpu_weight_is_refused() -> None:
    with pytest.raises(RuntimeError, match=r"weight must be on the same device as x \(meta\), got cpu"):
        fwd(torch.randn(B, D, L, device="meta"), torch.randn(D, W), None, None, None, False, False)


def test_all_meta_still_works() -> None:
    """Every argument on meta is a shape computation (what meta-device model inits use): allowed."""
    out = causal_conv1d_fn(
        torch.randn(B, D, L, device="meta"), torch.randn(D, W, device="meta"), torch.randn(D, device="meta")
    )
    assert out.device.type == "meta" and out.shape == (B, D, L)
    y = causal_conv1d_update(
        torch.randn(B, D, device="meta"), torch.randn(B, D, W - 1, device="meta"), torch.randn(D, W, device="meta")
    )
    assert y.device.type == "meta" and y.shape == (B, D)


OVERLAP = r"conv_state is written in place and must not overlap itself"


@pytest.mark.parametrize(
    "state",
    [
        torch.randn(1, D, W - 1).expand(B + 1, D, W - 1),  # one row shared by every batch row
        torch.randn(B, 1, W - 1).expand(B, D, W - 1),  # one channel shared by every channel
        torch.randn(B, D, 1).expand(B, D, W - 1),  # one value shared by the whole window
        torch.randn(B * D + W).as_strided((B, D, W - 1), (D, 1, 1)),  # windows sliding over each other
    ],
    ids=["batch", "channel", "window", "sliding"],
)
def test_update_refuses_a_self_overlapping_conv_state(state: torch.Tensor) -> None:
    batch = state.shape[0]
    with pytest.raises(ValueError, match=OVERLAP + r".*conv_state\.clone\(\)"):
        causal_conv1d_update(torch.randn(batch, D), state, torch.randn(D, W))
    with raises_from_op(ValueError, match=OVERLAP):  # the op itself, 3-D x
        update(torch.randn(batch, D, 1), state, torch.randn(D, W), None, False, None, None)


@pytest.mark.parametrize(
    "state",
    [
        torch.randn(B, D, W + 2)[:, :, : W - 1],  # a window of a longer cache line
        torch.randn(B, W - 1, D).transpose(1, 2),  # channel-last
        torch.randn(B + 3, D, W - 1)[1 : B + 1],  # rows of a larger cache
    ],
    ids=["prefix", "channel-last", "rows"],
)
def test_update_accepts_views_that_do_not_overlap(state: torch.Tensor) -> None:
    before = state.clone()
    causal_conv1d_update(torch.randn(B, D), state, torch.randn(D, W))
    assert not torch.equal(before, state)  # written through the view


@pytest.mark.parametrize(
    "state",
    [
        torch.randn(1, D, W - 1).expand(B + 1, D, W - 1),
        torch.randn(B * D + W).as_strided((B, D, W - 1), (D, 1, 1)),
    ],
    ids=["batch", "sliding"],
)
def test_serving_ops_refuse_a_self_overlapping_cache(state: torch.Tensor) -> None:
    q = torch.tensor([0, 3, L], dtype=torch.int32)
    with pytest.raises(
        ValueError, match=r"conv_states is written in place and must not overlap itself.*conv_states\.clone\(\)"
    ):
        causal_conv1d_varlen_fn(torch.randn(D, L), torch.randn(D, W), None, state, q)
    with pytest.raises(ValueError, match=OVERLAP + r".*conv_state\.clone\(\)"):
        causal_conv1d_update_spec(torch.randn(state.shape[0], D), state, torch.randn(D, W))
