"""GPU tests of the CUDA kernels (marker gpu; skipped without CUDA, see tests/conftest.py).

The tests call the torch ops directly (torch.ops.causal_conv1d.*), so they exercise the CUDA
kernels even while the Python API is changing. ``ops`` loads the built extension: through the
package when it imports, else from the built library file.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gpu_ops import load_ops  # noqa: E402


@pytest.fixture(scope="session")
def ops():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    return load_ops()
