"""Project-wide pytest configuration: markers that skip cleanly, shared helpers.

Each part keeps its own fixtures in tests/<area>/conftest.py.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


def _cuda_available() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _cuda_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU (run on a CUDA machine: scripts/gpu-check.sh, docs/cuda.md)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def cpu_wheel() -> Path:
    """A real CPU wheel of this project (job torch2.13-cpu-linux-x86_64), built by native mode.

    Built once per source state and cached under build/test-wheels/<hash of csrc, causal_conv1d,
    setup.py, build_support>/, so reruns are instant (see build_matrix.wheel_cache.cached_wheel).
    """
    from build_matrix.wheel_cache import cached_wheel

    root = Path(__file__).resolve().parent.parent
    # torch from pip's configured indexes only: tests reach no index but PyPI (and local mirrors).
    return cached_wheel("torch2.13-cpu-linux-x86_64", root / "build" / "test-wheels", torch_index_url="")
