"""Real pip, real HTTP, a fresh venv: `pip install` of the sdist with the index first."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import causal_conv1d_contract as contract

from .conftest import (
    CPU_LABEL,
    CPU_VARIANT,
    INDEX_FAILURES,
    install_env,
    pip_install_sdist_args,
    run_in_pty,
    sdist_requirement_args,
)

pytestmark = pytest.mark.slow

SMOKE = (
    "import importlib.metadata as m, json, torch, causal_conv1d as c\n"
    "from causal_conv1d import causal_conv1d_fn\n"
    "x = torch.randn(2, 4, 16); w = torch.randn(4, 3)\n"
    "y = causal_conv1d_fn(x, w, None)\n"
    "assert y.shape == x.shape\n"
    "print(json.dumps({'version': c.__version__, 'dist': m.version('causal-conv1d'),"
    " 'prebuilt': m.distribution('causal-conv1d').read_text('PREBUILT.json')}))\n"
)


def compiler_shims(tmp_path: Path) -> tuple[Path, Path]:
    """c++/gcc/cc/g++/nvcc/ninja that record being called and fail: 'compiles nothing' is checkable."""
    shims, marker = tmp_path / "shims", tmp_path / "compiler-called"
    shims.mkdir()
    for name in ("c++", "g++", "gcc", "cc", "nvcc", "ninja", "clang", "clang++"):
        p = shims / name
        p.write_text(f'#!/bin/sh\necho "{name} $*" >> "{marker}"\nexit 1\n')
        p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return shims, marker


def shim_env(tmp_path: Path, base: dict[str, str]) -> tuple[dict[str, str], Path]:
    shims, marker = compiler_shims(tmp_path)
    env = dict(base)
    env["PATH"] = f"{shims}{os.pathsep}{env.get('PATH', '')}"
    env["CC"], env["CXX"] = str(shims / "cc"), str(shims / "c++")
    return env, marker


def test_sdist_install_takes_prebuilt_wheel_compiles_nothing(
    venv_clean, index, sdist_dir, build_deps, tmp_path, capsys
):
    """Also the isolation case: torch is only in the target venv, not in pip's build env."""
    env, marker = shim_env(tmp_path, install_env(tmp_path, index.url))
    t0 = time.monotonic()
    proc = venv_clean.pip(*pip_install_sdist_args(sdist_dir, build_deps), env=env)
    elapsed = time.monotonic() - t0
    out = proc.stdout + proc.stderr
    assert f"using prebuilt wheel causal_conv1d-{contract.PACKAGE_VERSION}+{CPU_LABEL}-" in out, out[-4000:]
    assert "(nothing compiled)" in out
    assert "pip builds in an isolated environment" in out and str(venv_clean.path) in out  # which torch, why
    assert "torch: 2.13" in out
    assert not marker.exists(), marker.read_text()
    assert any(r.startswith(f"/whl/{CPU_VARIANT}/{contract.PROJECT_NAME}/") for r in index.requests), index.requests
    res = venv_clean.py(SMOKE)
    import json

    info = json.loads(res.stdout.strip().splitlines()[-1])
    assert info["version"] == f"{contract.PACKAGE_VERSION}+{CPU_LABEL}"  # from the build record
    assert info["dist"] == contract.PACKAGE_VERSION  # relabelled for pip's sdist/cache consistency check
    assert json.loads(info["prebuilt"])["filename"].startswith(f"causal_conv1d-{contract.PACKAGE_VERSION}+{CPU_LABEL}")
    with capsys.disabled():
        print(f"\n[build_support] sdist install with prebuilt wheel: {elapsed:.1f} s (torch already installed)")

    # The same sdist again with pip's wheel cache populated (pip checks the cached wheel's version
    # against the sdist's: a local label there would make this second install fail).
    venv_clean.uninstall()
    proc = venv_clean.pip(*pip_install_sdist_args(sdist_dir, build_deps), env=env)
    assert "Successfully installed causal-conv1d" in proc.stdout, proc.stdout[-3000:]


@pytest.mark.parametrize("mode,expect", [*INDEX_FAILURES, ("refused", "refused")])
def test_index_failures_stop_cleanly_when_prebuilt_only(
    venv_clean, index, refused_url, sdist_dir, build_deps, tmp_path, mode, expect
):
    """Each index failure reaches the fall-back decision and installs nothing; with
    CAUSAL_CONV1D_PREBUILT_ONLY=TRUE the fall-back is a clear stop instead of a compile
    (test_index_404_falls_back_to_a_local_build runs the compile once)."""
    url = refused_url if mode == "refused" else index.url
    index.mode = "ok" if mode == "refused" else mode
    index.stall_s = 4
    env, marker = shim_env(
        tmp_path, install_env(tmp_path, url, CAUSAL_CONV1D_PREBUILT_ONLY="TRUE", CAUSAL_CONV1D_INDEX_TIMEOUT="1.5")
    )
    proc = venv_clean.pip(*pip_install_sdist_args(sdist_dir, build_deps), env=env, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert expect in out.lower() if expect == "refused" else expect in out, out[-4000:]
    assert "CAUSAL_CONV1D_PREBUILT_ONLY=TRUE and no verified prebuilt wheel is available" in out, out[-4000:]
    assert "building locally" not in out, out[-4000:]  # one decision, said once: it does not compile
    assert not marker.exists()
    assert venv_clean.pip("show", contract.PROJECT_NAME, check=False).returncode != 0  # nothing installed


def test_force_build_skips_the_index_and_compiles(venv_clean, index, sdist_dir, build_deps, tmp_path):
    env, marker = shim_env(tmp_path, install_env(tmp_path, index.url, **{contract.ENV_FORCE_BUILD: "TRUE"}))
    proc = venv_clean.pip(*pip_install_sdist_args(sdist_dir, build_deps), env=env, check=False)
    out = proc.stdout + proc.stderr
    assert f"{contract.ENV_FORCE_BUILD}=TRUE: not looking for a prebuilt wheel; building locally" in out, out[-4000:]
    assert index.requests == []  # the index was not asked
    assert marker.exists()  # the (shimmed, failing) compiler was invoked: a local build was attempted
    assert proc.returncode != 0


def test_index_404_falls_back_to_a_local_build(venv_clean, index, sdist_dir, build_deps, tmp_path):
    """The real fallback: a local CPU build under pip's isolation, against the venv's torch."""
    index.mode = "404"
    env = install_env(tmp_path, index.url, MAX_JOBS="1")
    proc = venv_clean.pip(*pip_install_sdist_args(sdist_dir, build_deps), env=env, timeout=3600)
    out = proc.stdout + proc.stderr
    # torch 2.13: the stable family page, then the torch minor's page; both 404
    assert (
        f"no wheel for variant {CPU_VARIANT} ({index.url}whl/stable2.10-cpu/{contract.PROJECT_NAME}/: HTTP 404; "
        f"{index.url}whl/{CPU_VARIANT}/{contract.PROJECT_NAME}/: HTTP 404); building locally"
    ) in out
    assert "compiling against torch 2.13" in out  # the target torch made visible to the isolated build
    assert "local build" in out and "CPU-only build" in out
    res = venv_clean.py(SMOKE)
    import json

    info = json.loads(res.stdout.strip().splitlines()[-1])
    assert info["version"] == contract.PACKAGE_VERSION and info["prebuilt"] is None
    rec = venv_clean.py("import causal_conv1d._guard as g, json; print(json.dumps(g.read_build_record()))")
    record = json.loads(rec.stdout.strip().splitlines()[-1])
    # a local build against torch 2.13 (>= 2.10) is on the stable ABI by default
    assert record["variant"] == "stable2.10-cpu" and record["stable_abi_target"] == "2.10"
    assert record["with_cuda"] is False
    assert set(record) == set(contract.BUILD_INFO_KEYS)


# --- what the user sees at the frontend's DEFAULT verbosity --------------------------------------

NEW_PIP = [sys.executable, "-m", "pip"]  # this tree's dev pip (26.x), next to the venv's bundled 23.x
UV = Path(sys.executable).with_name("uv")
_FAILED = ("error: subprocess-exited-with-error", "did not run successfully", "Failed to build", "× Failed")


def _frontend_cmd(frontend: str, venv: Any, sdist_dir: Path, build_deps: Path) -> list[str]:
    """pip_old: the venv's own pip (python -m venv's bundled one, no warning relay); pip_new: this
    tree's pip driving the venv (--python); uv: uv pip, with the venv's torch visible to the build."""
    args = pip_install_sdist_args(sdist_dir, build_deps, verbose=False)
    if frontend == "pip_old":
        return [str(venv.python), "-m", "pip", *args]
    if frontend == "pip_new":
        return [*NEW_PIP, "--python", str(venv.python), *args]
    return [
        str(UV),
        "pip",
        "install",
        "--python",
        str(venv.python),
        "--no-index",
        "--find-links",
        str(sdist_dir),
        "--find-links",
        str(build_deps),
        "--no-build-isolation-package",
        contract.PROJECT_NAME,
        f"{contract.PROJECT_NAME}=={contract.PACKAGE_VERSION}",
    ]


def _frontend_env(tmp_path: Path, url: str, **extra: str) -> dict[str, str]:
    env = install_env(tmp_path, url, UV_CACHE_DIR=str(tmp_path / "uv-cache"), UV_NO_PROGRESS="1", **extra)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _venv_for(frontend: str, request: pytest.FixtureRequest) -> Any:
    if frontend == "uv":  # uv's isolated build cannot see the venv's torch: build in the venv itself
        return request.getfixturevalue("build_venv")
    return request.getfixturevalue("venv_clean")


@pytest.mark.parametrize("frontend", ["pip_old", "pip_new", "uv"])
@pytest.mark.parametrize("mode", ["refused", "garbage"])
def test_fallback_reason_reaches_the_user_at_default_verbosity(
    request, index, refused_url, sdist_dir, build_deps, tmp_path, frontend, mode
):
    """pip and uv hide a build backend's output unless the build fails (pip >= 24.1 relays a backend's
    warnings only for a local directory): the reason for compiling must still be on the user's terminal
    before the compile starts. The install is stopped once it is."""
    venv = _venv_for(frontend, request)
    venv.uninstall()
    url = refused_url if mode == "refused" else index.url
    index.mode = "ok" if mode == "refused" else "garbage"
    env = _frontend_env(tmp_path, url, CAUSAL_CONV1D_INDEX_TIMEOUT="2", MAX_JOBS="1")
    page = f"{url}whl/{CPU_VARIANT}/{contract.PROJECT_NAME}/"
    # torch 2.13 >= 2.10: the stable family page is asked first, then the torch minor's page; both named
    family = f"{url}whl/stable2.10-cpu/{contract.PROJECT_NAME}/"
    notice = f"causal-conv1d: no wheel for variant {CPU_VARIANT} ({family}: "
    status, out = run_in_pty(
        _frontend_cmd(frontend, venv, sdist_dir, build_deps), env, timeout=600, until="building locally"
    )
    shown = out
    for marker in _FAILED:
        shown = shown.split(marker, 1)[0]  # only what a successful install would show
    assert notice in shown and f"; {page}: " in shown and "building locally" in shown, out[-3000:]
    reason = "refused" if mode == "refused" else "not utf-8 html"
    assert reason in shown.split(notice, 1)[1].split("\n", 1)[0].lower()
    venv.uninstall()


@pytest.mark.parametrize("frontend", ["pip_old", "pip_new", "uv"])
@pytest.mark.parametrize("mode", ["badhash", "badsize"])
def test_a_tampered_wheel_stops_the_install(request, index, sdist_dir, build_deps, site_dir, tmp_path, frontend, mode):
    """sha256 or size differs from the index's: the install stops (nothing compiled, nothing installed)
    and pip's / uv's default output names the file, both values and how to compile instead."""
    import hashlib

    venv = _venv_for(frontend, request)
    venv.uninstall()
    index.mode = mode
    env, marker = shim_env(tmp_path, _frontend_env(tmp_path, index.url))
    proc = subprocess.run(
        _frontend_cmd(frontend, venv, sdist_dir, build_deps),
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    out = proc.stdout + proc.stderr
    wheel = next((site_dir / "files").glob("*.whl"))
    real = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert proc.returncode != 0, out[-3000:]
    assert f"causal-conv1d: STOP: the prebuilt wheel {wheel.name}" in out, out[-3000:]
    if mode == "badhash":
        assert f"expected sha256: {'0' * 64}" in out and f"actual   sha256: {real}" in out
    else:
        size = wheel.stat().st_size
        assert f"expected size: {size + 1} bytes" in out and f"actual   size: {size} bytes" in out
    assert f"{contract.ENV_FORCE_BUILD}=TRUE pip install" in out
    assert not marker.exists()  # nothing was compiled
    assert venv.pip("show", contract.PROJECT_NAME, check=False).returncode != 0  # nothing installed


def test_uv_isolated_build_blames_the_isolation_not_a_missing_torch(venv_clean, index, sdist_dir, build_deps, tmp_path):
    """torch IS installed in the venv; uv's isolated build cannot see it: the first advice is how to let
    the build see it (or take the wheel), not 'install torch'."""
    cmd = [
        str(UV),
        "pip",
        "install",
        "--python",
        str(venv_clean.python),
        *sdist_requirement_args(sdist_dir, build_deps),
    ]
    env, _marker = shim_env(tmp_path, _frontend_env(tmp_path, index.url))  # the diagnosis fails before compiling
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "torch is not importable in this isolated build environment" in out, out[-3000:]
    fix = out.split("torch is not importable in this isolated build environment", 1)[1].split("fix: ", 1)[1]
    assert fix.startswith("let the build see that torch: uv pip install --no-build-isolation-package causal-conv1d"), (
        fix
    )
    # the error block once: the diagnosis leaves the stopping errors to the stop message
    assert out.count("torch is not importable in this isolated build environment") == 1, out[-3000:]
