"""The step runner: order, timings, the failing step named, cleanup always run."""

from __future__ import annotations

import io

from release.errors import CommandFailed, StepFailed
from release.pipeline import Step, format_seconds, run_pipeline


class Clock:
    """Each call advances 1.5 s: timings are deterministic."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 1.5
        return self.t


def test_runs_steps_in_order_and_reports_timings() -> None:
    done: list[str] = []
    stream = io.StringIO()
    steps = [Step(k, f"step {k}", lambda k=k: done.append(k) or f"{k} done") for k in ("a", "b", "c")]
    result = run_pipeline(steps, name="demo", stream=stream, clock=Clock())
    assert done == ["a", "b", "c"]
    assert result.ok and result.failed is None
    assert [s.status for s in result.steps] == ["ok", "ok", "ok"]
    assert all(s.seconds == 1.5 for s in result.steps)
    text = stream.getvalue()
    assert "[1/3] step a" in text and "[3/3] step c" in text
    assert "ok in 1.5 s: b done" in text
    assert "demo finished: 3 steps in" in text
    assert "step timings:" in text


def test_first_failure_stops_and_names_the_step() -> None:
    ran: list[str] = []
    cleaned: list[bool] = []

    def boom() -> str:
        raise StepFailed("b", "the wheel is missing")

    steps = [
        Step("a", "first", lambda: ran.append("a") or None),
        Step("b", "second", boom),
        Step("c", "third", lambda: ran.append("c") or None),
    ]
    stream = io.StringIO()
    result = run_pipeline(steps, name="local release", stream=stream, finally_=lambda: cleaned.append(True))
    assert ran == ["a"]
    assert cleaned == [True]
    assert not result.ok and result.failed is not None and result.failed.key == "b"
    assert [s.status for s in result.steps] == ["ok", "failed", "not run"]
    text = stream.getvalue()
    assert "local release FAILED at step 2/3 'second'" in text
    assert "reason: the wheel is missing" in text
    assert result.to_json()["failed_step"] == "b"


def test_command_failure_message_points_at_the_log(tmp_path) -> None:
    log = tmp_path / "03-check.log"

    def fails() -> str:
        raise CommandFailed(["python", "-m", "build_matrix", "check", "x.whl"], 11, log)

    stream = io.StringIO()
    result = run_pipeline([Step("check", "check the wheels", fails)], stream=stream)
    assert result.failed is not None
    assert "status 11" in result.failed.detail and str(log) in result.failed.detail


def test_cleanup_failure_does_not_hide_the_result() -> None:
    def bad_cleanup() -> None:
        raise OSError("port still busy")

    stream = io.StringIO()
    result = run_pipeline([Step("a", "only", lambda: None)], stream=stream, finally_=bad_cleanup)
    assert result.ok
    assert "warning: cleanup failed: port still busy" in stream.getvalue()


def test_format_seconds() -> None:
    assert format_seconds(0.04) == "0.0 s"
    assert format_seconds(59.94) == "59.9 s"
    assert format_seconds(61) == "1 min 01 s"
    assert format_seconds(3725) == "62 min 05 s"
