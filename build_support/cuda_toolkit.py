"""The CUDA toolkit a build uses: found (CUDA_HOME/CUDA_PATH, nvcc on PATH, fixed roots, NVIDIA's pip
packages) and, when its parts are spread over pip packages, assembled into a build-local CUDA_HOME."""

from __future__ import annotations

import dataclasses
import glob
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Optional

__all__ = [
    "CudaToolkit",
    "DEFAULT_CUDA_ROOTS",
    "TORCH_NEEDED_CUDA_HEADERS",
    "find_cuda_toolkit",
    "assemble_cuda_home",
    "missing_torch_headers",
    "pip_header_dirs",
]

#: Fixed places a toolkit is looked for after CUDA_HOME/CUDA_PATH and nvcc on PATH.
DEFAULT_CUDA_ROOTS: list[str] = [] if os.name == "nt" else ["/usr/local/cuda"]


@dataclasses.dataclass
class CudaToolkit:
    home: Optional[str]
    nvcc: Optional[str]
    version: Optional[str]
    source: str  # how it was found
    include_dir: Optional[str] = None
    cudart_dir: Optional[str] = None  # directory holding libcudart.so (or cudart.lib)
    complete: bool = False  # home/include and home/lib64 usable by torch's build helpers as-is


def _nvcc_version(nvcc: str) -> Optional[str]:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"release (\d+\.\d+)", out)
    return m.group(1) if m else None


def _nvcc_top(nvcc: str) -> Optional[str]:
    """The toolkit root nvcc really uses (follows wrapper scripts): ``TOP`` of ``nvcc -dryrun``."""
    try:
        out = subprocess.run(
            [nvcc, "-dryrun", "-c", "x.cu", "-o", "x.o"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=os.path.expanduser("~") if os.name != "nt" else None,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"^#\$ TOP=(.+)$", out.stdout + out.stderr, re.M)
    return str(Path(m.group(1).strip()).resolve()) if m else None


def _site_dirs() -> list[Path]:
    dirs = [sysconfig.get_paths().get("purelib"), sysconfig.get_paths().get("platlib")]
    dirs += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    try:
        import torch  # noqa: PLC0415

        dirs.append(str(Path(torch.__file__).resolve().parent.parent))  # the torch's own site-packages
    except Exception:  # noqa: BLE001
        pass
    seen: list[Path] = []
    for d in dirs:
        if d and Path(d).is_dir() and Path(d).resolve() not in seen:
            seen.append(Path(d).resolve())
    return seen


_CUDART = {"nt": "cudart.lib"}.get(os.name, "libcudart.so")


def _has_cudart(d: Path) -> bool:
    return (d / _CUDART).exists() or (os.name != "nt" and bool(glob.glob(str(d / "libcudart.so.*"))))


def _pip_cuda_parts(major: Optional[int]) -> tuple[Optional[str], Optional[str], Optional[str]]:
    """(nvcc, include dir, cudart dir) from NVIDIA's pip packages in any site directory."""
    nvcc = include = cudart = None
    exe = "nvcc.exe" if os.name == "nt" else "nvcc"
    for site in _site_dirs():
        nv = site / "nvidia"
        if not nv.is_dir():
            continue
        roots = [nv / f"cu{major}"] if major else sorted(nv.glob("cu[0-9]*"), reverse=True)
        roots += [nv / "cuda_nvcc", nv / "cuda_runtime"]
        for root in roots:
            if nvcc is None and (root / "bin" / exe).exists():
                nvcc = str(root / "bin" / exe)
            if include is None and (root / "include" / "cuda_runtime.h").exists():
                include = str(root / "include")
            for lib in ("lib", "lib64", "lib/x64"):
                if cudart is None and _has_cudart(root / lib):
                    cudart = str(root / lib)
    return nvcc, include, cudart


#: Headers torch's own CUDA headers include (ATen/cuda/CUDAContext.h) beyond the CUDA runtime; a
#: minimal toolkit (nvcc + cudart only) lacks them, NVIDIA's pip packages that torch installs have them.
TORCH_NEEDED_CUDA_HEADERS = ("cusparse.h", "cublas_v2.h", "cusolverDn.h")


def missing_torch_headers(include_dir: Optional[str]) -> list[str]:
    if not include_dir:
        return list(TORCH_NEEDED_CUDA_HEADERS)
    return [h for h in TORCH_NEEDED_CUDA_HEADERS if not (Path(include_dir) / h).exists()]


def pip_header_dirs(major: Optional[int], headers: list[str]) -> list[str]:
    """Include directories of NVIDIA's pip packages that hold the given headers."""
    found: list[str] = []
    remaining = set(headers)
    for site in _site_dirs():
        nv = site / "nvidia"
        if not nv.is_dir():
            continue
        roots = ([nv / f"cu{major}"] if major else []) + sorted(p for p in nv.iterdir() if p.is_dir())
        for root in roots:
            inc = root / "include"
            hits = {h for h in remaining if (inc / h).exists()}
            if hits:
                remaining -= hits
                if str(inc) not in found:
                    found.append(str(inc))
            if not remaining:
                return found
    return found


def _complete(home: Path) -> bool:
    lib = home / ("lib/x64" if os.name == "nt" else "lib64")
    return (home / "include" / "cuda_runtime.h").exists() and (lib / _CUDART).exists()


def find_cuda_toolkit(torch_cuda_major: Optional[int] = None) -> Optional[CudaToolkit]:
    """Find nvcc and the CUDA headers/runtime; ``None`` when there is no nvcc at all."""
    exe = "nvcc.exe" if os.name == "nt" else "nvcc"
    candidates: list[tuple[str, str]] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append((os.path.join(os.environ[var], "bin", exe), f"${var}"))
    on_path = shutil.which("nvcc")
    if on_path:
        candidates.append((on_path, "nvcc on PATH"))
    for root in DEFAULT_CUDA_ROOTS:
        candidates.append((os.path.join(root, "bin", exe), root))
    pip_nvcc, pip_include, pip_cudart = _pip_cuda_parts(torch_cuda_major)
    if pip_nvcc:
        candidates.append((pip_nvcc, "NVIDIA pip package"))
    for nvcc, source in candidates:
        if not os.path.isfile(nvcc):
            continue  # (a CUDA_HOME that does not exist is reported by diagnose())
        version = _nvcc_version(nvcc)
        if version is None:
            continue
        top = _nvcc_top(nvcc) or str(Path(nvcc).resolve().parent.parent)
        home = Path(top)
        tk = CudaToolkit(str(home), nvcc, version, source)
        if _complete(home):
            tk.include_dir, tk.cudart_dir, tk.complete = str(home / "include"), str(home / "lib64"), True
        else:
            inc = home / "include"
            tk.include_dir = str(inc) if (inc / "cuda_runtime.h").exists() else pip_include
            for lib in (home / "lib64", home / "lib", home / "lib/x64"):
                if _has_cudart(lib):
                    tk.cudart_dir = str(lib)
                    break
            else:
                tk.cudart_dir = pip_cudart
        return tk
    return None


def assemble_cuda_home(tk: CudaToolkit, dest: Path) -> Path:
    """A CUDA_HOME torch's build helpers accept, made of symlinks to the scattered pieces."""
    assert tk.nvcc and tk.include_dir and tk.cudart_dir
    dest.mkdir(parents=True, exist_ok=True)
    for sub in ("bin", "lib64"):
        (dest / sub).mkdir(exist_ok=True)

    def link(target: Path, name: Path) -> None:
        if name.is_symlink() or name.exists():
            if name.is_symlink() and os.readlink(name) == str(target):
                return
            name.unlink()
        name.symlink_to(target)

    link(Path(tk.nvcc).resolve(), dest / "bin" / "nvcc")
    link(Path(tk.include_dir), dest / "include")
    cudart_dir = Path(tk.cudart_dir)
    real = cudart_dir / "libcudart.so"
    if not real.exists():
        real = sorted(cudart_dir.glob("libcudart.so.*"))[-1]
    link(real, dest / "lib64" / "libcudart.so")
    return dest
