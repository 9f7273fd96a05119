"""A sequence of named steps run one after another, each timed; the first failure stops it.

Progress goes to a text stream as it happens::

    [3/8] check the wheels
          ok in 4.2 s: 1 wheel passed every check

and a failure names its step::

    [3/8] check the wheels
          FAILED after 4.2 s: command exited with status 1: ... (full output: out/.../logs/03-check.log)

    local release FAILED at step 3/8 'check the wheels' after 1 min 02 s
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Sequence
from typing import IO, Optional

from release.errors import ReleaseError, StepFailed

__all__ = ["Step", "StepResult", "PipelineResult", "run_pipeline", "format_seconds"]


@dataclasses.dataclass(frozen=True)
class Step:
    """One step: ``action()`` does the work and returns a one-line summary (or None)."""

    key: str  # short, stable: used in log file names and the JSON report
    title: str  # what a person reads
    action: Callable[[], Optional[str]]


@dataclasses.dataclass
class StepResult:
    key: str
    title: str
    status: str  # "ok" | "failed" | "not run"
    seconds: float = 0.0
    detail: str = ""


@dataclasses.dataclass
class PipelineResult:
    steps: list[StepResult]
    seconds: float
    failed: Optional[StepResult] = None

    @property
    def ok(self) -> bool:
        return self.failed is None

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "seconds": round(self.seconds, 3),
            "failed_step": None if self.failed is None else self.failed.key,
            "steps": [dataclasses.asdict(s) | {"seconds": round(s.seconds, 3)} for s in self.steps],
        }


def format_seconds(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes} min {secs:02d} s"


def run_pipeline(
    steps: Sequence[Step],
    *,
    name: str = "pipeline",
    stream: IO[str] = sys.stdout,
    clock: Callable[[], float] = time.monotonic,
    finally_: Optional[Callable[[], None]] = None,
) -> PipelineResult:
    """Run ``steps`` in order. Never raises for a failed step: the result says which one failed.

    ``finally_`` runs after the last step whatever happened (it stops the index server); a
    failure in it is reported but does not hide the step failure that came first.
    """
    results = [StepResult(s.key, s.title, "not run") for s in steps]
    total_start = clock()
    failed: Optional[StepResult] = None
    width = len(str(len(steps)))
    for i, (step, result) in enumerate(zip(steps, results), start=1):
        stream.write(f"\n[{i:>{width}}/{len(steps)}] {step.title}\n")
        stream.flush()
        start = clock()
        try:
            detail = step.action()
        except (ReleaseError, OSError) as exc:
            result.status, result.seconds = "failed", clock() - start
            result.detail = exc.reason if isinstance(exc, StepFailed) else str(exc)
            stream.write(f"      FAILED after {format_seconds(result.seconds)}: {result.detail}\n")
            failed = result
            break
        result.status, result.seconds, result.detail = "ok", clock() - start, detail or ""
        suffix = f": {detail}" if detail else ""
        stream.write(f"      ok in {format_seconds(result.seconds)}{suffix}\n")
        stream.flush()
    if finally_ is not None:
        try:
            finally_()
        except (ReleaseError, OSError) as exc:
            stream.write(f"warning: cleanup failed: {exc}\n")
    total = clock() - total_start
    stream.write("\n" + _timing_table(results) + "\n")
    if failed is not None:
        index = results.index(failed) + 1
        stream.write(
            f"\n{name} FAILED at step {index}/{len(steps)} '{failed.title}' after {format_seconds(total)}\n"
            f"  reason: {failed.detail}\n"
        )
    else:
        stream.write(f"\n{name} finished: {len(steps)} steps in {format_seconds(total)}\n")
    stream.flush()
    return PipelineResult(results, total, failed)


def _timing_table(results: Sequence[StepResult]) -> str:
    width = max(len(r.title) for r in results) if results else 0
    lines = ["step timings:"]
    for r in results:
        took = format_seconds(r.seconds) if r.status != "not run" else "-"
        lines.append(f"  {r.title:<{width}}  {r.status:<7}  {took:>12}")
    return "\n".join(lines)
