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
import os
import platform
import sys
from pathlib import Path
from typing import Any, Optional

import causal_conv1d_contract as contract
from build_support import REPO_ROOT
from build_support.cuda_toolkit import (
    CudaToolkit,
    assemble_cuda_home,
    find_cuda_toolkit,
    missing_torch_headers,
    pip_header_dirs,
)
from build_support.host_compiler import Compiler, gcc_range, has_shared_libstdcxx, host_compiler, host_compiler_at
from build_support.torch_probe import TorchInfo, torch_info

__all__ = [
    "Problem",
    "Diagnosis",
    "gpu_archs",
    "release_archs",
    "max_jobs",
    "diagnose",
    "apply",
    "format_report",
    "machine_summary",
]

#: Compute capabilities of release builds per CUDA (major, minor) (same inheritance rule).
RELEASE_ARCHS: dict[tuple[int, int], str] = {
    (11, 8): "7.0;7.5;8.0;8.6;8.9;9.0",
    (12, 0): "7.0;7.5;8.0;8.6;8.9;9.0",
    (12, 8): "7.5;8.0;8.6;8.9;9.0;10.0;12.0",
    (13, 0): "7.5;8.0;8.6;8.9;9.0;10.0;11.0;12.0",
}
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
    return (
        f"or install a prebuilt wheel: see the variants at "
        f"{contract.index_base()}{contract.WHEELS_DIR}/ "
        f"(python -m causal_conv1d doctor prints the exact command)"
    )


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
            "retry; " + _index_hint(),
        )
    return Problem(
        f"torch is not importable in the build environment ({t.error})",
        "install torch into the environment you install causal-conv1d into (pip install torch); pip finds it "
        "even under build isolation; with uv: uv pip install --no-build-isolation-package causal-conv1d "
        "causal-conv1d (needs setuptools and packaging installed); with python -m build: --no-isolation; "
        + _index_hint(),
    )


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
        notes.append(
            f"torch {t.version} is a ROCm build (HIP {t.hip}): causal-conv1d's GPU kernels are CUDA-only; "
            "building the CPU extension -- GPU ops will be unavailable"
        )
    elif t.build == "cpu":
        notes.append(
            f"torch {t.version} is a CPU-only build: building the CPU extension -- CUDA ops will be unavailable"
        )
    elif skip_cuda:
        notes.append(f"{contract.ENV_SKIP_CUDA_BUILD}=TRUE: building the CPU extension only (CUDA ops unavailable)")
    build_cuda = t.build == "cuda" and not skip_cuda
    compiler = host_compiler()
    if compiler.path is None:
        fix = (
            "install Visual Studio Build Tools (C++ workload) and run from a 'x64 Native Tools' prompt"
            if os.name == "nt"
            else "apt-get install g++  (or dnf install gcc-c++)"
        )
        problems.append(Problem("no C++ compiler found (CXX / c++ on PATH)", fix))
    if compiler.kind == "gcc" and compiler.path and not has_shared_libstdcxx(compiler.path):
        alt = next((c for c in ("/usr/bin/g++", "/usr/bin/c++") if os.path.exists(c) and has_shared_libstdcxx(c)), None)
        what = (
            f"host compiler {compiler.path} has no shared libstdc++ (libstdc++.so): the extension would carry a "
            "second, static libstdc++ next to torch's and crash when formatting error messages"
        )
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
                problems.append(
                    Problem(f"{var}={val} does not exist", f"unset {var}  (or point it at a CUDA {t.cuda} toolkit)")
                )
        tk = find_cuda_toolkit(torch_major)
        pip_pkg = f"nvidia-cuda-nvcc-cu{torch_major}" if torch_major < 13 else f"'nvidia-cuda-nvcc=={t.cuda}.*'"
        if tk is None:
            problems.append(
                Problem(
                    f"torch {t.version} is a CUDA {t.cuda} build but no CUDA toolkit (nvcc) was found "
                    "(looked at CUDA_HOME, CUDA_PATH, nvcc on PATH, /usr/local/cuda, NVIDIA pip packages)",
                    f"install the CUDA {t.cuda} toolkit and export CUDA_HOME=<its root>, or pip install {pip_pkg} "
                    f"'nvidia-cuda-runtime=={t.cuda}.*'; or build without CUDA: {contract.ENV_SKIP_CUDA_BUILD}=TRUE; "
                    + _index_hint(),
                )
            )
        else:
            nv_major, nv_minor = (int(x) for x in tk.version.split(".")[:2]) if tk.version else (0, 0)
            torch_minor = int(t.cuda.split(".")[1])
            if nv_major != torch_major:
                problems.append(
                    Problem(
                        f"nvcc {tk.version} ({tk.nvcc}, via {tk.source}) does not match torch's CUDA {t.cuda}: "
                        "the CUDA major versions must be equal",
                        f"install CUDA {t.cuda} and export CUDA_HOME=<its root>, or install a torch built for CUDA "
                        f"{nv_major}.x: pip install torch --index-url https://download.pytorch.org/whl/cu{nv_major}{nv_minor}; "
                        + _index_hint(),
                    )
                )
            elif nv_minor != torch_minor:
                problems.append(
                    Problem(
                        f"nvcc {tk.version} and torch's CUDA {t.cuda} differ in the minor version (usually works)",
                        f"for an exact match install CUDA {t.cuda} and export CUDA_HOME=<its root>",
                        fatal=False,
                    )
                )
            if not tk.include_dir or not tk.cudart_dir:
                missing = "cuda_runtime.h" if not tk.include_dir else "libcudart"
                problems.append(
                    Problem(
                        f"nvcc {tk.version} found at {tk.nvcc} but not the CUDA runtime ({missing})",
                        f"pip install 'nvidia-cuda-runtime=={t.cuda}.*'  (or install the full CUDA {t.cuda} toolkit)",
                    )
                )
            elif tk.complete:
                env["CUDA_HOME"] = tk.home or ""
                notes.append(f"CUDA toolkit {tk.version} at {tk.home} (via {tk.source})")
            else:
                dest = (build_dir or REPO_ROOT / "build") / "cuda_home"
                home = assemble_cuda_home(tk, dest)
                env["CUDA_HOME"] = str(home)
                env["CPATH"] = os.pathsep.join(
                    [tk.include_dir] + ([os.environ["CPATH"]] if os.environ.get("CPATH") else [])
                )
                notes.append(
                    f"CUDA toolkit {tk.version}: nvcc {tk.nvcc}, headers {tk.include_dir}, runtime {tk.cudart_dir} "
                    f"(assembled into CUDA_HOME={home})"
                )
            missing_headers = missing_torch_headers(tk.include_dir) if tk.include_dir else []
            if missing_headers:
                extra = pip_header_dirs(torch_major, missing_headers)
                still = [h for h in missing_headers if not any((Path(d) / h).exists() for d in extra)]
                if extra:
                    cpath = [c for c in env.get("CPATH", os.environ.get("CPATH", "")).split(os.pathsep) if c]
                    env["CPATH"] = os.pathsep.join(extra + [c for c in cpath if c not in extra])
                    notes.append(
                        f"{', '.join(missing_headers)} not in {tk.include_dir}: using {', '.join(extra)} "
                        "(NVIDIA's pip packages) via CPATH"
                    )
                if still:
                    problems.append(
                        Problem(
                            f"the CUDA toolkit at {tk.home} lacks {', '.join(still)}, which torch's CUDA headers include",
                            f"pip install 'nvidia-cusparse-cu{torch_major}' 'nvidia-cublas-cu{torch_major}' "
                            f"'nvidia-cusolver-cu{torch_major}'  (or install the toolkit's math library headers)",
                        )
                    )
            if compiler.kind == "gcc" and compiler.version and tk.version:
                lo, hi = gcc_range(tk.version)
                gmaj = int(compiler.version.split(".")[0])
                if not lo <= gmaj <= hi:
                    problems.append(
                        Problem(
                            f"host compiler {compiler.path} is gcc {compiler.version}; nvcc {tk.version} supports gcc {lo}..{hi}",
                            f"apt-get install g++-{hi} && export CXX=g++-{hi} CUDAHOSTCXX=g++-{hi}  "
                            f"(or NVCC_APPEND_FLAGS=-allow-unsupported-compiler at your own risk)",
                        )
                    )
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


def format_report(d: Diagnosis, *, with_fatal: bool = True) -> str:
    """The diagnosis, one line per fact; ``with_fatal=False`` leaves out the errors that stop the build
    (setup.py prints those once, as the stop message: uv showed them twice otherwise)."""
    lines = [
        f"torch: {d.torch.version or 'not importable'} ({d.torch.build} build"
        + (f", CUDA {d.torch.cuda}" if d.torch.cuda else "")
        + f", cxx11 ABI {d.torch.cxx11_abi})",
        f"extension: {'CUDA + CPU' if d.build_cuda else 'CPU only'}; MAX_JOBS={d.max_jobs}"
        + (f"; archs {d.archs} (from {d.archs_source})" if d.archs else ""),
        f"host compiler: {d.compiler.path or 'none'} {d.compiler.kind or ''} {d.compiler.version or ''}".rstrip(),
    ]
    lines += [f"note: {n}" for n in d.notes]
    lines += [p.text() for p in d.problems if with_fatal or not p.fatal]
    return "\n".join(lines)


def machine_summary() -> dict[str, Any]:
    return {"python": sys.version.split()[0], "platform": platform.platform(), "machine": platform.machine()}
