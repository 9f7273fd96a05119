"""Interop with vLLM's own causal conv1d kernels: vLLM's Triton code
(``vllm/model_executor/layers/mamba/ops/causal_conv1d.py``, kept in ``../shared/peers/vllm/`` beside
the repository, never in it) runs in Triton's interpreter on the CPU (float32, tiny shapes), and
chains that mix its calls and ours on one cache -- prefill with prefix caching, speculative steps,
ragged steps, plain decode, tree drafts -- give the result of the tests' own reference
(_serving_ref.py) at every step, through the native API and the vLLM drop-in.

The interpreter has to be on before triton is first imported, so the cases run in one child process
(_vllm_interop_child.py, TRITON_INTERPRET=1) and each test checks its case's result. Skipped, saying
why, only when triton (requirements-dev.txt) or the peer folder is absent.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _vllm_interop_child import case_ids

HERE = Path(__file__).resolve().parent
PEER = HERE.parents[1].parent / "shared" / "peers" / "vllm"


@pytest.fixture(scope="module")
def results() -> dict[str, str]:
    if not (PEER / "vllm_causal_conv1d.py").is_file():
        pytest.skip(
            f"vLLM's kernel file is not at {PEER / 'vllm_causal_conv1d.py'} (the shared/ folder beside the repository)"
        )
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed (it runs vLLM's kernels): pip install -r requirements-dev.txt")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run(
        [sys.executable, str(HERE / "_vllm_interop_child.py"), str(PEER)],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, f"the child process failed:\n{proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", case_ids())
def test_vllm_interop(results: dict[str, str], case: str) -> None:
    assert results[case] == "ok", results[case]
