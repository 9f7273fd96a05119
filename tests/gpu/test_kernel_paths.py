"""Which kernel path each CUDA op runs (csrc/cuda/dispatch.cu), asserted for every fast path.

For each fast path: an eligible case runs it (the path the op records, ``_last_kernel_path``, and
the kernel the profiler sees), the same case with the path switched off in process
(``_set_kernel_path``) runs the general path, and with the switch's environment variable set to 0
(read once per process: a child process) too. An invalid value of a switch is an error naming it.
"""

from __future__ import annotations

import pytest
from _child import run_child
from gpu_ops import kernel_path, kernels_of

pytestmark = pytest.mark.gpu

# path -> (op, the path that runs when it is off, a substring of its kernels' names)
FAST_PATHS = {
    "fwd_cf_fast": ("fwd", "fwd_general", "::fwd_cf_fast_kernel<"),
    "fwd_cl_fast": ("fwd", "fwd_general", "::fwd_cl_fast_kernel<"),
    "bwd_cf_fast": ("bwd", "bwd_general", "::bwd_cf_fast_kernel<"),
    "bwd_cl_fast": ("bwd", "bwd_general", "::bwd_cl_fast_kernel<"),
    "update_fast": ("update", "update_general", "::update_fast_"),  # update_fast_kernel, update_fast_lf_kernel
}
GENERAL_KERNELS = {
    "fwd_general": ("::fwd_cf_kernel<", "::fwd_cl_kernel<"),
    "bwd_general": ("::bwd_cf_kernel<", "::bwd_cl_kernel<"),
    "update_general": ("::update_kernel<",),
}
SWITCHES = {
    "fwd_cf_fast": "CAUSAL_CONV1D_FWD_FAST",
    "fwd_cl_fast": "CAUSAL_CONV1D_FWD_CL_FAST",
    "bwd_cf_fast": "CAUSAL_CONV1D_BWD_FAST",
    "bwd_cl_fast": "CAUSAL_CONV1D_BWD_CL_FAST",
    "update_fast": "CAUSAL_CONV1D_UPDATE_FAST",
}


def eligible_call(ops, path: str):
    """A thunk running one case eligible for ``path`` (bf16, width 4, silu, bias)."""
    import torch

    dev, dt = "cuda", torch.bfloat16
    B, D, L = 2, 64, 512
    w = torch.randn(D, 4, device=dev, dtype=dt)
    b = torch.randn(D, device=dev, dtype=dt)
    cf = torch.randn(B, D, L, device=dev, dtype=dt)
    cl = torch.randn(B, L, D, device=dev, dtype=dt).transpose(1, 2)
    if path.startswith("fwd"):
        x = cf if path == "fwd_cf_fast" else cl
        return lambda: ops.fwd(x, w, b, None, None, False, True)
    if path.startswith("bwd"):
        x = cf if path == "bwd_cf_fast" else cl
        dout = torch.randn_like(x)
        return lambda: ops.bwd(x, w, b, dout, None, None, None, False, True)
    x = torch.randn(B, D, 1, device=dev, dtype=dt)
    state = torch.randn(B, D, 3, device=dev, dtype=dt)
    return lambda: ops.update(x, state, w, b, True, None, None)


def test_every_path_is_listed(ops):
    listed = set(ops._kernel_paths().split(","))
    serving = {
        "varlen_cl_fast",
        "varlen_cf_fast",
        "varlen_general",
        "spec_update_decode",
        "spec_update_fast",
        "spec_update_general",
    }  # tests/gpu/test_serving_paths.py runs each
    packed = {"packed_fwd_cl_fast", "packed_bwd_cl_fast", "packed_bwd_general"}  # tests/gpu/test_packed.py runs each
    assert set(FAST_PATHS) | set(GENERAL_KERNELS) | serving | packed == listed


@pytest.mark.parametrize("path", sorted(FAST_PATHS))
def test_fast_path_runs_and_switches_off_in_process(ops, path):
    op, general, kernel = FAST_PATHS[path]
    call = eligible_call(ops, path)
    with kernel_path(ops, path, 1):
        on = kernels_of(call)
        assert ops._last_kernel_path(op) == path
    with kernel_path(ops, path, 0):
        off = kernels_of(call)
        assert ops._last_kernel_path(op) == general
    if not on and not off:
        pytest.skip("the profiler recorded no CUDA kernels (no CUPTI): the recorded paths were checked")
    assert any(kernel in k for k in on), f"{path} on: kernels {on}"
    assert not any(kernel in k for k in off), f"{path} off: kernels {off}"
    assert any(g in k for g in GENERAL_KERNELS[general] for k in off), f"{path} off: kernels {off}"


def test_override_reset_returns_to_the_environment(ops):
    call = eligible_call(ops, "fwd_cf_fast")
    call()
    before = ops._last_kernel_path("fwd")  # what the environment (or its default, on) selects
    with kernel_path(ops, "fwd_cf_fast", 0):
        call()
        assert ops._last_kernel_path("fwd") == "fwd_general"
    call()
    assert ops._last_kernel_path("fwd") == before


def env_off_child() -> int:
    """Child process with every switch at 0: each eligible case runs the general path."""
    from gpu_ops import load_ops

    ops = load_ops()
    failed = 0
    for path, (op, general, _) in FAST_PATHS.items():
        eligible_call(ops, path)()
        got = ops._last_kernel_path(op)
        if got != general:
            failed += 1
            print(f"FAIL {SWITCHES[path]}=0: {op} ran {got}, expected {general}")
    return failed


def test_environment_switches_turn_paths_off(ops):  # noqa: ARG001 - the fixture skips without a GPU
    env = {name: "0" for name in SWITCHES.values()}
    proc = run_child("test_kernel_paths", "t.env_off_child()", env, timeout=300)
    assert proc.returncode == 0, f"exit {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"


def invalid_value_child() -> int:
    """Child process with CAUSAL_CONV1D_FWD_FAST=maybe: the forward fails naming the variable."""
    from gpu_ops import load_ops

    ops = load_ops()
    try:
        eligible_call(ops, "fwd_cf_fast")()
    except (ValueError, RuntimeError) as exc:
        ok = "CAUSAL_CONV1D_FWD_FAST" in str(exc) and "maybe" in str(exc)
        print(("ok: " if ok else "FAIL wrong message: ") + str(exc).splitlines()[0])
        return 0 if ok else 1
    print("FAIL an invalid switch value was accepted")
    return 1


def test_invalid_switch_value_is_an_error(ops):  # noqa: ARG001 - the fixture skips without a GPU
    proc = run_child("test_kernel_paths", "t.invalid_value_child()", {"CAUSAL_CONV1D_FWD_FAST": "maybe"}, timeout=300)
    assert proc.returncode == 0, f"exit {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
