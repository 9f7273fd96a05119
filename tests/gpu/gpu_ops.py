"""The torch ops for the GPU tests, and the kernel-path helpers (csrc/kernel_paths.h).

A module of its own (not conftest.py): the tests and the scripts that run them outside pytest
(compute-sanitizer, benchmarks/kernel_ab.sh) import it by name, and inside one pytest session
``conftest`` can name another folder's conftest.

Run as a script, it runs one fast-path test module's cases outside pytest (for compute-sanitizer):

    python tests/gpu/gpu_ops.py MODULE [MAX_ELEMS]
"""

from __future__ import annotations

import contextlib
import glob
import importlib
import itertools
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: (B, D, L) rows the channel-first fast paths' cases start with: L = 8 (one 16-byte vector of
#: 16-bit x), 24 (three lanes), 136 (17 lanes)
SHORT_ROWS = [(2, 37, 8), (3, 5, 24), (2, 19, 136)]


def fast_grid(shapes, weight_kinds=("same", "fp32")):
    """(x dtype, weight kind, width, shape) for the fast paths' case lists: fp32 / fp16 / bf16 x,
    weights of x's dtype ("same") or another, widths 2..4, every shape."""
    return itertools.product(["fp32", "fp16", "bf16"], weight_kinds, [2, 3, 4], shapes)


def fast_cases(shapes, flags, weight_kinds=("same", "fp32")) -> list[tuple]:
    """The rows (x dtype, weight kind, width, *shape, *flags(i)) of fast_grid: ``flags`` makes the i-th
    row's remaining fields from i, so that the options (layout, states, silu, bias, ...) vary
    across the grid."""
    grid = enumerate(fast_grid(shapes, weight_kinds))
    return [(dts, wk, W, *shape, *flags(i)) for i, (dts, wk, W, shape) in grid]


def load_ops():
    import torch

    if hasattr(torch.ops, "causal_conv1d") and hasattr(torch.ops.causal_conv1d, "fwd"):
        try:
            torch.ops.causal_conv1d.fwd.default  # noqa: B018
            return torch.ops.causal_conv1d
        except (AttributeError, RuntimeError):
            pass
    try:
        importlib.import_module("causal_conv1d")
    except Exception as exc:  # noqa: BLE001 - fall back to the library file; report both if that fails
        root = HERE.parent.parent / "causal_conv1d"
        libs = sorted(glob.glob(str(root / "_C*.so"))) + sorted(glob.glob(str(root / "_C*.pyd")))
        libs += [f for p in sys.path if p for f in sorted(glob.glob(os.path.join(p, "causal_conv1d", "_C*.so")))]
        if not libs:
            raise RuntimeError(f"causal_conv1d does not import ({exc!r}) and no built _C library under {root}") from exc
        torch.ops.load_library(libs[0])
    return torch.ops.causal_conv1d


@contextlib.contextmanager
def kernel_path(ops, path: str, state: int):
    """Within the block, kernel path ``path`` (csrc/kernel_paths.h) is forced on (1) or off (0),
    whatever its CAUSAL_CONV1D_*_FAST variable says; afterwards the variable decides again."""
    ops._set_kernel_path(path, state)
    try:
        yield
    finally:
        ops._set_kernel_path(path, -1)


def path_ran(ops, op: str, want: str) -> list[str]:
    """[] when the last launch of ``op`` ran kernel path ``want``, else the message saying which ran."""
    got = ops._last_kernel_path(op)
    return [] if got == want else [f"{op} ran kernel path {got}, expected {want}"]


def kernels_of(fn, *args) -> list[str]:
    """The names of the CUDA kernels ``fn(*args)`` launches (the profiler's; [] without CUPTI)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def main(argv: list[str]) -> int:
    """``MODULE [MAX_ELEMS]``: MODULE's ``run_cases()`` (``run_cases(max_elems=MAX_ELEMS)`` when given:
    only the cases of at most that many elements); the failure count, at most 100, as the exit status."""
    module = importlib.import_module(argv[0])
    kwargs = {"max_elems": int(argv[1])} if len(argv) > 1 else {}
    return min(module.run_cases(**kwargs), 100)


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent.parent))  # the repository root: the modules import causal_conv1d
    raise SystemExit(main(sys.argv[1:]))
