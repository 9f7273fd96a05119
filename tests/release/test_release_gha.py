"""The run summary of release.yml: recorded results -> the Markdown table; the CLI around it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from release_fakes import make_plan, write_fake_wheel

from release import cli, gha
from release.errors import UsageError


def record(tmp: Path, job: str, stage: str, outcome: str, wheel_dir: Path | None = None) -> None:
    args = ["record-result", "--job", job, "--stage", stage, "--outcome", outcome, "--out", str(tmp / "results")]
    if wheel_dir is not None:
        args += ["--wheel-dir", str(wheel_dir)]
    assert cli.main(args) == 0


def test_summary_table_lists_failures_first_and_counts(tmp_path: Path) -> None:
    plan = make_plan(variants=("torch2.13-cpu", "torch2.14-cu130"), platforms=("linux-x86_64",))
    wheels = tmp_path / "wh"
    write_fake_wheel(wheels, "torch2.13-cpu")
    record(tmp_path, "torch2.13-cpu-linux-x86_64", "build", "success", wheels)
    record(tmp_path, "torch2.13-cpu-linux-x86_64", "test", "success")
    record(tmp_path, "torch2.14-cu130-linux-x86_64", "build", "failure")
    text = gha.summary_markdown(plan, gha.load_results(tmp_path / "results"))
    assert "**2 jobs planned: 1 built, 1 failed, 0 without a result; 0 failed their tests.**" in text
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert rows[0].startswith("| `torch2.14-cu130-linux-x86_64` |") and "❌ failed" in rows[0]
    assert "✅ built" in rows[1] and "✅ passed" in rows[1] and "causal_conv1d-1.7.0.post1+cpu.torch2.13" in rows[1]


def test_summary_cli_fails_on_missing_results_when_asked(tmp_path: Path, capsys) -> None:
    plan = make_plan(variants=("torch2.13-cpu",), platforms=("linux-x86_64", "windows-amd64"))
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    record(tmp_path, "torch2.13-cpu-linux-x86_64", "build", "success")
    out = tmp_path / "summary.md"
    args = ["summary", "--plan", str(tmp_path / "plan.json"), "--results", str(tmp_path / "results"), "--out", str(out)]
    assert cli.main(args) == 0
    assert "1 without a result" in out.read_text()
    assert cli.main([*args, "--fail-on-failure"]) == 1
    assert "torch2.13-cpu-windows-amd64" in capsys.readouterr().err


def test_summary_appends_to_github_step_summary(tmp_path: Path, monkeypatch) -> None:
    plan = make_plan(variants=("torch2.13-cpu",), platforms=("linux-x86_64",))
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    summary = tmp_path / "step-summary.md"
    summary.write_text("## Build plan\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert cli.main(["summary", "--plan", str(tmp_path / "plan.json"), "--results", str(tmp_path / "none")]) == 0
    text = summary.read_text()
    assert text.startswith("## Build plan\n## Wheel builds")


@pytest.mark.parametrize(
    ("stage", "outcome", "message"),
    [("deploy", "success", "Invalid --stage"), ("build", "passed", "Invalid --outcome")],
)
def test_result_record_rejects_bad_values(stage: str, outcome: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        gha.result_record("x", stage, outcome)


def test_unreadable_result_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "build-x.json").write_text("{not json")
    with pytest.raises(UsageError, match="build-x.json"):
        gha.load_results(tmp_path)
