"""Fast tests of native mode's pieces: the build environment, ccache, MAX_JOBS, repair."""

from __future__ import annotations

import dataclasses
import os
import stat
from pathlib import Path

import pytest

import causal_conv1d_contract as contract
from build_matrix import build_venv, native, repair, wheelcheck
from build_matrix.plan import make_plan


@pytest.fixture(scope="module")
def plan():
    """The per-minor plan: its torch 2.13/2.14 jobs are the legacy builds (``build --job`` still takes them)."""
    return make_plan(stable_abi=False)


def _opts(tmp_path: Path) -> native.BuildOptions:
    return native.BuildOptions(out=tmp_path / "out")


def test_build_env_for_cpu_job(plan, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(contract.ENV_FORCE_CXX11_ABI, "FALSE")  # a stray override must not reach the build
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0")
    job = plan.job("torch2.13-cpu-linux-x86_64")
    env = native._build_env(job, _opts(tmp_path), tmp_path, None, 2, 1)
    assert env[contract.ENV_LOCAL_VERSION] == "cpu.torch2.13"
    assert env[contract.ENV_FORCE_BUILD] == "TRUE"
    assert env[contract.ENV_SKIP_CUDA_BUILD] == "TRUE"
    assert contract.ENV_FORCE_CXX11_ABI not in env
    assert "TORCH_CUDA_ARCH_LIST" not in env
    assert env["MAX_JOBS"] == "2" and env["NVCC_THREADS"] == "1"
    cfg = Path(env["DIST_EXTRA_CONFIG"]).read_text()
    assert f"build_base = {tmp_path / 'st-build'}" in cfg and f"egg_base = {tmp_path / 'st-egg'}" in cfg


def test_build_env_for_cuda_job(plan, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(contract.ENV_SKIP_CUDA_BUILD, "TRUE")  # would silently drop the CUDA kernels
    job = plan.job("torch2.14-cu130-linux-x86_64")
    env = native._build_env(job, _opts(tmp_path), tmp_path, "9.0", 1, 2)
    assert env[contract.ENV_LOCAL_VERSION] == "cu130.torch2.14"
    assert contract.ENV_SKIP_CUDA_BUILD not in env
    assert env["TORCH_CUDA_ARCH_LIST"] == "9.0"
    assert env[contract.ENV_STABLE_ABI] == "FALSE"


def test_build_env_for_stable_jobs(tmp_path: Path) -> None:
    stable = make_plan()
    env = native._build_env(stable.job("stable2.10-cu13-linux-x86_64"), _opts(tmp_path), tmp_path, "9.0", 1, 2)
    assert env[contract.ENV_STABLE_ABI] == "TRUE" and env[contract.ENV_LOCAL_VERSION] == "cu13.stable2.10"
    assert contract.ENV_SKIP_CUDA_BUILD not in env and env["TORCH_CUDA_ARCH_LIST"] == "9.0"
    env = native._build_env(stable.job("stable2.10-cpu-linux-x86_64"), _opts(tmp_path), tmp_path, None, 2, 1)
    assert env[contract.ENV_STABLE_ABI] == "TRUE" and env[contract.ENV_LOCAL_VERSION] == "cpu.stable2.10"
    assert env[contract.ENV_SKIP_CUDA_BUILD] == "TRUE"


def test_verify_torch_of_a_stable_job(tmp_path: Path) -> None:
    job = make_plan().job("stable2.10-cpu-linux-x86_64")
    # the planned torch, and any other CPU torch >= 2.10 (the rehearsal builds against 2.13): accepted
    for version in ("2.14.1+cpu", "2.13.0+cpu", "2.10.0"):
        build_venv.verify_torch(job, {"version": version, "cuda": None, "cxx11_abi": True}, _opts(tmp_path))
    build_venv.verify_torch(job, {"version": "2.13.0+cpu", "cuda": None, "cxx11_abi": False}, _opts(tmp_path))
    with pytest.raises(native.BuildError, match="needs torch >= 2.10"):
        build_venv.verify_torch(job, {"version": "2.9.1+cpu", "cuda": None, "cxx11_abi": True}, _opts(tmp_path))
    # the CPU wheel loads on a CUDA torch (StableVariant.loads_on), but its job builds against a CPU one
    with pytest.raises(native.BuildError, match="for CPU torch, but the installed torch 2.14.1\\+cu130 is a CUDA 13"):
        build_venv.verify_torch(job, {"version": "2.14.1+cu130", "cuda": "13.0", "cxx11_abi": True}, _opts(tmp_path))
    cu13 = make_plan().job("stable2.10-cu13-linux-x86_64")
    build_venv.verify_torch(cu13, {"version": "2.14.1+cu130", "cuda": "13.0", "cxx11_abi": True}, _opts(tmp_path))
    with pytest.raises(
        native.BuildError, match="for CUDA 13 torch, but the installed torch 2.14.1\\+cu126 is a CUDA 12"
    ):
        build_venv.verify_torch(cu13, {"version": "2.14.1+cu126", "cuda": "12.6", "cxx11_abi": True}, _opts(tmp_path))


def test_ccache_shims_compilers(tmp_path: Path, monkeypatch) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "ccache"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    env = {"PATH": os.environ["PATH"]}
    assert native._ccache_env(tmp_path, env, "/usr/local/cuda/bin/nvcc") is True
    shim = tmp_path / "ccache-bin"
    assert env["PATH"].startswith(str(shim) + os.pathsep)
    assert (shim / "c++").resolve() == fake.resolve()
    assert env["PYTORCH_NVCC"] == f"{fake} /usr/local/cuda/bin/nvcc"


def test_no_ccache_leaves_env_alone(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    env = {"PATH": str(tmp_path)}
    assert native._ccache_env(tmp_path, env, None) is False
    assert env == {"PATH": str(tmp_path)}


def test_verify_torch_names_every_mismatch(plan, tmp_path: Path) -> None:
    job = plan.job("torch2.13-cpu-linux-x86_64")
    build_venv.verify_torch(job, {"version": "2.13.0+cpu", "cuda": None, "cxx11_abi": True}, _opts(tmp_path))
    with pytest.raises(native.BuildError) as err:
        build_venv.verify_torch(job, {"version": "2.12.1+cu126", "cuda": "12.6", "cxx11_abi": False}, _opts(tmp_path))
    text = str(err.value)
    assert "is not torch 2.13" in text and "cu126 build, the job needs cpu" in text and "needs True" in text
    assert "--torch-spec" in text


def test_atomic_move_leaves_no_partial(tmp_path: Path) -> None:
    src = tmp_path / "a.whl"
    src.write_bytes(b"wheel")
    final = native._atomic_move(src, tmp_path / "out")
    assert final.read_bytes() == b"wheel"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.whl"]


def test_repair_gives_a_manylinux_tag_and_keeps_checks_green(make_wheel, tmp_path: Path) -> None:
    wheel = make_wheel()
    result = repair.repair_linux(wheel, tmp_path / "repaired")
    assert result.repaired, result.note
    assert result.platform.startswith("manylinux_") and result.platform.endswith("_x86_64")
    assert result.wheel.name == wheel.name.replace("linux_x86_64", result.platform)
    failed = [r for r in wheelcheck.check_wheel(result.wheel) if r.status == "fail"]
    assert failed == []


def test_build_report_is_json_serialisable() -> None:
    import json

    report = native.BuildReport(job="torch2.13-cpu-linux-x86_64", compile_s=1.5)
    assert json.loads(json.dumps(dataclasses.asdict(report)))["compile_s"] == 1.5


def test_unreachable_torch_index_refuses_before_installing(tmp_path: Path, monkeypatch) -> None:
    """Without PyTorch's index, pip's configured ones would install another torch build (PyPI's Linux torch
    is a CUDA build, GBs) for the check after the install to refuse: the build refuses first, with the fix."""
    job = make_plan().job("stable2.10-cpu-linux-x86_64")
    monkeypatch.setattr(build_venv, "_reachable", lambda url, timeout=8.0: False)
    ran: list[list[str]] = []
    monkeypatch.setattr(build_venv, "run_step", lambda cmd, **kw: ran.append(cmd))
    with pytest.raises(native.BuildError) as err:
        build_venv.install_torch(tmp_path / "py", job, _opts(tmp_path))
    assert ran == [], "nothing is installed before the refusal"
    text = str(err.value)
    assert f"{job.torch_index_url} is unreachable" in text and "CUDA build" in text
    assert f"--torch-spec 'torch=={job.torch_version}+cpu'" in text and "--torch-index-url" in text
    # naming the torch (or the index) is the way through: pip's configured indexes are then used
    build_venv.install_torch(tmp_path / "py", job, dataclasses.replace(_opts(tmp_path), torch_spec="torch==2.13.0"))
    assert ran and ran[-1][-1] == "torch==2.13.0" and "--extra-index-url" not in ran[-1]
    # a CUDA job goes on with pip's configured indexes (a mirror may hold its build; checked after the install)
    ran.clear()
    cuda_job = make_plan().job("stable2.10-cu13-linux-x86_64")
    build_venv.install_torch(tmp_path / "py", cuda_job, _opts(tmp_path))
    assert ran and ran[-1][-1] == f"torch=={cuda_job.torch_version}" and "--extra-index-url" not in ran[-1]
