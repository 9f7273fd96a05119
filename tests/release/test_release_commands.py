"""The real command runner: output to the log and the console, captured data, failures, servers."""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path

import pytest

from release.commands import SubprocessRunner
from release.errors import CommandFailed

PY = sys.executable


def test_output_goes_to_the_log_and_the_console(tmp_path: Path) -> None:
    stream = io.StringIO()
    log = tmp_path / "logs" / "01-x.log"
    result = SubprocessRunner(stream=stream).run([PY, "-c", "print('one'); print('two')"], log=log)
    assert result.returncode == 0
    assert stream.getvalue() == "    | one\n    | two\n"
    text = log.read_text()
    assert "one\ntwo\n" in text and "[exit status 0]" in text


def test_capture_keeps_stdout_as_data_and_shows_stderr(tmp_path: Path) -> None:
    stream = io.StringIO()
    code = "import sys; print('{\"a\": 1}'); print('progress', file=sys.stderr)"
    result = SubprocessRunner(stream=stream).run([PY, "-c", code], log=tmp_path / "x.log", capture=True)
    assert result.stdout == '{"a": 1}\n'
    assert stream.getvalue() == "    | progress\n"


def test_quiet_runner_writes_only_the_log(tmp_path: Path) -> None:
    stream = io.StringIO()
    SubprocessRunner(echo=False, stream=stream).run([PY, "-c", "print('hidden')"], log=tmp_path / "x.log")
    assert stream.getvalue() == "" and "hidden" in (tmp_path / "x.log").read_text()


def test_failure_names_the_command_status_and_log(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    with pytest.raises(CommandFailed) as exc:
        SubprocessRunner(echo=False).run([PY, "-c", "raise SystemExit(7)"], log=log)
    assert exc.value.returncode == 7 and str(log) in str(exc.value) and "status 7" in str(exc.value)
    result = SubprocessRunner(echo=False).run([PY, "-c", "raise SystemExit(7)"], log=log, check=False)
    assert result.returncode == 7


def test_extra_environment_is_added_to_the_inherited_one(tmp_path: Path) -> None:
    code = "import os; print(os.environ['H7_TEST'], 'PATH' in os.environ)"
    out = SubprocessRunner(echo=False).run(
        [PY, "-c", code], log=tmp_path / "x.log", env={"H7_TEST": "yes"}, capture=True
    )
    assert out.stdout.split() == ["yes", "True"]


def test_started_process_is_stopped(tmp_path: Path) -> None:
    proc = SubprocessRunner().start(
        [PY, "-c", "import time; print('up', flush=True); time.sleep(60)"], log=tmp_path / "s.log"
    )
    deadline = time.monotonic() + 30
    while "up" not in (tmp_path / "s.log").read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None
    status = proc.stop(timeout=10)
    assert status is not None and proc.poll() is not None
