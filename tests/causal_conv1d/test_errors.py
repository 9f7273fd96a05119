"""Bad inputs: the right exception type, and a message that names the argument and what was expected."""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
from _cc1d_ref import raises_from_op

from causal_conv1d import causal_conv1d_fn, causal_conv1d_update
from causal_conv1d.causal_conv1d_interface import InvalidActivation

B, D, L, W = 2, 8, 16, 4


def _fwd_case(device: str, **overrides: Any) -> Callable[[], Any]:
    args: dict[str, Any] = {
        "x": torch.randn(B, D, L, device=device),
        "weight": torch.randn(D, W, device=device),
        "bias": torch.randn(D, device=device),
        "seq_idx": None,
        "initial_states": None,
        "return_final_states": False,
    }
    args.update({k: v(device) if callable(v) else v for k, v in overrides.items()})
    return lambda: causal_conv1d_fn(**args)


# (case id, overrides, exception, regex the message must match)
FWD_CASES = [
    ("x 2-D", {"x": lambda d: torch.randn(B, D, device=d)}, ValueError, r"x must be 3-D"),
    (
        "x int",
        {"x": lambda d: torch.ones(B, D, L, dtype=torch.int32, device=d)},
        TypeError,
        r"x must be float32, float16 or bfloat16",
    ),
    ("weight 1-D", {"weight": lambda d: torch.randn(D, device=d)}, ValueError, r"weight must be 2-D"),
    (
        "weight int",
        {"weight": lambda d: torch.ones(D, W, dtype=torch.int64, device=d)},
        TypeError,
        r"weight must be float32",
    ),
    (
        "weight dim",
        {"weight": lambda d: torch.randn(D + 1, W, device=d)},
        ValueError,
        r"weight must have shape \(dim, width\) with dim = x.shape\[1\] = 8",
    ),
    ("width 1", {"weight": lambda d: torch.randn(D, 1, device=d)}, ValueError, r"width .* between 2 and \d, got 1"),
    ("width 9", {"weight": lambda d: torch.randn(D, 9, device=d)}, ValueError, r"width .* between 2 and \d, got 9"),
    ("bias shape", {"bias": lambda d: torch.randn(D + 2, device=d)}, ValueError, r"bias must have shape \(dim,\)"),
    (
        "bias dtype",
        {"bias": lambda d: torch.randn(D, dtype=torch.float16, device=d)},
        TypeError,
        r"bias must have weight's dtype",
    ),
    (
        "seq_idx int64",
        {"seq_idx": lambda d: torch.zeros(B, L, dtype=torch.int64, device=d)},
        TypeError,
        r"seq_idx must be int32.*\.to\(torch\.int32\)",
    ),
    (
        "seq_idx shape",
        {"seq_idx": lambda d: torch.zeros(B, L + 1, dtype=torch.int32, device=d)},
        ValueError,
        r"seq_idx must have shape \(batch, seqlen\)",
    ),
    (
        "seq_idx + final states",
        {"seq_idx": lambda d: torch.zeros(B, L, dtype=torch.int32, device=d), "return_final_states": True},
        ValueError,
        r"return_final_states must be False when seq_idx is given",
    ),
    (
        "initial_states shape",
        {"initial_states": lambda d: torch.zeros(B, D, W, device=d)},
        ValueError,
        r"initial_states must have shape \(batch, dim, width - 1\)",
    ),
    (
        "initial_states batch",
        {"initial_states": lambda d: torch.zeros(B + 1, D, W - 1, device=d)},
        ValueError,
        r"initial_states must have shape",
    ),
    (
        "initial_states dtype",
        {"initial_states": lambda d: torch.zeros(B, D, W - 1, dtype=torch.bfloat16, device=d)},
        TypeError,
        r"initial_states must have x's dtype",
    ),
]


@pytest.mark.parametrize("case, overrides, exc, match", FWD_CASES, ids=[c[0] for c in FWD_CASES])
def test_fwd_errors(device: str, case: str, overrides: dict, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        _fwd_case(device, **overrides)()


@pytest.mark.parametrize("activation", ["relu", "SiLU", 1])
def test_bad_activation(activation: Any) -> None:
    x, w = torch.randn(B, D, L), torch.randn(D, W)
    with pytest.raises(ValueError, match=r"Invalid activation .*" + repr(activation).replace("(", r"\(")):
        causal_conv1d_fn(x, w, activation=activation)
    with pytest.raises(NotImplementedError):  # what upstream raised: except clauses keep working
        causal_conv1d_update(x[..., 0], torch.zeros(B, D, W), w, activation=activation)
    assert issubclass(InvalidActivation, ValueError)


def test_bwd_errors(device: str) -> None:
    x, w = torch.randn(B, D, L, device=device), torch.randn(D, W, device=device)
    bwd = torch.ops.causal_conv1d.bwd.default
    with raises_from_op(ValueError, match=r"dout must have shape x.shape"):
        bwd(x, w, None, torch.randn(B, D, L + 1, device=device), None, None, None, False, False)
    with raises_from_op(TypeError, match=r"dout must have x's dtype"):
        bwd(x, w, None, torch.randn(B, D, L, device=device).half(), None, None, None, False, False)
    with raises_from_op(ValueError, match=r"dfinal_states must have shape \(batch, dim, width - 1\)"):
        bwd(x, w, None, torch.randn_like(x), None, None, torch.zeros(B, D, W, device=device), False, False)
    with raises_from_op(ValueError, match=r"return_dinitial_states=True needs initial_states"):
        bwd(x, w, None, torch.randn_like(x), None, None, None, True, False)
    with raises_from_op(ValueError, match=r"dout must be channel-first .* or channel-last"):
        bwd(x, w, None, torch.randn(B, D, 2 * L, device=device)[..., ::2], None, None, None, False, False)


def test_layout_error_from_op(device: str) -> None:
    # The Python API makes odd strides contiguous; the op itself names the argument.
    x = torch.randn(B, 2 * D, 2 * L, device=device)[:, ::2, ::2]
    with raises_from_op(ValueError, r"x must be channel-first \(stride\(2\) == 1\) or channel-last"):
        torch.ops.causal_conv1d.fwd.default(x, torch.randn(D, W, device=device), None, None, None, False, False)


UPDATE_CASES = [
    (
        "x 4-D",
        {"x": lambda d: torch.randn(B, D, 1, 1, device=d)},
        ValueError,
        r"x must be \(batch, dim\) or \(batch, dim, seqlen\)",
    ),
    (
        "conv_state dtype",
        {"conv_state": lambda d: torch.zeros(B, D, W, dtype=torch.float16, device=d)},
        TypeError,
        r"conv_state must have x's dtype",
    ),
    (
        "conv_state short",
        {"conv_state": lambda d: torch.zeros(B, D, W - 2, device=d)},
        ValueError,
        r"conv_state must have state_len \(shape\[2\]\) >= width - 1 = 3",
    ),
    (
        "conv_state dim",
        {"conv_state": lambda d: torch.zeros(B, D + 1, W, device=d)},
        ValueError,
        r"conv_state must have dim = x.shape\[1\] = 8",
    ),
    (
        "conv_state batch",
        {"conv_state": lambda d: torch.zeros(B + 1, D, W, device=d)},
        ValueError,
        r"conv_state must have batch = x.shape\[0\] = 2",
    ),
    (
        "cache_seqlens int64",
        {"cache_seqlens": lambda d: torch.zeros(B, dtype=torch.int64, device=d)},
        TypeError,
        r"cache_seqlens must be int32",
    ),
    (
        "cache_seqlens shape",
        {"cache_seqlens": lambda d: torch.zeros(B + 1, dtype=torch.int32, device=d)},
        ValueError,
        r"cache_seqlens must have shape \(batch,\)",
    ),
    (
        "indices int64",
        {"conv_state_indices": lambda d: torch.zeros(B, dtype=torch.int64, device=d)},
        TypeError,
        r"conv_state_indices must be int32",
    ),
    (
        "indices shape",
        {"conv_state_indices": lambda d: torch.zeros(B, 1, dtype=torch.int32, device=d)},
        ValueError,
        r"conv_state_indices must have shape \(batch,\)",
    ),
    (
        "weight dim",
        {"weight": lambda d: torch.randn(D - 1, W, device=d)},
        ValueError,
        r"weight must have shape \(dim, width\)",
    ),
    (
        "width 9",
        {"weight": lambda d: torch.randn(D, 9, device=d), "conv_state": lambda d: torch.zeros(B, D, 9, device=d)},
        ValueError,
        r"width .* between 2 and \d, got 9",
    ),
]


@pytest.mark.parametrize("case, overrides, exc, match", UPDATE_CASES, ids=[c[0] for c in UPDATE_CASES])
def test_update_errors(device: str, case: str, overrides: dict, exc: type, match: str) -> None:
    args: dict[str, Any] = {
        "x": torch.randn(B, D, device=device),
        "conv_state": torch.zeros(B, D, W, device=device),
        "weight": torch.randn(D, W, device=device),
    }
    args.update({k: v(device) for k, v in overrides.items()})
    with pytest.raises(exc, match=match):
        causal_conv1d_update(**args)


def test_update_index_out_of_range_cpu() -> None:
    with pytest.raises(ValueError, match=r"conv_state_indices\[1\] = 5 is out of range for conv_state with 3 rows"):
        causal_conv1d_update(
            torch.randn(B, D),
            torch.zeros(3, D, W),
            torch.randn(D, W),
            conv_state_indices=torch.tensor([0, 5], dtype=torch.int32),
        )


@pytest.mark.gpu
def test_mixed_devices() -> None:
    x = torch.randn(B, D, L, device="cuda")
    with pytest.raises(RuntimeError, match=r"weight must be on the same device as x"):
        causal_conv1d_fn(x, torch.randn(D, W))
    with pytest.raises(RuntimeError, match=r"bias must be on the same device as x"):
        causal_conv1d_fn(x, torch.randn(D, W, device="cuda"), torch.randn(D))


@pytest.mark.gpu
def test_cpu_only_build_names_the_fix() -> None:
    from causal_conv1d import _guard

    record = _guard.read_build_record()
    if record is None or record.get("with_cuda"):
        pytest.skip("this build has CUDA kernels")
    with pytest.raises(RuntimeError, match=r"built without CUDA kernels .*python -m causal_conv1d doctor"):
        causal_conv1d_fn(torch.randn(B, D, L, device="cuda"), torch.randn(D, W, device="cuda"))


@pytest.mark.parametrize("op", ["fwd", "bwd", "update"])
def test_cpu_only_build_cuda_kernels_raise(op: str) -> None:
    # In a build without CUDA kernels, the CUDA dispatch entry of each op says so and names the fix.
    # Dispatching to it directly exercises that path on a machine without a GPU.
    from causal_conv1d import _guard

    record = _guard.read_build_record()
    if record is None or record.get("with_cuda"):
        pytest.skip("this build has CUDA kernels")
    x, w = torch.randn(B, D, L), torch.randn(D, W)
    args = {
        "fwd": (x, w, None, None, None, False, False),
        "bwd": (x, w, None, torch.randn_like(x), None, None, None, False, False),
        "update": (x[..., :1], torch.zeros(B, D, W), w, None, False, None, None),
    }[op]
    cuda_only = torch._C.DispatchKeySet(torch._C.DispatchKey.CUDA)
    with raises_from_op(
        RuntimeError,
        rf"built without CUDA kernels \(CPU-only build\): causal_conv1d::{op} .*python -m causal_conv1d doctor",
    ):
        getattr(torch.ops.causal_conv1d, op).default.redispatch(cuda_only, *args)
