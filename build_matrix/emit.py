"""Emitters: GitHub Actions matrix shards and per-job cibuildwheel environments.

GitHub Actions allows at most 256 jobs per matrix, so the job list is cut into shards of at most
``MAX_SHARD`` jobs. Jobs are ordered by (torch minor, accel, platform) and keep their ids (the
plan's job ids) in every shard, so a job's id never depends on the sharding.

Matrix entries (``include`` list items) carry only what a workflow needs to pick a runner and
find the job again: ``id``, ``variant``, ``torch``, ``accel``, ``cuda``, ``platform``, ``os``,
``arch``, ``runs_on``, ``python``, ``oldest_torch`` / ``oldest_accel`` (the oldest torch the wheel
serves and the PyTorch index to get it from: a stable wheel's CI test runs it there too), ``stable_abi`` (``"true"``/``"false"``: strings, as workflow
expressions compare them) and ``family`` (cpu/cu12/cu13). For a stable-ABI job ``torch``/``accel``/
``cuda`` are those of the torch it compiles against (``accel`` names the PyTorch index to test with). The step then loads the job's full environment with
``python -m build_matrix emit env --job ID --format github >> "$GITHUB_ENV"``.
"""

from __future__ import annotations

import json
import shlex
import uuid
from collections.abc import Sequence
from typing import TypedDict

from build_matrix.plan import Job, Plan

__all__ = ["MAX_SHARD", "matrix_entry", "shards", "github_output", "format_env", "ENV_FORMATS"]

MAX_SHARD = 256  #: GitHub Actions' limit of jobs per matrix
ENV_FORMATS = ("json", "shell", "github", "dotenv")


class MatrixEntry(TypedDict):
    """One ``include`` item (strings only: GitHub Actions matrix values)."""

    id: str
    variant: str
    torch: str
    accel: str
    cuda: str
    platform: str
    os: str
    arch: str
    runs_on: str
    python: str
    oldest_torch: str
    oldest_accel: str
    stable_abi: str  # "true" | "false"
    family: str


class Shard(TypedDict):
    name: str
    count: int
    include: list[MatrixEntry]


def matrix_entry(job: Job) -> MatrixEntry:
    """One ``include`` item of a GitHub Actions matrix."""
    oldest = [v.split("-", 1) for v in job.serves]  # sorted by (torch minor, CUDA): first minor, its newest CUDA
    oldest_torch = oldest[0][0][len("torch") :]
    oldest_accel = [a for t, a in oldest if t == oldest[0][0]][-1]
    return {
        "id": job.id,
        "variant": job.variant.name,
        "torch": job.torch,
        "accel": job.accel,
        "cuda": job.cuda or "",
        "platform": job.platform,
        "os": job.os,
        "arch": job.arch,
        "runs_on": job.runs_on,
        "python": job.python,
        "oldest_torch": oldest_torch,
        "oldest_accel": oldest_accel,
        "stable_abi": "true" if job.stable_abi else "false",
        "family": job.family,
    }


def shards(plan: Plan, *, size: int = MAX_SHARD) -> list[Shard]:
    """``[{"name": "shard-0", "count": n, "include": [...]}, ...]``; each shard has <= ``size`` jobs."""
    if not 1 <= size <= MAX_SHARD:
        raise ValueError(f"Invalid shard size (expected 1..{MAX_SHARD}): {size!r}")
    jobs = list(plan.jobs)
    out: list[Shard] = []
    for i in range(0, len(jobs), size):
        chunk = [matrix_entry(j) for j in jobs[i : i + size]]
        out.append({"name": f"shard-{len(out)}", "count": len(chunk), "include": chunk})
    return out


def github_output(shard_list: Sequence[Shard]) -> str:
    """Lines for ``$GITHUB_OUTPUT``: ``shards=N`` and ``shard-K={"include": [...]}`` per shard."""
    lines = [f"shards={len(shard_list)}"]
    lines.append("names=" + json.dumps([s["name"] for s in shard_list], separators=(",", ":")))
    for shard in shard_list:
        lines.append(f"{shard['name']}=" + json.dumps({"include": shard["include"]}, separators=(",", ":")))
    return "\n".join(lines) + "\n"


def format_env(env: dict[str, str], fmt: str) -> str:
    """One job's environment as ``json``, ``shell`` (export lines), ``github`` ($GITHUB_ENV) or ``dotenv``."""
    if fmt == "json":
        return json.dumps(env, indent=2) + "\n"
    if fmt == "shell":
        return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
    if fmt == "dotenv":
        return "".join(f"{k}={json.dumps(v)}\n" for k, v in env.items())
    if fmt == "github":
        # Multiline syntax: values may hold quotes, '&&' and '{wheel}' placeholders verbatim.
        out = []
        for k, v in env.items():
            delim = f"EOF_{uuid.uuid5(uuid.NAMESPACE_OID, k + v).hex[:12]}"
            out.append(f"{k}<<{delim}\n{v}\n{delim}\n")
        return "".join(out)
    raise ValueError(f"Invalid environment format (expected one of {', '.join(ENV_FORMATS)}): {fmt!r}")
