"""GPU tests of the CUDA kernels (marker gpu; skipped without CUDA, see tests/conftest.py).

The tests call the torch ops directly (torch.ops.causal_conv1d.*), so they exercise the CUDA
kernels even while the Python API is changing. ``ops`` loads the built extension: through the
package when it imports, else from the built library file.
"""

from __future__ import annotations

import contextlib
import glob
import importlib
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


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


@pytest.fixture(scope="session")
def ops():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    return load_ops()


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
