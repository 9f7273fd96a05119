"""The torch ops for the GPU tests, and the kernel-path helpers (csrc/kernel_paths.h).

A module of its own (not conftest.py): the tests and the scripts that run them outside pytest
(compute-sanitizer, benchmarks/kernel_ab.sh) import it by name, and inside one pytest session
``conftest`` can name another folder's conftest.
"""

from __future__ import annotations

import contextlib
import glob
import importlib
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


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
