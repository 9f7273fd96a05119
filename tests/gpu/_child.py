"""A fresh Python process for the fast-path tests: the kernels read their switches
(CAUSAL_CONV1D_*_FAST) once per process, so each setting of a switch needs its own process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run_child(module: str, expr: str, env: dict[str, str], timeout: int) -> subprocess.CompletedProcess:
    """Run ``sys.exit(min(<expr>, 100))`` with ``module`` imported as ``t``, in this folder, with the
    variables of env set. The exit status is the child's failure count (capped at 100)."""
    full = dict(os.environ)
    full.update(env)
    full["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    code = f"import sys, {module} as t; sys.exit(min({expr}, 100))"
    return subprocess.run(
        [sys.executable, "-c", code], cwd=HERE, env=full, capture_output=True, text=True, timeout=timeout
    )
