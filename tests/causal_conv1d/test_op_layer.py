"""Which op layer the loaded ``_C`` is, and that it is what its build record says.

The same sources build two op layers (csrc/torch_api.h): on the LibTorch stable ABI (the default for
torch >= 2.10) or on ATen (legacy; ``CAUSAL_CONV1D_STABLE_ABI=FALSE``). CI runs the package suite on
both; it sets ``CAUSAL_CONV1D_EXPECT_OP_LAYER=stable|legacy`` so that a build that silently took the
other path fails here instead of passing the suite as the wrong thing.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch
from _cc1d_ref import OP_LAYER

import causal_conv1d
from causal_conv1d import _guard, causal_conv1d_fn

_REPO = Path(__file__).resolve().parents[2]


def test_op_layer_matches_the_expectation() -> None:
    record = _guard.read_build_record()
    assert record is not None, "no build record next to the loaded _C"
    print(f"op layer: {OP_LAYER} (variant {record['variant']}, stable_abi_target {record['stable_abi_target']})")
    expected = os.environ.get("CAUSAL_CONV1D_EXPECT_OP_LAYER", "").strip().lower()
    if expected:
        assert expected in ("stable", "legacy"), f"CAUSAL_CONV1D_EXPECT_OP_LAYER={expected!r}"
        assert OP_LAYER == expected, f"expected the {expected} op layer, the build record says {OP_LAYER}"
    if OP_LAYER == "stable":
        assert record["variant"].startswith("stable") and record["stable_abi_target"] == "2.10"
    else:
        assert record["variant"].startswith("torch")


def _loaded_library() -> Path:
    return Path(causal_conv1d._C.__file__)


@pytest.mark.skipif(sys.platform != "linux", reason="ELF symbol tables")
def test_loaded_library_imports_match_the_op_layer() -> None:
    """A stable _C imports no C++ symbol of torch (only the C shims); a legacy one does."""
    if str(_REPO) not in sys.path:
        sys.path.append(str(_REPO))
    from build_matrix import binaries

    offending, shims = binaries.torch_cxx_imports(_loaded_library())
    if OP_LAYER == "stable":
        assert offending == [], offending[:10]
        assert any(s.startswith("aoti_torch_") for s in shims) and "torch_parallel_for" in shims
    else:
        assert any(s.startswith(("c10::", "at::")) for s in offending), "a legacy _C without ATen symbols"


def test_errors_of_the_op_layer_reach_python_with_their_type() -> None:
    """Through the Python API both layers raise TypeError/ValueError with the same message; through
    torch.ops directly the stable layer raises a RuntimeError that tags the type."""
    x, w = torch.randn(2, 8), torch.randn(8, 4)
    with pytest.raises(ValueError) as info:
        causal_conv1d_fn(x, w)
    assert str(info.value) == "x must be 3-D (batch, dim, seqlen), got shape [2, 8]"
    with pytest.raises(TypeError) as info:
        causal_conv1d_fn(torch.ones(2, 8, 4, dtype=torch.int32), w)
    assert str(info.value) == "x must be float32, float16 or bfloat16 (or float64 on the CPU), got Int"
    direct = pytest.raises(RuntimeError if OP_LAYER == "stable" else ValueError)
    with direct as info:
        torch.ops.causal_conv1d.fwd.default(x, w, None, None, None, False, False)
    assert ("[ValueError] x must be 3-D" in str(info.value)) is (OP_LAYER == "stable")


def _frames_entered(fn) -> set[str]:  # noqa: ANN001
    seen: set[str] = set()

    def prof(frame, event, arg):  # noqa: ANN001,ANN202
        if event == "call":
            seen.add(f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}")

    sys.setprofile(prof)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return seen


def test_no_grad_call_skips_the_python_autograd_kernel() -> None:
    """The stable op layer's fwd autograd is Python (torch/_library/autograd.py's kernel, entered on
    every dispatch): the Python API calls fwd below autograd when nothing needs a gradient (the eager
    fast path), and applies _ops.CausalConv1dFwd itself when something does, so that kernel is entered
    only by direct op calls. The legacy layer's autograd is C++ (csrc/autograd.cpp): no Python kernel."""
    from causal_conv1d import _ops

    assert _ops.PYTHON_AUTOGRAD is (OP_LAYER == "stable")
    x, w = torch.randn(1, 8, 4), torch.randn(8, 4)
    kernel = "autograd.py:autograd_impl"
    assert kernel not in _frames_entered(lambda: causal_conv1d_fn(x, w))
    with torch.no_grad():
        assert kernel not in _frames_entered(lambda: causal_conv1d_fn(x.requires_grad_(), w))
    x.requires_grad_(False)
    direct = _frames_entered(lambda: torch.ops.causal_conv1d.fwd.default(x, w, None, None, None, False, False))
    assert (kernel in direct) is _ops.PYTHON_AUTOGRAD
    # with a gradient the Python API applies CausalConv1dFwd itself (not the registered kernel)
    xr = x.clone().requires_grad_()
    entered = _frames_entered(lambda: causal_conv1d_fn(xr, w))
    assert kernel not in entered
    assert ("_ops.py:forward" in entered) is _ops.PYTHON_AUTOGRAD
    node = causal_conv1d_fn(xr, w).grad_fn
    # type(node).__name__: node.name() is not there for Python autograd.Function nodes on torch 2.11/2.12
    label = type(node).__name__ if _ops.PYTHON_AUTOGRAD else node.name()
    assert node is not None and ("CausalConv1dFwd" in label) is _ops.PYTHON_AUTOGRAD
    # the registered kernel is what a direct op call with a gradient uses, and it gives the same gradients
    if _ops.PYTHON_AUTOGRAD:
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        causal_conv1d_fn(xa, w, activation="silu").square().sum().backward()
        torch.ops.causal_conv1d.fwd.default(xb, w, None, None, None, False, True)[0].square().sum().backward()
        assert torch.equal(xa.grad, xb.grad)


def test_untag_maps_a_settings_runtime_error_back_to_value_error() -> None:
    """torch 2.15 raises the switches' std::invalid_argument as a RuntimeError (seen with the cu13
    stable wheel on torch 2.15.0+cu132); the Python API's untag makes it the ValueError again, and
    leaves other untagged errors alone."""
    from causal_conv1d import _errors

    msg = "Invalid value for CAUSAL_CONV1D_CPU_HUGE_PAGES (expected TRUE or FALSE): 'maybe'"
    meant = _errors.untag(RuntimeError(msg))
    assert type(meant) is ValueError and str(meant) == msg
    other = RuntimeError("something else went wrong")
    assert _errors.untag(other) is other
    tagged = _errors.untag(RuntimeError("fwd, ops.cpp:12, [TypeError] x must be float32, float16 or bfloat16"))
    assert type(tagged) is TypeError and str(tagged) == "x must be float32, float16 or bfloat16"
