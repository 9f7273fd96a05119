"""test-wheel (release.yml's test job) with a fake runner: the venv, the install, the checks."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from release_fakes import FakeRunner, doctor_json, smoke_json, write_fake_wheel

from release import cli
from release.errors import UsageError
from release.wheeltest import TEST_REQUIREMENTS, WheelTest, WheelTestOptions


def fake(variant: str = "torch2.13-cpu", *, version: str | None = None, doctor: str | None = None) -> FakeRunner:
    def smoke(argv, kw):
        data = json.loads(smoke_json(variant))
        if version:
            data["version"] = version
        return json.dumps(data)

    answer = doctor_json(variant) if doctor is None else doctor
    return FakeRunner({"script": smoke, "causal_conv1d": lambda argv, kw: answer})


def test_installs_with_its_torch_and_runs_the_checks(tmp_path: Path) -> None:
    wheel = write_fake_wheel(tmp_path / "wheel", "torch2.14-cu130", "manylinux_2_28_x86_64")
    runner = fake("torch2.14-cu130")
    opts = WheelTestOptions(
        wheel=wheel,
        work_dir=tmp_path / "work",
        torch_index_url="https://download.pytorch.org/whl/cu130",
        tests=(Path("tests/release"),),
    )
    stream = io.StringIO()
    result = WheelTest(opts, runner, stream=stream).run()
    assert result.ok, stream.getvalue()
    assert runner.keys() == ["venv", "pip", "script", "causal_conv1d", "pytest"]
    pip = runner.calls[1]
    assert str(wheel.resolve()) in pip and "https://download.pytorch.org/whl/cu130" in pip
    assert all(req in pip for req in TEST_REQUIREMENTS)
    smoke = runner.calls[2]
    assert smoke[1] == "-I"  # isolated: the source tree is never imported
    pytest_call, pytest_kw = runner.calls[4], runner.kwargs[4]
    suite = Path(pytest_kw["cwd"])
    assert (suite / "tests/release/test_release_wheeltest.py").is_file()  # a scratch copy of the tests
    assert (suite / "pyproject.toml").is_file() and (suite / "tests/conftest.py").is_file()
    assert "not gpu and not slow" in pytest_call
    # this very folder's test modules import `release` (the source tree's tooling): left out
    assert "--ignore=tests/release/test_release_wheeltest.py" in pytest_call
    assert "torch>=2.14,<2.15" in stream.getvalue()


def _run_cpu_wheel_test(tmp_path: Path, runner):
    """The wheel test of a fake CPU wheel with ``runner`` standing in for the commands."""
    wheel = write_fake_wheel(tmp_path, "torch2.13-cpu")
    return WheelTest(WheelTestOptions(wheel=wheel, work_dir=tmp_path / "w"), runner, stream=io.StringIO()).run()


def test_a_version_mismatch_fails_the_run_step(tmp_path: Path) -> None:
    result = _run_cpu_wheel_test(tmp_path, fake(version="1.6.0"))
    assert result.failed is not None and result.failed.key == "run"
    assert "is not the wheel's" in result.failed.detail


def test_silent_doctor_fails_the_guard_step(tmp_path: Path) -> None:
    result = _run_cpu_wheel_test(tmp_path, fake(doctor=""))
    assert result.failed is not None and result.failed.key == "guard"


@pytest.mark.parametrize(
    ("name", "tests", "message"),
    [
        ("not-a-wheel.whl", (), "Invalid wheel filename"),  # breaks the wheel contract
        (None, (Path("tests/no-such-dir"),), "Invalid --tests path"),  # a typo in --tests
    ],
)
def test_bad_input(tmp_path: Path, name, tests, message) -> None:
    wheel = tmp_path / name if name else write_fake_wheel(tmp_path, "torch2.13-cpu")
    with pytest.raises(UsageError, match=message):
        WheelTest(WheelTestOptions(wheel=wheel, tests=tests), FakeRunner())


def test_cli_missing_wheel_exits_2(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "causal_conv1d-1.7.0+cpu.torch2.13-cp39-abi3-linux_x86_64.whl"
    assert cli.main(["test-wheel", str(missing)]) == 2
    assert "no such file" in capsys.readouterr().err
