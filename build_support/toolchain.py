"""Machine diagnosis before a local build, and the CUDA environment torch's build helpers need.

``diagnose()`` looks at: the torch in this interpreter (CUDA / CPU / ROCm build), the CUDA
toolkit (``CUDA_HOME``/``CUDA_PATH``, ``nvcc`` on PATH -- wrapper scripts followed by asking nvcc
itself where its toolkit is --, ``/usr/local/cuda``, or NVIDIA's pip packages
``nvidia/cu13``/``nvidia/cuda_nvcc``/``nvidia/cuda_runtime``), nvcc's CUDA major against torch's,
the host compiler against nvcc's supported gcc range, the CUDA arch list and MAX_JOBS.

Each :class:`Problem` says what is wrong and the exact command that fixes it. ``apply()`` exports
what the build needs (``CUDA_HOME``, ``CPATH``, ``TORCH_CUDA_ARCH_LIST``, ``MAX_JOBS``) -- when the
toolkit's headers or ``libcudart.so`` are only in pip packages, it assembles a build-local
``CUDA_HOME`` (symlinks: ``bin/nvcc``, ``include``, ``lib64/libcudart.so``) under ``build/``.

Must run BEFORE ``torch.utils.cpp_extension`` is imported: that module reads CUDA_HOME at import.
Stdlib only at import time; torch is imported inside :func:`torch_info`.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any, Optional

import causal_conv1d_contract as contract
from build_support import REPO_ROOT

__all__ = [
    "Problem", "TorchInfo", "CudaToolkit", "Compiler", "Diagnosis",
    "torch_info", "find_cuda_toolkit", "host_compiler", "gpu_archs", "release_archs",
    "max_jobs", "diagnose", "apply", "format_report", "GCC_RANGE",
]

#: Supported host gcc major versions per CUDA (major, minor) -- from the "Host compiler support
#: policy" table of each CUDA release's Linux installation guide. Keys are the first CUDA
#: release of each range; a newer CUDA inherits the closest entry below it.
GCC_RANGE: dict[tuple[int, int], tuple[int, int]] = {
    (11, 0): (6, 9), (11, 1): (6, 10), (11, 4): (6, 11),
    (12, 0): (6, 12), (12, 4): (7, 13), (12, 8): (7, 14),
    (13, 0): (8, 15),
}
#: Compute capabilities of release builds per CUDA (major, minor) (same inheritance rule).
RELEASE_ARCHS: dict[tuple[int, int], str] = {
    (11, 8): "7.0;7.5;8.0;8.6;8.9;9.0",
    (12, 0): "7.0;7.5;8.0;8.6;8.9;9.0",
    (12, 8): "7.5;8.0;8.6;8.9;9.0;10.0;12.0",
    (13, 0): "7.5;8.0;8.6;8.9;9.0;10.0;11.0;12.0",
}
#: Fixed places a toolkit is looked for after CUDA_HOME/CUDA_PATH and nvcc on PATH.
DEFAULT_CUDA_ROOTS: list[str] = [] if os.name == "nt" else ["/usr/local/cuda"]
GB_PER_NVCC_JOB = 4.0  #: peak resident memory of one nvcc job on these kernels (with headroom)
GB_PER_CXX_JOB = 1.5


@dataclasses.dataclass
class Problem:
    what: str
    fix: str
    fatal: bool = True

    def text(self) -> str:
        return f"{'ERROR' if self.fatal else 'warning'}: {self.what}\n  fix: {self.fix}"


@dataclasses.dataclass
class TorchInfo:
    importable: bool
    version: Optional[str] = None
    cuda: Optional[str] = None
    hip: Optional[str] = None
    cxx11_abi: Optional[bool] = None
    location: Optional[str] = None
    error: Optional[str] = None

    @property
    def build(self) -> str:
        if not self.importable:
            return "none"
        return "rocm" if self.hip else ("cuda" if self.cuda else "cpu")


@dataclasses.dataclass
class CudaToolkit:
    home: Optional[str]
    nvcc: Optional[str]
    version: Optional[str]
    source: str  # how it was found
    include_dir: Optional[str] = None
    cudart_dir: Optional[str] = None  # directory holding libcudart.so (or cudart.lib)
    complete: bool = False  # home/include and home/lib64 usable by torch's build helpers as-is


@dataclasses.dataclass
class Compiler:
    path: Optional[str]
    kind: Optional[str]  # "gcc", "clang", "msvc"
    version: Optional[str]


@dataclasses.dataclass
class Diagnosis:
    torch: TorchInfo
    build_cuda: bool
    toolkit: Optional[CudaToolkit]
    compiler: Compiler
    archs: Optional[str]
    archs_source: str
    max_jobs: int
    problems: list[Problem]
    notes: list[str]
    env: dict[str, str]

    @property
    def fatal(self) -> list[Problem]:
        return [p for p in self.problems if p.fatal]

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# --- torch ---------------------------------------------------------------------------------------

_TORCH_PROBE = r"""
import json, sys
try:
    import torch
except Exception as exc:
    print(json.dumps({"importable": False, "error": f"{type(exc).__name__}: {exc}"}))
    sys.exit(0)
print(json.dumps({"importable": True, "version": str(torch.__version__), "cuda": torch.version.cuda,
    "hip": getattr(torch.version, "hip", None), "cxx11_abi": bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", False)),
    "location": str(torch.__file__)}))
"""


#: Reads torch's version.py and scans libc10 for ``__cxx11`` symbols instead of importing torch
#: (seconds saved on every sdist install); anything unexpected -> the full import above.
_TORCH_FAST_PROBE = r"""
import importlib.util, json, os, sys
spec = importlib.util.find_spec("torch")
if spec is None or not spec.submodule_search_locations:
    print(json.dumps({"importable": False, "error": "ModuleNotFoundError: No module named 'torch'"}))
    sys.exit(0)
root = list(spec.submodule_search_locations)[0]
ns = {}
with open(os.path.join(root, "version.py"), encoding="utf-8") as fh:
    exec(compile(fh.read(), "torch/version.py", "exec"), ns)
abi = None
for name in ("libc10.so", "libtorch_cpu.so"):
    path = os.path.join(root, "lib", name)
    if os.path.isfile(path):
        with open(path, "rb") as fh:
            abi = b"NSt7__cxx11" in fh.read()  # std::__cxx11:: types appear only with the cxx11 ABI
        break
if abi is None:
    sys.exit(3)
print(json.dumps({"importable": True, "version": str(ns["__version__"]), "cuda": ns.get("cuda"),
    "hip": ns.get("hip"), "cxx11_abi": abi, "location": os.path.join(root, "__init__.py")}))
"""


def torch_info(executable: Optional[str] = None, env: Optional[dict[str, str]] = None, timeout: float = 120,
               fast: bool = False) -> TorchInfo:
    """The torch of this interpreter (in-process), or of ``executable`` run with ``env``.

    ``fast`` (other interpreters on Linux): read torch's files instead of importing it.
    """
    if executable is None:
        try:
            import torch  # noqa: PLC0415
        except Exception as exc:  # noqa: BLE001  (a broken torch raises more than ImportError)
            return TorchInfo(False, error=f"{type(exc).__name__}: {exc}")
        return TorchInfo(
            True, str(torch.__version__), torch.version.cuda, getattr(torch.version, "hip", None),
            bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", False)), str(torch.__file__),
        )
    if fast and sys.platform.startswith("linux"):
        try:
            out = subprocess.run([executable, "-c", _TORCH_FAST_PROBE], capture_output=True, text=True, env=env,
                                 timeout=timeout, check=False)
            if out.returncode == 0:
                return TorchInfo(**json.loads(out.stdout.strip().splitlines()[-1]))
        except (OSError, subprocess.SubprocessError, ValueError, IndexError, TypeError, KeyError):
            pass  # the full import below decides
    try:
        out = subprocess.run([executable, "-c", _TORCH_PROBE], capture_output=True, text=True, env=env,
                             timeout=timeout, check=False)
        data = json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
        return TorchInfo(False, error=f"could not run {executable}: {exc}")
    return TorchInfo(**data)


# --- CUDA toolkit --------------------------------------------------------------------------------

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
        out = subprocess.run([nvcc, "-dryrun", "-c", "x.cu", "-o", "x.o"], capture_output=True, text=True,
                             timeout=60, check=False, cwd=os.path.expanduser("~") if os.name != "nt" else None)
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


def _missing_torch_headers(include_dir: Optional[str]) -> list[str]:
    if not include_dir:
        return list(TORCH_NEEDED_CUDA_HEADERS)
    return [h for h in TORCH_NEEDED_CUDA_HEADERS if not (Path(include_dir) / h).exists()]


def _pip_header_dirs(major: Optional[int], headers: list[str]) -> list[str]:
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


# --- host compiler -------------------------------------------------------------------------------

def _has_shared_libstdcxx(compiler: str) -> bool:
    """Whether a gcc-like compiler links a shared libstdc++ (``-print-file-name`` finds the .so)."""
    try:
        proc = subprocess.run([compiler, "-print-file-name=libstdc++.so"], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return True  # cannot tell: do not second-guess the user's compiler
    out = proc.stdout.strip()
    if proc.returncode != 0 or not out:
        return True  # cannot tell (not a gcc-like driver): leave the compiler alone
    # gcc prints the bare name back when no such file is in its search path.
    return out != "libstdc++.so" and os.path.exists(out)


def host_compiler() -> Compiler:
    if os.name == "nt":
        cl = shutil.which("cl")
        return Compiler(cl, "msvc" if cl else None, None)
    return host_compiler_at(os.environ.get("CUDAHOSTCXX") or os.environ.get("CXX") or "c++")


def host_compiler_at(name: str) -> Compiler:
    path = shutil.which(name)
    if not path:
        return Compiler(None, None, None)
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
        full = subprocess.run([path, "-dumpfullversion", "-dumpversion"], capture_output=True, text=True,
                              timeout=30, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return Compiler(path, None, None)
    kind = "clang" if "clang" in out.lower() else "gcc"
    if kind == "clang":
        m = re.search(r"version (\d+[\.\d]*)", out)
        full = m.group(1) if m else full
    return Compiler(path, kind, full or None)


def gcc_range(cuda: str) -> tuple[int, int]:
    key = tuple(int(x) for x in cuda.split(".")[:2])
    best = max((k for k in GCC_RANGE if k <= key), default=min(GCC_RANGE))
    return GCC_RANGE[best]


# --- archs, jobs ---------------------------------------------------------------------------------

def gpu_archs() -> list[str]:
    try:
        import torch  # noqa: PLC0415

        if not torch.cuda.is_available():
            return []
        caps = {torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())}
    except Exception:  # noqa: BLE001
        return []
    return [f"{a}.{b}" for a, b in sorted(caps)]


def release_archs(cuda: str) -> str:
    key = tuple(int(x) for x in cuda.split(".")[:2])
    best = max((k for k in RELEASE_ARCHS if k <= key), default=min(RELEASE_ARCHS))
    return RELEASE_ARCHS[best]


def _mem_available_gb() -> Optional[float]:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / (1024 * 1024)
    except OSError:
        return None
    return None


def max_jobs(cuda: bool) -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    mem = _mem_available_gb()
    per = GB_PER_NVCC_JOB if cuda else GB_PER_CXX_JOB
    by_mem = cores if mem is None else int(mem // per)
    return max(1, min(cores, by_mem))


# --- diagnosis -----------------------------------------------------------------------------------

def _index_hint() -> str:
    return (f"or install a prebuilt wheel: see the variants at "
            f"{contract.index_base()}{contract.WHEELS_DIR}/ "
            f"(python -m causal_conv1d doctor prints the exact command)")


def _isolated_build_venv() -> bool:
    """Whether this build runs in a fresh venv made by uv (``builds-v*``) or pypa/build (``build-env-*``):
    one that cannot see the environment the package is installed into (pip's isolation can: see prebuilt)."""
    prefix = sys.prefix.replace("\\", "/")
    return "/build-env-" in prefix or "/builds-v" in prefix


def _no_torch_problem(t: TorchInfo) -> Problem:
    """No torch in the build: under uv / python -m build the likely cause is the isolation, not a missing torch."""
    if _isolated_build_venv():
        return Problem(
            f"torch is not importable in this isolated build environment ({sys.prefix}): uv and python -m build "
            "build in a fresh venv that cannot see the torch of the environment you install into",
            "let the build see that torch: uv pip install --no-build-isolation-package causal-conv1d causal-conv1d "
            "(setuptools and packaging installed next to torch), or python -m build --no-isolation; or install "
            "the prebuilt wheel directly (python -m causal_conv1d doctor prints the command). No torch there yet? "
            "Install it first (the torch build you want: https://download.pytorch.org/whl/<cpu or cuXYZ>/), then "
            "retry; " + _index_hint())
    return Problem(
        f"torch is not importable in the build environment ({t.error})",
        "install torch into the environment you install causal-conv1d into (pip install torch); pip finds it "
        "even under build isolation; with uv: uv pip install --no-build-isolation-package causal-conv1d "
        "causal-conv1d (needs setuptools and packaging installed); with python -m build: --no-isolation; "
        + _index_hint())


def diagnose(build_dir: Optional[Path] = None) -> Diagnosis:
    """Diagnose this machine for a local build of the extension (imports torch)."""
    problems: list[Problem] = []
    notes: list[str] = []
    env: dict[str, str] = {}
    t = torch_info()
    skip_cuda = contract.env_flag(contract.ENV_SKIP_CUDA_BUILD) is True
    tk: Optional[CudaToolkit] = None
    archs: Optional[str] = None
    archs_source = "n/a (CPU build)"
    if not t.importable:
        problems.append(_no_torch_problem(t))
    elif t.build == "rocm":
        notes.append(f"torch {t.version} is a ROCm build (HIP {t.hip}): causal-conv1d's GPU kernels are CUDA-only; "
                     "building the CPU extension -- GPU ops will be unavailable")
    elif t.build == "cpu":
        notes.append(f"torch {t.version} is a CPU-only build: building the CPU extension -- CUDA ops will be unavailable")
    elif skip_cuda:
        notes.append(f"{contract.ENV_SKIP_CUDA_BUILD}=TRUE: building the CPU extension only (CUDA ops unavailable)")
    build_cuda = t.build == "cuda" and not skip_cuda
    compiler = host_compiler()
    if compiler.path is None:
        fix = ("install Visual Studio Build Tools (C++ workload) and run from a 'x64 Native Tools' prompt"
               if os.name == "nt" else "apt-get install g++  (or dnf install gcc-c++)")
        problems.append(Problem("no C++ compiler found (CXX / c++ on PATH)", fix))
    if compiler.kind == "gcc" and compiler.path and not _has_shared_libstdcxx(compiler.path):
        alt = next((c for c in ("/usr/bin/g++", "/usr/bin/c++") if os.path.exists(c) and _has_shared_libstdcxx(c)), None)
        what = (f"host compiler {compiler.path} has no shared libstdc++ (libstdc++.so): the extension would carry a "
                "second, static libstdc++ next to torch's and crash when formatting error messages")
        if alt:
            env.update({"CXX": alt, "CUDAHOSTCXX": alt})
            notes.append(f"{what}; building with {alt} instead")
            compiler = host_compiler_at(alt)
        else:
            problems.append(Problem(what, "apt-get install g++ && export CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++"))
    if build_cuda:
        assert t.cuda is not None
        torch_major = int(t.cuda.split(".")[0])
        for var in ("CUDA_HOME", "CUDA_PATH"):
            val = os.environ.get(var)
            if val and not os.path.isdir(val):
                problems.append(Problem(f"{var}={val} does not exist", f"unset {var}  (or point it at a CUDA {t.cuda} toolkit)"))
        tk = find_cuda_toolkit(torch_major)
        pip_pkg = f"nvidia-cuda-nvcc-cu{torch_major}" if torch_major < 13 else f"'nvidia-cuda-nvcc=={t.cuda}.*'"
        if tk is None:
            problems.append(Problem(
                f"torch {t.version} is a CUDA {t.cuda} build but no CUDA toolkit (nvcc) was found "
                "(looked at CUDA_HOME, CUDA_PATH, nvcc on PATH, /usr/local/cuda, NVIDIA pip packages)",
                f"install the CUDA {t.cuda} toolkit and export CUDA_HOME=<its root>, or pip install {pip_pkg} "
                f"'nvidia-cuda-runtime=={t.cuda}.*'; or build without CUDA: {contract.ENV_SKIP_CUDA_BUILD}=TRUE; "
                + _index_hint()))
        else:
            nv_major, nv_minor = (int(x) for x in tk.version.split(".")[:2]) if tk.version else (0, 0)
            torch_minor = int(t.cuda.split(".")[1])
            if nv_major != torch_major:
                problems.append(Problem(
                    f"nvcc {tk.version} ({tk.nvcc}, via {tk.source}) does not match torch's CUDA {t.cuda}: "
                    "the CUDA major versions must be equal",
                    f"install CUDA {t.cuda} and export CUDA_HOME=<its root>, or install a torch built for CUDA "
                    f"{nv_major}.x: pip install torch --index-url https://download.pytorch.org/whl/cu{nv_major}{nv_minor}; "
                    + _index_hint()))
            elif nv_minor != torch_minor:
                problems.append(Problem(
                    f"nvcc {tk.version} and torch's CUDA {t.cuda} differ in the minor version (usually works)",
                    f"for an exact match install CUDA {t.cuda} and export CUDA_HOME=<its root>", fatal=False))
            if not tk.include_dir or not tk.cudart_dir:
                missing = "cuda_runtime.h" if not tk.include_dir else "libcudart"
                problems.append(Problem(
                    f"nvcc {tk.version} found at {tk.nvcc} but not the CUDA runtime ({missing})",
                    f"pip install 'nvidia-cuda-runtime=={t.cuda}.*'  (or install the full CUDA {t.cuda} toolkit)"))
            elif tk.complete:
                env["CUDA_HOME"] = tk.home or ""
                notes.append(f"CUDA toolkit {tk.version} at {tk.home} (via {tk.source})")
            else:
                dest = (build_dir or REPO_ROOT / "build") / "cuda_home"
                home = assemble_cuda_home(tk, dest)
                env["CUDA_HOME"] = str(home)
                env["CPATH"] = os.pathsep.join([tk.include_dir] + ([os.environ["CPATH"]] if os.environ.get("CPATH") else []))
                notes.append(f"CUDA toolkit {tk.version}: nvcc {tk.nvcc}, headers {tk.include_dir}, runtime {tk.cudart_dir} "
                             f"(assembled into CUDA_HOME={home})")
            missing_headers = _missing_torch_headers(tk.include_dir) if tk.include_dir else []
            if missing_headers:
                extra = _pip_header_dirs(torch_major, missing_headers)
                still = [h for h in missing_headers if not any((Path(d) / h).exists() for d in extra)]
                if extra:
                    cpath = [c for c in env.get("CPATH", os.environ.get("CPATH", "")).split(os.pathsep) if c]
                    env["CPATH"] = os.pathsep.join(extra + [c for c in cpath if c not in extra])
                    notes.append(f"{', '.join(missing_headers)} not in {tk.include_dir}: using {', '.join(extra)} "
                                 "(NVIDIA's pip packages) via CPATH")
                if still:
                    problems.append(Problem(
                        f"the CUDA toolkit at {tk.home} lacks {', '.join(still)}, which torch's CUDA headers include",
                        f"pip install 'nvidia-cusparse-cu{torch_major}' 'nvidia-cublas-cu{torch_major}' "
                        f"'nvidia-cusolver-cu{torch_major}'  (or install the toolkit's math library headers)"))
            if compiler.kind == "gcc" and compiler.version and tk.version:
                lo, hi = gcc_range(tk.version)
                gmaj = int(compiler.version.split(".")[0])
                if not lo <= gmaj <= hi:
                    problems.append(Problem(
                        f"host compiler {compiler.path} is gcc {compiler.version}; nvcc {tk.version} supports gcc {lo}..{hi}",
                        f"apt-get install g++-{hi} && export CXX=g++-{hi} CUDAHOSTCXX=g++-{hi}  "
                        f"(or NVCC_APPEND_FLAGS=-allow-unsupported-compiler at your own risk)"))
        if os.environ.get("TORCH_CUDA_ARCH_LIST"):
            archs, archs_source = os.environ["TORCH_CUDA_ARCH_LIST"], "TORCH_CUDA_ARCH_LIST"
        else:
            visible = gpu_archs()
            if visible:
                archs, archs_source = ";".join(visible), "the visible GPU(s)"
            else:
                archs, archs_source = release_archs(t.cuda), f"the release list for CUDA {t.cuda} (no GPU visible)"
            env["TORCH_CUDA_ARCH_LIST"] = archs
    jobs = max_jobs(build_cuda)
    if os.environ.get("MAX_JOBS"):
        jobs = int(os.environ["MAX_JOBS"]) if os.environ["MAX_JOBS"].isdigit() else jobs
    else:
        env["MAX_JOBS"] = str(jobs)
    return Diagnosis(t, build_cuda, tk, compiler, archs, archs_source, jobs, problems, notes, env)


def apply(d: Diagnosis) -> None:
    """Export the environment the build needs (before torch.utils.cpp_extension is imported)."""
    os.environ.update({k: v for k, v in d.env.items() if v})


def format_report(d: Diagnosis) -> str:
    lines = [f"torch: {d.torch.version or 'not importable'} ({d.torch.build} build"
             + (f", CUDA {d.torch.cuda}" if d.torch.cuda else "") + f", cxx11 ABI {d.torch.cxx11_abi})",
             f"extension: {'CUDA + CPU' if d.build_cuda else 'CPU only'}; MAX_JOBS={d.max_jobs}"
             + (f"; archs {d.archs} (from {d.archs_source})" if d.archs else ""),
             f"host compiler: {d.compiler.path or 'none'} {d.compiler.kind or ''} {d.compiler.version or ''}".rstrip()]
    lines += [f"note: {n}" for n in d.notes]
    lines += [p.text() for p in d.problems]
    return "\n".join(lines)


def machine_summary() -> dict[str, Any]:
    return {"python": sys.version.split()[0], "platform": platform.platform(), "machine": platform.machine()}
