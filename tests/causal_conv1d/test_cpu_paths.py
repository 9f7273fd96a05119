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
    from _cc1d_ref import tol

    from causal_conv1d._reference import fwd_ref

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


# The child of the huge-page switch test: one forward with a 16 MiB output, then whether the kernel
# marked (part of) its pages for transparent huge pages (VmFlags "hg" in /proc/self/smaps: what
# madvise(MADV_HUGEPAGE) sets), or the error the forward raised.
HUGE_PAGE_CHILD = r"""
import torch
from causal_conv1d import causal_conv1d_fn

x, w = torch.randn(1, 1024, 4096), torch.randn(1024, 4)
try:
    out = causal_conv1d_fn(x, w, activation="silu")  # the public API: its error types on every torch
except Exception as exc:
    print(f"ERROR {type(exc).__name__}: {exc}")
    raise SystemExit(0)
lo_t = out.data_ptr()
hi_t = lo_t + out.numel() * out.element_size()
hg, inside = False, False
with open("/proc/self/smaps") as fh:
    for line in fh:
        head = line.split()[0]
        if "-" in head and ":" not in head:
            lo, hi = (int(v, 16) for v in head.split("-"))
            inside = lo < hi_t and hi > lo_t
        elif inside and line.startswith("VmFlags"):
            hg = hg or " hg" in line
print("HUGE" if hg else "NOHUGE")
"""


def _huge_page_child(value: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "CAUSAL_CONV1D_CPU_HUGE_PAGES"}
    if value is not None:
        env["CAUSAL_CONV1D_CPU_HUGE_PAGES"] = value
    proc = subprocess.run([sys.executable, "-c", HUGE_PAGE_CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"child failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout.strip().splitlines()[-1]


@pytest.mark.slow  # one child process per setting: 30-35 s on 2 cores
def test_huge_page_switch_values() -> None:
    """CAUSAL_CONV1D_CPU_HUGE_PAGES follows the settings rules (csrc/switch_on.h, the same as
    contract.env_flag): unset/TRUE/1 on; false, FALSE, off, 0, no off; anything else an error naming
    the variable. On/off is observed in the child's memory map, not inferred from the outputs."""
    default = _huge_page_child(None)
    if default != "HUGE":
        pytest.skip(f"this kernel does not mark madvise(MADV_HUGEPAGE) regions (child said {default!r})")
    for on in ("1", "TRUE", "yes", " On "):
        assert _huge_page_child(on) == "HUGE", on
    for off in ("false", "FALSE", "off", "0", "No"):
        assert _huge_page_child(off) == "NOHUGE", off
    assert _huge_page_child("") == "HUGE"  # empty = unset = the default
    assert _huge_page_child("maybe") == (
        "ERROR ValueError: Invalid value for CAUSAL_CONV1D_CPU_HUGE_PAGES (expected TRUE or FALSE): 'maybe'"
    )
