"""Fixtures for the wheel-build tests: synthetic wheels, the cached native builds, fresh venvs."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / "build" / "test-wheels"
CPU_JOB = "torch2.13-cpu-linux-x86_64"
CUDA_JOB = "torch2.14-cu130-linux-x86_64"
CUDA_TEST_ARCHS = "9.0"  #: one arch keeps the CUDA build within CI's time


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


synthetic = _load("_native_build_synthetic", Path(__file__).with_name("_synthetic.py"))


@pytest.fixture()
def make_wheel(tmp_path: Path) -> Callable[..., Path]:
    """Factory: a small real wheel (g++-compiled abi3 extension); keywords break one thing each."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is needed to compile the synthetic wheels")
    counter = iter(range(1000))

    def factory(**kwargs: Any) -> Path:
        dest = tmp_path / f"w{next(counter)}"
        dest.mkdir()
        return synthetic.make_wheel(dest, **kwargs)

    return factory


def _run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "build_matrix", *args], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=timeout)


@pytest.fixture()
def run_cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """``run_cli(*args, env=None)``: ``python -m build_matrix ARGS`` from the repository root."""
    return _run_cli


@pytest.fixture(scope="session")
def timings() -> Iterator[dict[str, float]]:
    """Durations the slow tests measured (printed at the end of the session)."""
    found: dict[str, float] = {}
    yield found
    if found:
        print("\nnative_build timings: " + ", ".join(f"{k} {v:.0f} s" for k, v in found.items()))


@pytest.fixture(scope="session")
def cuda_wheel(timings: dict[str, float]) -> Path:
    """The CUDA 13.0 wheel (one arch) built natively, cached like ``cpu_wheel``."""
    from build_matrix.native import cached_wheel

    start = time.monotonic()
    wheel = cached_wheel(CUDA_JOB, CACHE, cuda_archs=CUDA_TEST_ARCHS, torch_index_url="")
    timings["cuda wheel (build or cache)"] = time.monotonic() - start
    return wheel


def _fresh_venv(path: Path, *requirements: str) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    py = path / "bin" / "python"
    proc = subprocess.run([str(py), "-m", "pip", "install", "--disable-pip-version-check", "-q", *requirements],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return py


@pytest.fixture()
def fresh_venv() -> Callable[..., Path]:
    """``fresh_venv(path, *requirements)``: a new venv with those installed; returns its python."""
    return _fresh_venv


@pytest.fixture()
def clean_env() -> dict[str, str]:
    """os.environ without the variables a stray shell could use to sway a build."""
    env = dict(os.environ)
    for var in ("CAUSAL_CONV1D_SKIP_CUDA_BUILD", "CAUSAL_CONV1D_FORCE_CXX11_ABI", "TORCH_CUDA_ARCH_LIST"):
        env.pop(var, None)
    return env
