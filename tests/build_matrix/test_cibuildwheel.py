"""Cross-check with the real tool: each job's environment makes cibuildwheel select exactly the
one planned build identifier (``cibuildwheel --print-build-identifiers``; no Docker needed).

The repository's own pyproject.toml ([tool.cibuildwheel]) is in force; the job's CIBW_* variables
override it, as in CI.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cibuildwheel  # noqa: F401 - run below as `python -m cibuildwheel`; required (requirements-dev.txt)
import pytest

from build_matrix.plan import Job, make_plan

REPO = Path(__file__).resolve().parents[2]


def identifiers(job: Job) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CIBW_")}
    env.update(job.environment)
    proc = subprocess.run(
        [sys.executable, "-m", "cibuildwheel", "--print-build-identifiers", "--platform", job.os, str(REPO)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"{job.id}: cibuildwheel failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout.split()


def representative(jobs: list[Job]) -> list[Job]:
    """One job per distinct identifier shape: OS, arch, CPython, manylinux image, CPU or CUDA."""
    seen: dict[tuple, Job] = {}
    for job in jobs:
        seen.setdefault((job.os, job.arch, job.python, job.manylinux, job.cuda is None, job.stable_abi), job)
    return list(seen.values())


@pytest.fixture(scope="module")
def jobs(data) -> list[Job]:
    return make_plan(data).jobs


def test_representative_jobs_select_exactly_the_planned_identifier(jobs: list[Job]) -> None:
    subset = representative(jobs)
    assert {j.os for j in subset} == {"linux", "windows"} and len(subset) >= 10
    assert sum(j.stable_abi for j in subset) >= 6  # cpu and CUDA stable jobs of every platform
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(identifiers, subset))
    for job, got in zip(subset, results):
        assert got == [job.cibw_identifier], job.id


@pytest.mark.slow
def test_every_job_selects_exactly_the_planned_identifier(jobs: list[Job]) -> None:
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(identifiers, jobs))
    wrong = {job.id: got for job, got in zip(jobs, results) if got != [job.cibw_identifier]}
    assert not wrong, wrong


def test_a_wrong_environment_is_caught(jobs: list[Job]) -> None:
    """The cross-check can fail: without CIBW_BUILD cibuildwheel selects many identifiers."""
    job = next(j for j in jobs if j.os == "linux")
    broken = Job(**{**job.__dict__, "environment": {k: v for k, v in job.environment.items() if k != "CIBW_BUILD"}})
    assert identifiers(broken) != [job.cibw_identifier]
