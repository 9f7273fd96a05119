"""Fixtures for the package tests (kernels, ops, Python API).

Every test that takes ``device`` runs on the CPU and, marked ``gpu``, on CUDA (skipped without a
GPU by the top-level conftest). Helpers shared by the test files live in ``_cc1d_ref.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import causal_conv1d  # noqa: F401  (loads _C: registers the ops)

# --import-mode=importlib (pyproject.toml) does not put test folders on sys.path; the test files
# import their helpers from _cc1d_ref.py (a name no other test area uses).
sys.path.insert(0, str(Path(__file__).resolve().parent))
# build_support (test_extension_flags.py) lives at the repository root, which `pytest` (unlike
# `python -m pytest`) does not put on sys.path.
_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.append(_ROOT)

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(params=["aot_eager", "inductor"])
def compile_backend(request: pytest.FixtureRequest, layout: str) -> str:
    """A torch.compile backend for a test parametrized by ``layout``, Dynamo's caches reset first;
    inductor only for "cf" (one inductor compile per device keeps the suite fast)."""
    if request.param == "inductor" and layout == "cl":
        pytest.skip("one inductor compile per device keeps the suite fast; aot_eager covers both layouts")
    torch._dynamo.reset()
    return request.param


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)
