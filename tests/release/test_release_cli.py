"""The command line: help, bad options, and a local release that stops at its plan step."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from release import cli

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("command", ["local", "test-wheel", "fetch-site", "record-result", "summary"])
def test_every_command_has_help(command: str, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main([command, "--help"])
    assert exc.value.code == 0
    assert f"python -m release {command}" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["local", "--port", "70000"], "port out of range"),  # out of range
        (["local", "--max-jobs", "0"], "must be at least 1"),  # nonsense
        (["local", "--variants", ","], "comma-separated list"),  # empty list
        (["local", "--cuda-arch", "9.0"], "unrecognized arguments: --cuda-arch"),  # a typo is never a prefix match
        (["record-result", "--job", "x", "--stage", "deploy", "--outcome", "success", "--out", "r"], "invalid choice"),
    ],
)
def test_bad_options_exit_2_and_name_the_value(argv: list[str], message: str, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_local_with_an_unknown_variant_stops_at_plan(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "release",
            "local",
            "--variants",
            "torch2.13-cpux,torch2.99-cpu",
            "--work-dir",
            str(tmp_path / "work"),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAILED at step 1/7 'plan the build matrix" in proc.stdout
    assert "torch2.13-cpux" in proc.stdout
    assert (tmp_path / "work" / "report.json").is_file()
    assert (tmp_path / "work" / "plan.json").is_file()  # the plan itself was fine and is kept
