"""The debug ops of the kernel paths (csrc/kernel_paths.h, csrc/ops.cpp), on any build: the list of
paths, the last path an op ran, and the in-process switch with its errors. Which path the CUDA ops
run is asserted in tests/gpu (test_kernel_paths.py and the fast-path tests)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import causal_conv1d  # noqa: F401  (registers the ops)

ops = torch.ops.causal_conv1d
ROOT = Path(__file__).resolve().parents[2]


def header_paths() -> list[tuple[str, str]]:
    """(name, switch) rows of kKernelPaths in csrc/kernel_paths.h, "none" left out."""
    text = (ROOT / "csrc" / "kernel_paths.h").read_text()
    rows = re.findall(r'\{"(\w+)", KernelOp::k\w+, (?:"(\w+)"|nullptr)\}', text)
    return [(name, switch) for name, switch in rows if name != "none"]


def test_paths_listed_by_the_op_are_the_header_rows():
    assert ops._kernel_paths().split(",") == [name for name, _ in header_paths()]


def test_every_fast_path_has_a_switch_and_every_op_a_general_path():
    rows = dict(header_paths())
    for name, switch in rows.items():
        if name.endswith("_fast"):
            assert switch and switch.startswith("CAUSAL_CONV1D_"), name
    for op in ("fwd", "bwd", "update"):
        assert rows[f"{op}_general"] == "", op


def test_last_kernel_path_is_a_known_name():
    for op in ("fwd", "bwd", "update", "varlen_fwd", "spec_update", "packed_bwd"):
        assert ops._last_kernel_path(op) in ["none", *ops._kernel_paths().split(",")]


def test_unknown_op_is_an_error_naming_the_ops():
    with pytest.raises((ValueError, RuntimeError), match="unknown op 'fwdd'.*fwd, bwd, update"):
        ops._last_kernel_path("fwdd")


def test_unknown_path_is_an_error_naming_the_paths():
    with pytest.raises((ValueError, RuntimeError), match="unknown kernel path 'fast'.*fwd_cf_fast"):
        ops._set_kernel_path("fast", 1)


def test_bad_state_and_general_off_are_errors():
    with pytest.raises((ValueError, RuntimeError), match="state must be 1 .*got 2"):
        ops._set_kernel_path("fwd_cf_fast", 2)
    with pytest.raises((ValueError, RuntimeError), match="general path .*cannot be turned off"):
        ops._set_kernel_path("fwd_general", 0)


@pytest.mark.parametrize("name,switch", header_paths())
def test_every_state_is_accepted_and_leaves_the_cpu_ops_alone(name, switch):
    """Each path takes 1 / 0 / -1 (a general path: 1 / -1); the switches choose CUDA paths only, so the
    CPU forward gives the same bits in every state. That a CUDA path really switches: tests/gpu."""
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(2, 8, 33, generator=g), torch.randn(8, 4, generator=g)
    expected, _ = ops.fwd(x, w, None, None, None, False, True)
    try:
        for state in (1, 0, -1) if switch else (1, -1):
            assert ops._set_kernel_path(name, state) is None
            got, _ = ops.fwd(x, w, None, None, None, False, True)
            assert torch.equal(got, expected), (name, state)
    finally:
        ops._set_kernel_path(name, -1)


def test_switches_of_the_paths_are_the_contracts_cuda_switches():
    import causal_conv1d_contract as contract

    cuda_switches = {name for name, what in contract.KERNEL_SWITCHES.items() if what.startswith("CUDA:")}
    assert {switch for _, switch in header_paths() if switch} == cuda_switches
