"""The CPU forward's code paths, each in its own process (the choices are made once per process):
the AVX-512 and AVX2 kernels and the scalar kernels (``ATEN_CPU_CAPABILITY=avx512|avx2|default``), and
the huge-page hint on and off (``CAUSAL_CONV1D_CPU_HUGE_PAGES``). Every path must match the float64
reference; the AVX2 and AVX-512 kernels must agree bit for bit, and so must the hint on and off
(it changes how memory is backed, never the values)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the huge-page hint and the x86 kernels: Linux paths")

# The child: the forward of every saved input set (the choices above are made at its start).
CHILD = r"""
import sys, torch
import causal_conv1d  # noqa: F401  (loads the ops)

inputs = torch.load(sys.argv[1])
outs = [torch.ops.causal_conv1d.fwd(x, w, bias, seq_idx, None, False, True)[0] for x, w, bias, seq_idx in inputs]
torch.save({"cap": torch.backends.cpu.get_cpu_capability(), "outs": outs}, sys.argv[2])
"""


def _inputs() -> list[tuple]:
    """(x, weight, bias, seq_idx) per case: every layout, dtype and a few widths, plus two outputs of
    8 MiB and more (the huge-page hint applies), with seq_idx."""
    from _cc1d_ref import make_bdl

    torch.manual_seed(0)
    cases = [
        (dtype, layout, width, 2, 40, 300, False)
        for dtype in (torch.float32, torch.bfloat16, torch.float16)
        for layout in ("cf", "cl", "cf_view")
        for width in (2, 4, 7)
    ]
    cases += [(torch.float32, "cf", 4, 1, 1024, 2304, True), (torch.float32, "cl", 4, 1, 1024, 2304, True)]
    out = []
    for dtype, layout, width, b, d, length, seq in cases:
        seq_idx = None
        if seq:
            seq_idx = torch.zeros(b, length, dtype=torch.int32)
            seq_idx[:, length // 3 :] = 1
            seq_idx[:, -5:] = -1
        out.append(
            (make_bdl(b, d, length, layout, dtype, "cpu"), torch.randn(d, width) / width**0.5, torch.randn(d), seq_idx)
        )
    return out


def _run(tmp_path: Path, name: str, env_extra: dict[str, str]) -> dict:
    dest = tmp_path / f"{name}.pt"
    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "CAUSAL_CONV1D_CPU_HUGE_PAGES")}
    env.update(env_extra)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "inputs.pt"), str(dest)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"{name}: child failed:\n{proc.stdout}\n{proc.stderr}"
    return torch.load(dest)


def test_cpu_forward_paths_agree(tmp_path: Path) -> None:
    from _cc1d_ref import fwd_ref, tol

    inputs = _inputs()
    torch.save(inputs, tmp_path / "inputs.pt")
    runs = {"default": _run(tmp_path, "native", {})}
    cap = runs["default"]["cap"]
    runs["scalar"] = _run(tmp_path, "scalar", {"ATEN_CPU_CAPABILITY": "default"})
    runs["nohuge"] = _run(tmp_path, "nohuge", {"CAUSAL_CONV1D_CPU_HUGE_PAGES": "0"})
    if cap in ("AVX2", "AVX512"):
        runs["avx2"] = _run(tmp_path, "avx2", {"ATEN_CPU_CAPABILITY": "avx2"})
    for n, (x, w, bias, seq_idx) in enumerate(inputs):
        ref, _ = fwd_ref(x, w, bias, seq_idx=seq_idx, silu=True)
        case = f"case {n}: x {x.dtype} {tuple(x.shape)} strides {x.stride()}, width {w.shape[1]}"
        for name, run in runs.items():
            torch.testing.assert_close(
                run["outs"][n].double(),
                ref,
                **tol(x.dtype, torch.float32),
                msg=lambda m, name=name, case=case: f"{name} {case}: {m}",
            )
        assert torch.equal(runs["nohuge"]["outs"][n], runs["default"]["outs"][n]), f"huge-page hint changed {case}"
        if "avx2" in runs and cap == "AVX512":
            assert torch.equal(runs["avx2"]["outs"][n], runs["default"]["outs"][n]), f"AVX2 != AVX-512 in {case}"
