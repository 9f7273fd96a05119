"""The CUDA toolkit install scripts under scripts/: argument handling, refusal outside their OS, and
the pip toolkit's CUDA_HOME assembly (for real with NVIDIA's wheels in the slow test)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MANYLINUX = REPO / "scripts" / "install-cuda-manylinux.sh"
WINDOWS = REPO / "scripts" / "install-cuda-windows.ps1"
PIP_TOOLKIT = REPO / "scripts" / "cuda_pip_toolkit.py"


def _load_pip_toolkit():
    spec = importlib.util.spec_from_file_location("_cuda_pip_toolkit", PIP_TOOLKIT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tk = _load_pip_toolkit()


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed (apt-get install shellcheck)")
def test_manylinux_script_passes_shellcheck() -> None:
    proc = subprocess.run(["shellcheck", str(MANYLINUX)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "usage:"),
        (["13"], "invalid CUDA version '13'"),
        (["12.8.1"], "invalid CUDA version"),
        (["10.2"], "CUDA 10.2 is not in this script's table"),
    ],
)
def test_manylinux_script_rejects_bad_versions(args: list[str], message: str) -> None:
    proc = subprocess.run(["bash", str(MANYLINUX), *args], capture_output=True, text=True)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_manylinux_script_refuses_a_non_rhel_os(tmp_path: Path) -> None:
    # This machine is Debian: the script must stop before touching any package manager.
    release = Path("/etc/os-release").read_text() if Path("/etc/os-release").exists() else ""
    if "rhel" in release.lower() or "centos" in release.lower() or "almalinux" in release.lower():
        pytest.skip("running on a RHEL-family OS")
    proc = subprocess.run(["bash", str(MANYLINUX), "13.0"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "unsupported OS" in proc.stderr


def test_manylinux_script_installs_only_compile_packages() -> None:
    text = MANYLINUX.read_text()
    for pkg in (
        "cuda-nvcc-${SUFFIX}",
        "cuda-cudart-devel-${SUFFIX}",
        "cuda-cccl-${SUFFIX}",
        "libcublas-devel-${SUFFIX}",
        "libcusparse-devel-${SUFFIX}",
    ):
        assert pkg in text
    assert "cuda-toolkit-${SUFFIX}" not in text  # never the full toolkit meta-package
    assert "cuda-driver" not in text and "nvidia-driver" not in text


def test_windows_script_installs_named_components() -> None:
    text = WINDOWS.read_text()
    assert "-s" in text and "network_installers" in text
    for comp in ("'nvcc'", "'cudart'", "'thrust'", "'cublas_dev'", "'cusparse_dev'", "'visual_studio_integration'"):
        assert comp in text
    assert "GITHUB_ENV" in text and "CUDA_PATH" in text and "vcvars64.bat" in text


@pytest.mark.skipif(shutil.which("pwsh") is None, reason="PowerShell (pwsh) not installed")
def test_windows_script_parses() -> None:
    cmd = (
        f"$e=$null; [System.Management.Automation.Language.Parser]::ParseFile('{WINDOWS}', [ref]$null, [ref]$e) "
        "| Out-Null; if ($e.Count) { $e | ForEach-Object { $_.Message }; exit 1 }"
    )
    proc = subprocess.run(["pwsh", "-NoProfile", "-Command", cmd], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --- scripts/cuda_pip_toolkit.py


def test_pip_requirements_pin_one_release() -> None:
    reqs = tk.requirements("13.0", math_headers=False)
    assert reqs[0] == "cuda-toolkit[nvcc,cudart,cccl,crt]==13.0.2"
    assert "nvidia-nvvm==13.0.*" in reqs
    assert "cublas" in tk.requirements("13.0", math_headers=True)[0]


@pytest.mark.parametrize(
    ("cuda", "message"), [("12.8", "CUDA 13+"), ("13", "Invalid CUDA version"), ("x.y", "Invalid")]
)
def test_pip_requirements_reject(cuda: str, message: str) -> None:
    with pytest.raises(tk.ToolkitError, match=message):
        tk.requirements(cuda, math_headers=False)


def _fake_root(base: Path, *, nvcc: bool = False, runtime: bool = False, math: bool = False) -> Path:
    root = base / "nvidia" / "cu13"
    (root / "include").mkdir(parents=True, exist_ok=True)
    (root / "lib").mkdir(exist_ok=True)
    if nvcc:
        (root / "bin").mkdir(exist_ok=True)
        script = root / "bin" / "nvcc"
        script.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
        (root / "nvvm" / "bin").mkdir(parents=True)
    if runtime:
        (root / "include" / "cuda_runtime.h").write_text("/* runtime */\n")
        (root / "lib" / "libcudart.so.13").write_bytes(b"\x7fELF")
    if math:
        (root / "include" / "cusparse.h").write_text("/* cusparse */\n")
    return root


def test_assemble_merges_roots_into_a_cuda_home(tmp_path: Path) -> None:
    compiler = _fake_root(tmp_path / "a", nvcc=True)
    runtime = _fake_root(tmp_path / "b", runtime=True, math=True)
    home = tk.assemble([compiler, runtime], tmp_path / "cuda")
    assert (home / "bin" / "nvcc").resolve() == (compiler / "bin" / "nvcc").resolve()
    assert (home / "nvvm").resolve() == (compiler / "nvvm").resolve()
    assert (home / "include" / "cuda_runtime.h").read_text() == "/* runtime */\n"
    assert (home / "include" / "cusparse.h").exists()
    assert (home / "lib64" / "libcudart.so").resolve() == (runtime / "lib" / "libcudart.so.13").resolve()
    assert tk.nvcc_version(home) == "13.0"
    # idempotent: assembling again over the same directory works
    tk.assemble([compiler, runtime], tmp_path / "cuda")


def test_assemble_names_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(tk.ToolkitError, match="no bin/nvcc"):
        tk.assemble([_fake_root(tmp_path / "r", runtime=True)], tmp_path / "cuda")
    with pytest.raises(tk.ToolkitError, match="cuda_runtime.h not found"):
        tk.assemble([_fake_root(tmp_path / "c", nvcc=True)], tmp_path / "cuda2")


@pytest.mark.slow
def test_pip_toolkit_for_real_compiles_cuda(tmp_path: Path) -> None:
    """pip-installs NVIDIA's CUDA 13.0 compiler wheels, assembles CUDA_HOME and compiles a kernel."""
    if shutil.which("g++") is None:
        pytest.skip("g++ needed as nvcc's host compiler")
    proc = subprocess.run(
        [sys.executable, str(PIP_TOOLKIT), "13.0", "--prefix", str(tmp_path / "tk"), "--quiet"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    home = Path(proc.stdout.strip().splitlines()[-1])
    assert home == (tmp_path / "tk" / "cuda").resolve()
    for rel in ("bin/nvcc", "include/cuda_runtime.h", "lib64/libcudart.so", "nvvm"):
        assert (home / rel).exists(), rel
    src = tmp_path / "k.cu"
    src.write_text(
        "#include <cuda_runtime.h>\n__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n"
        "int main() { float* d; cudaMalloc(&d, 4); k<<<1, 1>>>(d); return 0; }\n"
    )
    env = dict(os.environ, PATH=f"{home / 'bin'}{os.pathsep}{os.environ['PATH']}")
    out = tmp_path / "k"
    proc = subprocess.run(
        [
            str(home / "bin" / "nvcc"),
            "-arch=sm_90",
            "-cudart",
            "shared",
            str(src),
            "-o",
            str(out),
            f"-L{home / 'lib64'}",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    needed = subprocess.run(["readelf", "-d", str(out)], capture_output=True, text=True).stdout
    assert "libcudart.so.13" in needed
