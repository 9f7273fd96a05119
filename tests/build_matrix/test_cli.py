"""The command line: --help everywhere, typos, exit codes, tracebacks, lazy build/check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from build_matrix import errors

REPO = Path(__file__).resolve().parents[2]
COMMANDS = [
    [],
    ["plan"],
    ["emit"],
    ["emit", "matrix"],
    ["emit", "env"],
    ["coverage"],
    ["diff"],
    ["refresh"],
    ["validate"],
    ["build"],
    ["check"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "top")
def test_help_on_every_command(cli, command: list[str]) -> None:
    res = cli(*command, "--help")
    assert res.code == 0, res.err
    assert res.out.startswith("usage: python -m build_matrix")


def test_help_lists_all_commands(cli) -> None:
    out = cli("--help").out
    for name in ("plan", "emit", "coverage", "diff", "refresh", "validate", "build", "check"):
        assert name in out


@pytest.mark.parametrize(
    "args,hint",
    [
        (["plna"], "Perhaps you meant 'plan'?"),  # a typo'd subcommand
        (["plan", "--fromat", "json"], "Perhaps you meant '--format'"),  # a typo'd option
        (["plan", "--acel", "cpu"], "Perhaps you meant '--accel'"),
        (["plan", "--format", "jsn"], "Perhaps you meant 'json'?"),  # a typo'd choice
        (["emit", "matirx"], "Perhaps you meant 'matrix'?"),
        (["coverage", "--format", "markdwon"], "Perhaps you meant 'markdown'?"),
    ],
)
def test_typos_get_suggestions(cli, args: list[str], hint: str) -> None:
    res = cli(*args)
    assert res.code == errors.EXIT_USAGE
    assert hint in res.err


@pytest.mark.parametrize(
    "args,code,text",
    [
        (["plan", "--torch", "2.99"], 3, "Unknown torch: '2.99'"),
        (["plan", "--accel", "cu12.8"], 3, "Perhaps you meant 'cu128'"),
        (["plan", "--platform", "linux-amd64"], 3, "'linux-x86_64'"),
        (["plan", "--python", "3.13T"], 3, "Perhaps you meant '3.13t'"),
        (["coverage", "--accel", "rocm6.4"], 3, "Unknown accel: 'rocm6.4'"),
        (["emit", "env", "--job", "torch2.7-cu128"], 3, "Unknown job"),
        (["plan", "--data", "/nonexistent/compat.toml"], 4, "file not found"),
        (["diff", "/nonexistent.json", "current"], 6, "Plan file not found"),
    ],
)
def test_exit_codes(cli, args: list[str], code: int, text: str) -> None:
    res = cli(*args)
    assert res.code == code, res.err
    assert text in res.err
    assert res.err.startswith("error: ") and "Traceback" not in res.err


def test_traceback_only_when_asked(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "Traceback" not in cli("plan", "--torch", "9.9").err
    assert "Traceback" in cli("plan", "--torch", "9.9", "--traceback").err
    monkeypatch.setenv("BUILD_MATRIX_TRACEBACK", "1")
    assert "Traceback" in cli("plan", "--torch", "9.9").err
    monkeypatch.setenv("BUILD_MATRIX_TRACEBACK", "on")  # the contract's settings parser: its rules
    assert "Traceback" in cli("plan", "--torch", "9.9").err
    monkeypatch.setenv("BUILD_MATRIX_TRACEBACK", "maybe")
    bad = cli("plan", "--torch", "9.9")
    assert bad.code == 2 and "Invalid value for BUILD_MATRIX_TRACEBACK (expected TRUE or FALSE): 'maybe'" in bad.err


def test_internal_errors_are_short(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    import build_matrix.coverage

    def boom(_plan):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(build_matrix.coverage, "markdown", boom)
    res = cli("coverage")
    assert res.code == errors.EXIT_INTERNAL
    assert "internal error: RuntimeError: kaboom" in res.err and "--traceback" in res.err
    assert "Traceback" not in res.err


def test_broken_build_module_does_not_break_the_rest(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "build_matrix.native", None)  # import now raises ImportError
    assert cli("plan", "--torch", "2.7").code == 0
    assert cli("check", "--help").code == 0
    res = cli("build", "--job", "torch2.13-cpu-linux-x86_64", "--native", "--out", "x")
    assert res.code == errors.EXIT_INTERNAL
    assert "The 'build' command is unavailable: importing build_matrix.native failed" in res.err
    assert cli("--help").code == 0


def test_distinct_exit_codes() -> None:
    classes = [
        errors.UnknownValue,
        errors.DataError,
        errors.FetchError,
        errors.PlanFileError,
        errors.BuildError,
        errors.CheckError,
    ]
    codes = [c.exit_code for c in classes]
    assert len(set(codes)) == len(codes)
    assert not {errors.EXIT_OK, errors.EXIT_INTERNAL, errors.EXIT_USAGE, errors.EXIT_DIFFERENT} & set(codes)
    assert errors.UnknownJob.exit_code == errors.UnknownValue.exit_code


def test_python_dash_m_entry_point(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "build_matrix", "plan", "--format", "jobs", "--torch", "2.13", "--accel", "cpu"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [
        "stable2.10-cpu-linux-x86_64",
        "stable2.10-cpu-linux-aarch64",
        "stable2.10-cpu-windows-amd64",
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "build_matrix", "plan", "--accel", "cuda"], cwd=REPO, capture_output=True, text=True
    )
    assert proc.returncode == 3 and "Unknown accel: 'cuda'" in proc.stderr
