"""pyproject.toml's [tool.cibuildwheel]: valid under cibuildwheel's own schema, read by cibuildwheel,
and its repair commands are exactly build_matrix.repair's."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import cibuildwheel  # noqa: F401 - run below as `python -m cibuildwheel`; required (requirements-dev.txt)
import pytest
import tomllib
from validate_pyproject import api as validate_pyproject_api

from build_matrix import repair

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pyproject() -> dict:
    with open(REPO / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)


@pytest.fixture(scope="module")
def validator():
    v = validate_pyproject_api.Validator()
    # The cibuildwheel plugin (entry point of the cibuildwheel package) must be among the tool schemas,
    # otherwise [tool.cibuildwheel] would be accepted unchecked.
    assert "cibuildwheel" in [getattr(p, "tool", None) for p in v._plugins], (
        "cibuildwheel's schema plugin is not loaded"
    )
    return v


def test_pyproject_valid_including_cibuildwheel_section(pyproject: dict, validator) -> None:
    assert "cibuildwheel" in pyproject["tool"]
    validator(copy.deepcopy(pyproject))


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("build-frontend",), "setuptools"),  # not a frontend cibuildwheel knows
        (("linux", "manylinux-x86_64-imag"), "manylinux_2_28"),  # typo in a key
        (("build-verbosity",), 7),  # out of range
    ],
)
def test_schema_rejects_a_broken_section(pyproject: dict, validator, path: tuple[str, ...], value) -> None:
    from validate_pyproject.error_reporting import ValidationError

    data = copy.deepcopy(pyproject)
    node = data["tool"]["cibuildwheel"]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(ValidationError):
        validator(data)


def test_repair_commands_are_build_matrix_repairs(pyproject: dict) -> None:
    cfg = pyproject["tool"]["cibuildwheel"]
    assert cfg["linux"]["repair-wheel-command"] == repair.auditwheel_command()
    assert cfg["windows"]["repair-wheel-command"] == repair.delvewheel_command()
    for lib in ("libtorch_cpu.so", "libc10.so", "libcudart.so.*", "libcuda.so.*", "libnvrtc.so.*", "libgomp.so.*"):
        assert f"--exclude '{lib}'" in cfg["linux"]["repair-wheel-command"]


def test_build_frontend_has_no_isolation_and_audit_runs_the_check(pyproject: dict) -> None:
    cfg = pyproject["tool"]["cibuildwheel"]
    assert cfg["build-frontend"] == {"name": "build", "args": ["--no-isolation"]}
    assert cfg["audit-command"] == "python -m build_matrix check {wheel}"
    for tool in ("abi3audit", "check-wheel-contents", "pyelftools"):
        assert tool in cfg["audit-requires"]


@pytest.mark.parametrize(
    ("platform", "identifier", "archs"),
    [("linux", "cp310-manylinux_x86_64", "x86_64"), ("windows", "cp310-win_amd64", "AMD64")],
)
def test_cibuildwheel_reads_the_configuration(tmp_path: Path, platform: str, identifier: str, archs: str) -> None:
    """cibuildwheel itself loads pyproject.toml (its options parser) with a job-style CIBW_BUILD."""
    env = dict(os.environ, CIBW_BUILD=identifier, CIBW_ARCHS=archs)
    proc = subprocess.run(
        [sys.executable, "-m", "cibuildwheel", "--print-build-identifiers", "--platform", platform, str(REPO)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.split() == [identifier]
