"""The coverage table: rows torch x accel, columns platforms; each cell a wheel or why there is none.

``table(plan)`` gives the JSON form (for the landing page), ``markdown(plan)`` the README form.
A cell is "covered" when a build job serves that (variant, platform); it then names the wheel
and the CPythons it serves. For torch >= 2.10 that job is the stable-ABI job of the accelerator
family (``stable_abi: true`` in the cell): one wheel, many cells. Rows list only the accelerator
builds a torch release has. ``job_counts(plan)`` compares the plan with its per-minor form.
"""

from __future__ import annotations

from typing import Optional, TypedDict

from build_matrix.plan import Plan, PlanFilters, make_plan

__all__ = ["table", "markdown", "job_counts"]


class JobCounts(TypedDict):
    per_minor: int
    stable_abi: int
    stable_jobs: int
    saved: int


class Cell(TypedDict, total=False):
    """One platform of a row: ``covered`` (the job, its wheel, the CPythons it serves there) or
    ``unavailable`` (``job`` None and the reason)."""

    status: str
    job: Optional[str]
    wheel: str
    pythons: list[str]
    torch_version: str
    stable_abi: bool
    reason: str


class Row(TypedDict, total=False):
    torch: str
    accel: str
    variant: str
    confidence: str
    cells: dict[str, Cell]
    note: str  # low-confidence data only: what is assumed


class CoverageTable(TypedDict):
    platforms: list[str]
    abi3: bool
    rows: list[Row]
    jobs: JobCounts


def job_counts(plan: Plan) -> JobCounts:
    """The job count of ``plan`` and of the same plan without stable-ABI jobs (one job per torch minor):
    ``{"per_minor": 133, "stable_abi": 70, "stable_jobs": 9, "saved": 63}``."""
    before = make_plan(plan.data, stable_abi=False, **_filters(plan))
    stable = sum(1 for j in plan.jobs if j.stable_abi)
    return {
        "per_minor": len(before.jobs),
        "stable_abi": len(plan.jobs),
        "stable_jobs": stable,
        "saved": len(before.jobs) - len(plan.jobs),
    }


def _filters(plan: Plan) -> PlanFilters:
    f = plan.filters
    return {"torch": f["torch"], "accels": f["accels"], "platforms": f["platforms"], "pythons": f["pythons"]}


def table(plan: Plan) -> CoverageTable:
    """``{"platforms": [...], "rows": [{"torch", "accel", "variant", "confidence", "cells": {platform: cell}}]}``;
    a row whose torch release data is low confidence (compat.toml) also has a ``note`` saying what is assumed."""
    platforms = list(dict.fromkeys(c.platform for c in plan.combinations))
    by_id = {j.id: j for j in plan.jobs}
    jobs = {}
    served: dict[tuple[str, str, str], list[str]] = {}  # the CPythons of the covered combinations
    reasons: dict[tuple[str, str, str], str] = {}
    for c in plan.combinations:
        reasons.setdefault((c.torch, c.accel, c.platform), c.reason)
        if c.job is not None:
            jobs[(c.torch, c.accel, c.platform)] = by_id[c.job]
            served.setdefault((c.torch, c.accel, c.platform), []).append(c.python)
    rows: list[Row] = []
    seen: set[tuple[str, str]] = set()
    for c in plan.combinations:
        key = (c.torch, c.accel)
        if key in seen:
            continue
        seen.add(key)
        rel = plan.data.torch[c.torch]
        if c.accel not in rel.builds:
            continue
        cells: dict[str, Cell] = {}
        for plat in platforms:
            job = jobs.get((c.torch, c.accel, plat))
            if job is not None:
                cells[plat] = {
                    "status": "covered",
                    "job": job.id,
                    "wheel": job.wheel_filename,
                    # a stable wheel serves many torch minors: the CPythons of this cell's torch
                    "pythons": [p for p in job.covers_pythons if p in served[(c.torch, c.accel, plat)]],
                    "torch_version": job.torch_version,
                    "stable_abi": job.stable_abi,
                }
            else:
                reason = reasons.get((c.torch, c.accel, plat), "not planned")
                if rel.has_build(c.accel, plat):
                    reason = f"torch {c.torch} {c.accel} on {plat} ships for no CPython this wheel can serve"
                cells[plat] = {"status": "unavailable", "job": None, "reason": reason}
        row: Row = {
            "torch": c.torch,
            "accel": c.accel,
            "variant": f"torch{c.torch}-{c.accel}",
            "confidence": rel.confidence,
            "cells": cells,
        }
        if rel.confidence == "low":  # what is assumed (the landing page says it next to the command)
            row["note"] = rel.note or rel.source
        rows.append(row)
    return {"platforms": platforms, "abi3": True, "rows": rows, "jobs": job_counts(plan)}


def _short_reason(reason: str) -> str:
    if "has no" in reason:
        return "no torch build"
    return reason


def markdown(plan: Plan) -> str:
    """A Markdown table for the README: one row per torch x accel, one column per platform."""
    t = table(plan)
    head = "| torch | accel | " + " | ".join(t["platforms"]) + " |"
    sep = "|---|---|" + "---|" * len(t["platforms"])
    lines = [head, sep]
    for row in t["rows"]:
        cells = []
        for plat in t["platforms"]:
            cell = row["cells"][plat]
            if cell["status"] == "covered":
                pys = cell["pythons"]
                span = pys[0] if len(pys) == 1 else f"{pys[0]}–{pys[-1]}"
                kind = "stable ABI" if cell["stable_abi"] else "cp39-abi3"
                cells.append(f"✅ {kind} (Python {span})")
            else:
                cells.append(f"— {_short_reason(cell['reason'])}")
        lines.append(f"| {row['torch']} | {row['accel']} | " + " | ".join(cells) + " |")
    counts = t["jobs"]
    lines.append("")
    lines.append(f"build jobs before the stable ABI (one per torch minor): {counts['per_minor']}")
    if counts["stable_jobs"]:
        lines.append(
            f"build jobs with stable-ABI wheels for torch >= 2.10: {counts['stable_abi']} "
            f"({counts['stable_jobs']} stable, {counts['stable_abi'] - counts['stable_jobs']} per-minor for older torch)"
        )
    lines.append("")
    lines.append(
        "✅: a wheel (`pip install causal-conv1d --extra-index-url <site>/whl/torchX.Y-ACCEL/`); "
        "—: PyTorch publishes no such torch build. Free-threaded CPythons build from source. "
        "stable ABI: one wheel per CPU / CUDA 12 / CUDA 13 and platform serves every torch >= 2.10, "
        "linked from each torchX.Y-ACCEL page."
    )
    return "\n".join(lines) + "\n"
