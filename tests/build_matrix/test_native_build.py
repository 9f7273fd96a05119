"""Native builds of real jobs: the CPU job (torch 2.13.0) and the CUDA 13.0 job with one arch.

Both wheels must build, pass every check, install into a fresh venv and import (the CUDA one on
a machine without a GPU). Bad input must fail with a clear message and leave --out empty.
The wheels are cached per source state (build/test-wheels/), so only the first run compiles.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import zipfile
from pathlib import Path

import pytest

import causal_conv1d_contract as contract
from build_matrix import wheelcheck

CPU_JOB = "torch2.13-cpu-linux-x86_64"
CUDA_JOB = "torch2.14-cu130-linux-x86_64"
REPO = Path(__file__).resolve().parents[2]
VENVS = REPO / "build" / "test-wheels" / "venvs"

pytestmark = pytest.mark.slow


def _report(wheel: Path) -> dict:
    found = sorted(wheel.parent.parent.glob(f"{wheel.parent.name}.report.json"))
    return json.loads(found[0].read_text()) if found else {}


def _build_record(wheel: Path) -> dict:
    with zipfile.ZipFile(wheel) as zf:
        return json.loads(zf.read(f"{contract.DIST_NAME}/{contract.BUILD_INFO_FILENAME}"))


def _note_compile_time(wheel: Path, timings, key: str) -> None:
    report = _report(wheel)
    if report.get("compile_s"):
        timings[key] = report["compile_s"]


def _run_in_venv(py: Path, code: str, cwd: Path) -> str:
    """Run ``code`` with the venv's python; its stdout (the test fails when it fails)."""
    proc = subprocess.run([str(py), "-c", code], capture_output=True, text=True, cwd=cwd)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _assert_all_checks_pass(wheel: Path, run_cli, *extra: str) -> None:
    proc = run_cli("check", "--require-cuobjdump", *extra, str(wheel))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "FAIL" not in proc.stdout


def _checked_build(wheel: Path, variant: str, run_cli, timings, key: str, *check_args: str):
    """``wheel`` is of ``variant`` and passes every check; its parsed name and build record (the compile
    time noted as ``timings[key]``)."""
    name = contract.parse_wheel_name(wheel.name)
    assert str(name.variant) == variant
    _assert_all_checks_pass(wheel, run_cli, *check_args)
    _note_compile_time(wheel, timings, key)
    return name, _build_record(wheel)


def _install_and_run(wheel: Path, torch_spec: str, code: str, fresh_venv, tmp_path: Path, timings, key: str) -> str:
    """Install ``wheel`` with ``torch_spec`` into a fresh venv and run ``code`` there; its stdout (the time
    both took noted as ``timings[key]``)."""
    start = time.monotonic()
    out = _run_in_venv(fresh_venv(tmp_path / "venv", torch_spec, str(wheel)), code, tmp_path)
    timings[key] = time.monotonic() - start
    return out


def test_cpu_wheel_builds_and_passes_checks(cpu_wheel: Path, run_cli, timings) -> None:
    name, record = _checked_build(cpu_wheel, "torch2.13-cpu", run_cli, timings, "cpu compile", "--job", CPU_JOB)
    assert all(p.endswith("_x86_64") for p in name.platforms)
    assert record["variant"] == "torch2.13-cpu" and record["with_cuda"] is False
    assert record["torch_version"].startswith("2.13.")


def test_cpu_wheel_installs_into_fresh_venv_and_runs(cpu_wheel: Path, fresh_venv, tmp_path: Path, timings) -> None:
    code = (
        "import torch, causal_conv1d\n"
        "from causal_conv1d import causal_conv1d_fn\n"
        "from causal_conv1d.causal_conv1d_interface import causal_conv1d_ref\n"
        "x = torch.randn(2, 8, 32); w = torch.randn(8, 4); b = torch.randn(8)\n"
        "out = causal_conv1d_fn(x, w, b, activation='silu')\n"
        "torch.testing.assert_close(out, causal_conv1d_ref(x, w, b, activation='silu'), rtol=1e-4, atol=1e-4)\n"
        "print(causal_conv1d.__version__)\n"
    )
    out = _install_and_run(cpu_wheel, "torch==2.13.0", code, fresh_venv, tmp_path, timings, "cpu install+import")
    assert out.strip() == f"{contract.PACKAGE_VERSION}+cpu.torch2.13"


def test_cuda_wheel_builds_and_passes_checks(cuda_wheel: Path, run_cli, timings) -> None:
    check_args = ("--job", CUDA_JOB, "--cuda-archs", "9.0")
    _, record = _checked_build(cuda_wheel, "torch2.14-cu130", run_cli, timings, "cuda compile (1 arch)", *check_args)
    # and the arch list really is checked: the job's full default list is not what was built
    proc = run_cli("check", "--job", CUDA_JOB, "--only", "cuda-archs", "--require-cuobjdump", str(cuda_wheel))
    assert proc.returncode == 11 and "cuda-archs" in proc.stdout
    assert record["cuda_version"].startswith("13.0") and record["with_cuda"] is True
    assert record["cuda_archs"] == ["9.0"]


def test_cuda_wheel_installs_and_imports_without_gpu(cuda_wheel: Path, fresh_venv, tmp_path: Path, timings) -> None:
    code = (
        "import torch, causal_conv1d\n"
        "assert hasattr(torch.ops.causal_conv1d, 'fwd'), 'ops not registered'\n"
        "print(causal_conv1d.__version__, torch.version.cuda, torch.cuda.is_available())\n"
    )
    out = _install_and_run(cuda_wheel, "torch==2.14.1", code, fresh_venv, tmp_path, timings, "cuda install+import")
    assert out.split()[:2] == [f"{contract.PACKAGE_VERSION}+cu130.torch2.14", "13.0"]


# --- bad input: a clear error, a distinct exit code, nothing in --out


def _assert_build_fails(run_cli, tmp_path: Path, args: list[str], code: int, *messages: str, **kwargs) -> None:
    """``build ARGS --out <tmp>/out`` exits with ``code``, says every one of ``messages`` and leaves --out empty."""
    out = tmp_path / "out"
    proc = run_cli("build", *args, "--out", str(out), **kwargs)
    assert proc.returncode == code, proc.stdout + proc.stderr
    for message in messages:
        assert message in proc.stderr, proc.stderr
    assert not out.exists() or not any(out.iterdir()), list(out.iterdir())


def test_unknown_job(run_cli, tmp_path: Path) -> None:
    # a per-minor job of a torch before the stable ABI: the plan has it, and the typo's close match names it
    args = ["--job", "torch2.9-cpu-linux-x86", "--native"]
    _assert_build_fails(run_cli, tmp_path, args, 3, "Unknown job", "torch2.9-cpu-linux-x86_64")


def test_native_flag_required(run_cli, tmp_path: Path) -> None:
    _assert_build_fails(run_cli, tmp_path, ["--job", CPU_JOB], 10, "add --native")


@pytest.mark.parametrize(
    ("job", "message"),
    [
        ("torch2.13-cpu-windows-amd64", "is a windows job"),  # native mode builds Linux jobs only
        ("torch2.13-cpu-linux-aarch64", "is for aarch64"),  # no cross-compiling
    ],
)
def test_job_for_another_platform(run_cli, tmp_path: Path, job: str, message: str) -> None:
    _assert_build_fails(run_cli, tmp_path, ["--job", job, "--native"], 10, message)


def test_bad_cuda_archs(run_cli, tmp_path: Path) -> None:
    args = ["--job", CUDA_JOB, "--native", "--cuda-archs", "sm_90"]
    _assert_build_fails(run_cli, tmp_path, args, 10, "Invalid CUDA arch", "'sm_90'")


def test_torch_not_installable(run_cli, tmp_path: Path) -> None:
    args = ["--job", CPU_JOB, "--native", "--torch-spec", "torch==0.0.1", "--torch-index-url", ""]
    _assert_build_fails(run_cli, tmp_path, args, 10, "installing torch==0.0.1 failed", "--torch-spec")


def test_compiler_missing(cpu_wheel: Path, run_cli, tmp_path: Path, clean_env: dict[str, str]) -> None:
    env = dict(clean_env, CXX=str(tmp_path / "no-such-c++"))
    args = ["--job", CPU_JOB, "--native", "--venv", str(VENVS / CPU_JOB), "--torch-index-url", ""]
    _assert_build_fails(run_cli, tmp_path, args, 10, "no C++ compiler found", env=env)


def test_wrong_torch_for_the_job(cuda_wheel: Path, run_cli, tmp_path: Path) -> None:
    # the CUDA build venv holds torch 2.14.1+cu130: the CPU 2.14 job must refuse it before compiling
    args = ["--job", "torch2.14-cpu-linux-x86_64", "--native", "--venv", str(VENVS / CUDA_JOB)]
    args += ["--torch-spec", "torch==2.14.1", "--torch-index-url", ""]
    _assert_build_fails(run_cli, tmp_path, args, 10, "is a cu130 build, the job needs cpu")


def test_no_cuda_toolkit(cuda_wheel: Path, run_cli, tmp_path: Path, clean_env: dict[str, str]) -> None:
    env = dict(clean_env, CUDA_HOME=str(tmp_path / "no-cuda"))
    args = ["--job", CUDA_JOB, "--native", "--venv", str(VENVS / CUDA_JOB), "--cuda-archs", "9.0"]
    args += ["--torch-index-url", ""]
    _assert_build_fails(run_cli, tmp_path, args, 10, f"CUDA_HOME={tmp_path / 'no-cuda'} does not exist", env=env)


def test_source_hash_tracks_sources(tmp_path: Path) -> None:
    from build_matrix.wheel_cache import source_hash

    for rel in ("csrc", "causal_conv1d", "build_support"):
        (tmp_path / rel).mkdir()
        (tmp_path / rel / "a.txt").write_text(rel)
    (tmp_path / "setup.py").write_text("setup()")
    first = source_hash(tmp_path)
    (tmp_path / "causal_conv1d" / "_C.so").write_bytes(b"build product")  # ignored
    (tmp_path / "causal_conv1d" / contract.BUILD_INFO_FILENAME).write_text("{}")  # ignored
    assert source_hash(tmp_path) == first
    (tmp_path / "csrc" / "a.txt").write_text("changed")
    assert source_hash(tmp_path) != first


def test_checks_run_on_the_native_wheel_report(cpu_wheel: Path) -> None:
    report = _report(cpu_wheel)
    if not report:
        pytest.skip("wheel came from an older cache without a report")
    assert report["wheel"] == str(cpu_wheel)
    assert {c["check"] for c in report["checks"]} == set(wheelcheck.CHECKS)
    assert all(c["status"] != "fail" for c in report["checks"])
    assert report["platform"] in cpu_wheel.name
    assert os.path.basename(report["wheel"]) == cpu_wheel.name
