"""The run summary of release.yml: each job records its outcome; one job renders the table.

The matrix shards and each job's cibuildwheel environment come from ``build_matrix emit``; this
module only collects what happened: ``record-result`` writes one small JSON file per job and
stage (uploaded as an artifact even when the job failed), and ``summary`` turns the plan plus
those files into the Markdown table of built / failed / missing jobs in $GITHUB_STEP_SUMMARY.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Optional, TypedDict

from release.errors import UsageError
from release.select import PlanJSON, plan_jobs

__all__ = ["result_record", "load_results", "summary_markdown", "append_lines", "read_json"]

_OUTCOMES = ("success", "failure", "cancelled", "skipped")


class ResultRecord(TypedDict):
    """One job's outcome of one stage, as the workflow's jobs write it (``record-result``)."""

    id: str
    stage: str  # build | test
    outcome: str  # one of _OUTCOMES
    wheels: list[str]
    seconds: Optional[float]


#: ``{job id: {stage: record}}``
Results = dict[str, dict[str, ResultRecord]]


def result_record(
    job_id: str, stage: str, outcome: str, *, wheel_dir: Optional[Path] = None, seconds: Optional[float] = None
) -> ResultRecord:
    if stage not in ("build", "test"):
        raise UsageError(f"Invalid --stage {stage!r}: build or test")
    if outcome not in _OUTCOMES:
        raise UsageError(f"Invalid --outcome {outcome!r}: one of {', '.join(_OUTCOMES)}")
    wheels = sorted(p.name for p in wheel_dir.glob("*.whl")) if wheel_dir and wheel_dir.is_dir() else []
    return {"id": job_id, "stage": stage, "outcome": outcome, "wheels": wheels, "seconds": seconds}


def load_results(results_dir: Path) -> Results:
    """``{job id: {stage: record}}`` from every ``*.json`` under ``results_dir``."""
    found: Results = {}
    if not results_dir.is_dir():
        return found
    for path in sorted(results_dir.rglob("*.json")):
        try:
            rec = json.loads(path.read_text(encoding="utf-8"))
            found.setdefault(str(rec["id"]), {})[str(rec["stage"])] = rec
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"Invalid result file {path}: {exc}") from None
    return found


def stage_record(results: Mapping[str, Mapping[str, ResultRecord]], job_id: str, stage: str) -> Optional[ResultRecord]:
    """The record of one job's stage, or None when there is none."""
    by_stage = results.get(job_id)
    return by_stage.get(stage) if by_stage is not None else None


def outcome(results: Mapping[str, Mapping[str, ResultRecord]], job_id: str, stage: str) -> Optional[str]:
    """``success`` / ``failure`` / ... of one job's stage; None without a record."""
    rec = stage_record(results, job_id, stage)
    return rec.get("outcome") if rec is not None else None


_ICON = {"success": "✅ built", "failure": "❌ failed", "cancelled": "⚪ cancelled", "skipped": "⚪ skipped"}
_TEST_ICON = {"success": "✅ passed", "failure": "❌ failed", "cancelled": "⚪ cancelled", "skipped": "⚪ skipped"}


def summary_markdown(plan: PlanJSON, results: Mapping[str, Mapping[str, ResultRecord]]) -> str:
    """The run summary: counts, then one row per planned job (failures first)."""
    jobs = plan_jobs(plan)
    rows = []
    counts = {"built": 0, "failed": 0, "no result": 0, "tests failed": 0}
    for job in jobs:
        build = outcome(results, str(job["id"]), "build")
        test = outcome(results, str(job["id"]), "test")
        if build == "success":
            counts["built"] += 1
        elif build in ("failure", "cancelled"):
            counts["failed"] += 1
        else:
            counts["no result"] += 1
        if test == "failure":
            counts["tests failed"] += 1
        build_rec = stage_record(results, str(job["id"]), "build")
        wheels = (build_rec.get("wheels") if build_rec is not None else None) or []
        rank = 0 if build == "failure" or test == "failure" else (1 if build != "success" else 2)
        rows.append(
            (
                rank,
                str(job["id"]),
                [
                    f"`{job['id']}`",
                    str(job["variant"]),
                    str(job["platform"]),
                    _ICON.get(build or "", "⚪ no result"),
                    _TEST_ICON.get(test or "", "⚪ no result"),
                    ", ".join(f"`{w}`" for w in wheels) or "–",
                ],
            )
        )
    rows.sort()
    lines = [
        "## Wheel builds",
        "",
        f"**{len(jobs)} jobs planned: {counts['built']} built, {counts['failed']} failed, "
        f"{counts['no result']} without a result; {counts['tests failed']} failed their tests.**",
        "",
        "| job | variant | platform | build | test | wheel |",
        "|---|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(cells) + " |" for _rank, _id, cells in rows]
    return "\n".join(lines) + "\n"


def append_lines(path: Optional[str], lines: Sequence[str], *, what: str) -> None:
    """Append to a GitHub file command ($GITHUB_OUTPUT, $GITHUB_ENV); stdout when not set."""
    text = "\n".join(lines) + ("\n" if lines else "")
    if not path:
        print(text, end="")
        return
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise UsageError(f"Cannot write {what} file {path}: {exc}") from None


def read_json(path: Path, *, what: str) -> PlanJSON:
    """A JSON document (the plan: ``plan_jobs`` checks what it reads of it)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"Cannot read {what} {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"Invalid {what} {path} (not JSON: {exc})") from None


def env_path(explicit: Optional[str], var: str) -> Optional[str]:
    return explicit or os.environ.get(var) or None
