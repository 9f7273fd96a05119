"""``python -m build_matrix build --job ID --native --out DIR``: one job's wheel, on this machine.

The same steps cibuildwheel runs in its containers, without containers:

1. a fresh venv (``--venv`` reuses one) with the build tools and exactly the job's torch;
2. the torch actually installed is verified against the job's variant (torch minor, CUDA
   build, C++ ABI) -- a wrong torch fails here, not as an ``undefined symbol`` later;
3. a pre-flight diagnosis in that venv (``build_support.toolchain``): compiler, CUDA toolkit
   (``CUDA_HOME``, nvcc on PATH, /usr/local/cuda or NVIDIA's pip packages), arch list, MAX_JOBS;
4. ``pip wheel --no-build-isolation`` of this source tree with ``CAUSAL_CONV1D_LOCAL_VERSION``,
   ``CAUSAL_CONV1D_FORCE_BUILD=TRUE``, ``TORCH_CUDA_ARCH_LIST``, ``MAX_JOBS``, ``NVCC_THREADS``
   and ccache when present; every build output goes to a temporary directory (the source
   tree gets no ``build/`` or ``*.egg-info``), progress and the compile time are printed;
5. ``auditwheel repair`` with torch/CUDA libraries excluded (:mod:`build_matrix.repair`);
6. the wheel checks (:mod:`build_matrix.wheelcheck`); a failed check fails the build;
7. the wheel is moved into DIR atomically. On any failure DIR gets nothing.

Steps 1-2 are :mod:`build_matrix.build_venv`; the build cache of the tests and the rehearsal
(``cached_wheel``) is :mod:`build_matrix.wheel_cache`.

Errors are :class:`build_matrix.errors.BuildError` (exit 10) and, for a wheel that fails a
check, :class:`build_matrix.errors.CheckError` (exit 11); an unknown job is ``UnknownJob`` (3).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Optional, TypedDict

import causal_conv1d_contract as contract
from build_matrix import repair, wheelcheck
from build_matrix.binaries import find_cuobjdump
from build_matrix.build_venv import ensure_venv, install_torch, say, torch_facts, verify_torch
from build_matrix.errors import BuildError, CheckError
from build_support import REPO_ROOT, toolchain
from causal_conv1d_contract.cli import options_from_args

if TYPE_CHECKING:
    from build_matrix.plan import Job

__all__ = [
    "BuildOptions",
    "BuildReport",
    "build_job",
    "configure_parser",
    "run",
]


@dataclasses.dataclass(frozen=True)
class BuildOptions:
    """Everything a native build needs besides the job; each field has a command-line flag."""

    out: Path
    torch_spec: Optional[str] = None  # default: torch==<job.torch_version>
    torch_index_url: Optional[str] = None  # default: the job's; "" = pip's configured indexes only
    cuda_archs: Optional[str] = None  # default: the job's TORCH_CUDA_ARCH_LIST
    python: str = sys.executable
    venv: Optional[Path] = None  # reuse this venv (created when missing) instead of a fresh one
    max_jobs: Optional[int] = None
    nvcc_threads: Optional[int] = None
    keep_temp: bool = False
    report: Optional[Path] = None  # write a JSON report here


@dataclasses.dataclass
class BuildReport:
    """What a build produced and how long it took (``--report`` writes it as JSON)."""

    job: str
    wheel: Optional[str] = None
    platform: Optional[str] = None
    repaired: Optional[bool] = None
    repair_note: str = ""
    torch: Optional[str] = None
    cuda_archs: Optional[str] = None
    max_jobs: Optional[int] = None
    nvcc_threads: Optional[int] = None
    ccache: bool = False
    compile_s: Optional[float] = None
    total_s: Optional[float] = None
    checks: list[dict[str, str]] = dataclasses.field(default_factory=list)


class Preflight(TypedDict):
    """What ``toolchain.diagnose()`` found inside the build venv."""

    report: str
    env: dict[str, str]
    fatal: list[str]
    archs: Optional[str]
    max_jobs: int
    build_cuda: bool


def _preflight(py: Path, env: dict[str, str], build_dir: Path) -> Preflight:
    """``build_support.toolchain.diagnose()`` run inside the build venv; fatal problems raise."""
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path; "
        "from build_support import toolchain; d = toolchain.diagnose(build_dir=Path(sys.argv[2])); "
        "print(json.dumps({'report': toolchain.format_report(d), 'env': d.env, "
        "'fatal': [p.text() for p in d.fatal], 'archs': d.archs, 'max_jobs': d.max_jobs, "
        "'build_cuda': d.build_cuda}))"
    )
    proc = subprocess.run(
        [str(py), "-c", code, str(REPO_ROOT), str(build_dir)], capture_output=True, text=True, env=env
    )
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
        raise BuildError(f"the build pre-flight (build_support.toolchain.diagnose) crashed:\n{tail}")
    facts: Preflight = json.loads(proc.stdout.strip().splitlines()[-1])
    for line in facts["report"].splitlines():
        say(line)
    if facts["fatal"]:
        raise BuildError("this machine cannot build the job:\n" + "\n".join(facts["fatal"]))
    return facts


#: Headers torch's ATen/cuda/CUDAContextLight.h includes beyond the CUDA runtime.
MATH_HEADERS = ("cusparse.h", "cublas_v2.h", "cublasLt.h", "cusolverDn.h")


def _add_math_headers(py: Path, env: dict[str, str]) -> None:
    """Make cuBLAS/cuSPARSE/cuSOLVER headers visible when the toolkit lacks them.

    A compiler-only toolkit (nvcc + cudart + cccl, e.g. NVIDIA's pip wheels or a minimal
    install) has no cusparse.h, but the CUDA torch in the build venv depends on nvidia-cublas,
    nvidia-cusparse... whose wheels carry the headers: append their include dirs to CPATH
    (after the toolkit's own, so its cuda_runtime.h still wins).
    """
    home = Path(env["CUDA_HOME"]) if env.get("CUDA_HOME") else None
    if home is not None and all((home / "include" / h).exists() for h in MATH_HEADERS):
        return
    venv = py.parent.parent
    dirs = sorted(
        {
            str(h.parent)
            for pattern in ("lib/python*/site-packages/nvidia/*/include",)
            for inc in venv.glob(pattern)
            for h in inc.glob("*.h")
            if h.name in MATH_HEADERS
        }
    )
    if not dirs:
        say(
            f"warning: no {', '.join(MATH_HEADERS)} in the toolkit or the build venv; sources that include "
            "ATen/cuda/CUDAContext.h will not compile (install the toolkit's libcublas/libcusparse/libcusolver "
            "development packages)"
        )
        return
    current = [p for p in env.get("CPATH", "").split(os.pathsep) if p]
    env["CPATH"] = os.pathsep.join(current + [d for d in dirs if d not in current])
    say(f"cuBLAS/cuSPARSE/cuSOLVER headers from the build venv's NVIDIA wheels: {', '.join(dirs)}")


def _ccache_env(tmp: Path, env: dict[str, str], nvcc: Optional[str]) -> bool:
    """Route c++/gcc (and nvcc) through ccache when it is installed."""
    ccache = shutil.which("ccache")
    if not ccache:
        return False
    shim = tmp / "ccache-bin"
    shim.mkdir(exist_ok=True)
    for name in ("c++", "g++", "gcc", "cc"):
        if shutil.which(name) and not (shim / name).exists():
            (shim / name).symlink_to(ccache)
    env["PATH"] = f"{shim}{os.pathsep}{env.get('PATH', '')}"
    if nvcc:
        env["PYTORCH_NVCC"] = f"{ccache} {nvcc}"
    return True


MAX_PROGRESS_LINES = 60  #: progress/error lines echoed; the rest stays in the log (its tail is shown on failure)
_PROGRESS_RE = re.compile(r"^\[\d+/\d+\]|error|Error|warning: unused|Building wheel|Created wheel|running build_ext")


def _compile(py: Path, env: dict[str, str], dist: Path, log: Path) -> float:
    cmd = [
        str(py),
        "-m",
        "pip",
        "wheel",
        "--no-build-isolation",
        "--no-deps",
        "--disable-pip-version-check",
        "-v",
        "-w",
        str(dist),
        str(REPO_ROOT),
    ]
    say("compiling: " + " ".join(cmd))
    start = time.monotonic()
    with open(log, "w", encoding="utf-8") as fh:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=str(REPO_ROOT)
        )
        assert proc.stdout is not None
        done = threading.Event()

        def heartbeat() -> None:  # ninja's output arrives in bursts: say that the build is alive
            while not done.wait(60):
                print(f"[build {time.monotonic() - start:6.0f}s] still compiling...", flush=True)

        threading.Thread(target=heartbeat, daemon=True).start()
        shown = 0
        for line in proc.stdout:
            fh.write(line)
            text = line.rstrip()
            if _PROGRESS_RE.search(text) and len(text) < 400:
                shown += 1
                if shown <= MAX_PROGRESS_LINES:
                    print(f"[build {time.monotonic() - start:6.0f}s] {text.strip()}", flush=True)
                elif shown == MAX_PROGRESS_LINES + 1:
                    print(f"[build] ... more messages in the build log ({log})", flush=True)
        rc = proc.wait()
        done.set()
    elapsed = time.monotonic() - start
    if rc != 0:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
        errors = [
            ln.strip() for ln in lines if re.search(r"\berror\b", ln, re.I) and "subprocess-exited-with-error" not in ln
        ][:15]
        first = ("first errors:\n" + "\n".join(errors) + "\n") if errors else ""
        tail = "\n".join(lines[-15:])
        raise BuildError(
            f"compiling the wheel failed (exit {rc}) after {elapsed:.0f} s; full log: {log}\n{first}last lines:\n{tail}"
        )
    say(f"compile time: {elapsed:.0f} s")
    return elapsed


def _build_env(
    job: Job, opts: BuildOptions, tmp: Path, archs: Optional[str], jobs: int, threads: int
) -> dict[str, str]:
    env = dict(os.environ)
    for var in (contract.ENV_SKIP_CUDA_BUILD, contract.ENV_FORCE_CXX11_ABI, "PIP_REQUIRE_VIRTUALENV"):
        env.pop(var, None)  # the job decides CUDA and ABI; a stray override would mislabel the wheel
    if job.cuda is None:
        env[contract.ENV_SKIP_CUDA_BUILD] = "TRUE"
        env.pop("TORCH_CUDA_ARCH_LIST", None)
    elif archs:
        env["TORCH_CUDA_ARCH_LIST"] = archs
    env[contract.ENV_LOCAL_VERSION] = contract.local_version(job.variant)
    env[contract.ENV_STABLE_ABI] = "TRUE" if getattr(job, "stable_abi", False) else "FALSE"
    env[contract.ENV_FORCE_BUILD] = "TRUE"
    env["MAX_JOBS"] = str(jobs)
    env["NVCC_THREADS"] = str(threads)
    # All setuptools outputs (build/, *.egg-info) into the temp dir: the source tree stays clean
    # and concurrent builds of the same tree do not share object files.
    cfg = tmp / "setuptools-dirs.cfg"
    (tmp / "st-build").mkdir(exist_ok=True)
    (tmp / "st-egg").mkdir(exist_ok=True)
    cfg.write_text(f"[build]\nbuild_base = {tmp / 'st-build'}\n[egg_info]\negg_base = {tmp / 'st-egg'}\n")
    env["DIST_EXTRA_CONFIG"] = str(cfg)
    return env


def _atomic_move(src: Path, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    final = out / src.name
    partial = out / f".{src.name}.partial"
    try:
        shutil.copy2(src, partial)
        os.replace(partial, final)
    finally:
        if partial.exists():
            partial.unlink()
    return final


def _check_tools() -> None:
    import importlib.util

    missing = [
        m
        for m in ("auditwheel", "abi3audit", "check_wheel_contents", "elftools")
        if importlib.util.find_spec(m) is None
    ]
    if missing:
        raise BuildError(
            f"the build driver's Python lacks {', '.join(missing)} (needed to repair and check wheels): "
            "pip install -r requirements-dev.txt"
        )


def build_job(job: Job, opts: BuildOptions) -> BuildReport:
    """Build, repair, check and deliver one job's wheel; returns what happened (raises on failure)."""
    if sys.platform != "linux":
        raise BuildError(
            f"native builds run on Linux (this is {sys.platform}); on Windows use cibuildwheel with "
            "scripts/install-cuda-windows.ps1 (see docs/building.md)"
        )
    if job.os != "linux":
        raise BuildError(
            f"job {job.id} is a {job.os} job; native mode builds Linux jobs (pick a *-linux-* job, "
            "or build Windows jobs with cibuildwheel: docs/building.md)"
        )
    plat_arch = os.uname().machine
    if job.arch != plat_arch:
        raise BuildError(f"job {job.id} is for {job.arch}; this machine is {plat_arch}: pick a *-linux-{plat_arch} job")
    _check_tools()
    report = BuildReport(job=job.id)
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix=f"causal-conv1d-{job.id}-"))
    ok = False
    try:
        py = ensure_venv(opts.venv or tmp / "venv", opts.python)
        install_torch(py, job, opts)
        facts = torch_facts(py)
        say(f"torch {facts['version']} (CUDA {facts['cuda']}, cxx11 ABI {facts['cxx11_abi']})")
        verify_torch(job, facts, opts)
        report.torch = facts["version"]

        cuda = job.cuda is not None
        archs = opts.cuda_archs or (job.cuda_archs if cuda else None)
        if cuda and archs:
            wheelcheck.parse_arch_list(archs)  # validates: a clear error before a long build
        jobs = opts.max_jobs or (
            int(os.environ["MAX_JOBS"]) if os.environ.get("MAX_JOBS", "").isdigit() else toolchain.max_jobs(cuda)
        )
        cores = os.cpu_count() or 1
        threads = opts.nvcc_threads or max(1, min(4, cores // jobs))
        env = _build_env(job, opts, tmp, archs, jobs, threads)
        facts_pf = _preflight(py, env, tmp / "cuda_home")
        env.update({k: v for k, v in facts_pf["env"].items() if v and k not in ("MAX_JOBS", "TORCH_CUDA_ARCH_LIST")})
        if cuda and not facts_pf["build_cuda"]:
            raise BuildError(f"job {job.id} needs the CUDA extension but the pre-flight would build CPU only")
        if cuda:
            _add_math_headers(py, env)
        nvcc = str(Path(env["CUDA_HOME"]) / "bin" / "nvcc") if cuda and env.get("CUDA_HOME") else None
        # The cuda-archs check needs cuobjdump: find it now, not after a long compile.
        search = [
            *([Path(env["CUDA_HOME"]) / "bin"] if env.get("CUDA_HOME") else []),
            py.parent,
            *sorted(py.parent.parent.glob("lib/python*/site-packages/nvidia/cu*/bin")),
        ]
        cuobjdump = find_cuobjdump(search)
        if cuda and cuobjdump is None:
            raise BuildError(
                "cuobjdump not found (needed to check the CUDA archs embedded in the wheel): "
                "pip install nvidia-cuda-cuobjdump (requirements-dev.txt), or install the toolkit's cuobjdump"
            )
        report.ccache = _ccache_env(tmp, env, nvcc)
        report.cuda_archs, report.max_jobs, report.nvcc_threads = archs, jobs, threads
        say(
            f"job {job.id}: variant {job.variant}, local version {env[contract.ENV_LOCAL_VERSION]}, "
            f"archs {archs or '-'}, MAX_JOBS={jobs}, NVCC_THREADS={threads}, ccache {'on' if report.ccache else 'off'}"
        )

        dist = tmp / "dist"
        report.compile_s = _compile(py, env, dist, tmp / "build.log")
        built = sorted(dist.glob("*.whl"))
        if len(built) != 1:
            raise BuildError(f"pip wheel produced {len(built)} wheels in {dist}, expected 1: {[w.name for w in built]}")

        say(f"repairing {built[0].name}")
        result = repair.repair_linux(built[0], tmp / "repaired")
        report.platform, report.repaired, report.repair_note = result.platform, result.repaired, result.note
        say(result.note)

        expectation = wheelcheck.Expectation(
            variant=job.variant,
            arch=job.arch,
            cuda_archs=wheelcheck.parse_arch_list(archs) if cuda and archs else None,
            require_cuobjdump=cuda,
        )
        results = wheelcheck.check_wheel(result.wheel, expectation, cuobjdump=cuobjdump)
        report.checks = [dataclasses.asdict(r) for r in results]
        for r in results:
            print(r.line(), flush=True)
        failed = [r.check for r in results if r.status == "fail"]
        if failed:
            raise CheckError(f"wheel {result.wheel.name} failed the check(s): {', '.join(failed)} (details above)")

        final = _atomic_move(result.wheel, opts.out)
        report.wheel = str(final)
        report.total_s = time.monotonic() - started
        say(f"wrote {final} (compile {report.compile_s:.0f} s, total {report.total_s:.0f} s)")
        ok = True
        return report
    finally:
        if opts.report is not None:
            opts.report.parent.mkdir(parents=True, exist_ok=True)
            tmp_report = opts.report.with_name(opts.report.name + ".tmp")
            tmp_report.write_text(json.dumps(dataclasses.asdict(report), indent=2))
            os.replace(tmp_report, opts.report)
        if ok and not opts.keep_temp:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            say(f"temporary files kept in {tmp}" + ("" if ok else " (build log: build.log)"))


# --------------------------------------------------------------------------------------------
# CLI


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``python -m build_matrix build``."""
    parser.description = (
        "Build one job's wheel. --native builds on this machine (Linux): a fresh venv with exactly the "
        "job's torch, pip wheel without build isolation, auditwheel repair (torch/CUDA libraries "
        "excluded), the wheel checks, then an atomic move into --out. Nothing is written to --out on failure."
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = (
        "torch resolution: by default pip installs torch==<the job's torch_version> from pip's configured\n"
        "indexes plus the job's PyTorch index (--extra-index-url). Where that index is unreachable or the\n"
        "version is elsewhere (a mirror, a local wheel), override it: --torch-spec takes any pip requirement\n"
        "or wheel path (e.g. 'torch==2.13.0+cpu' or /opt/wheels/torch-2.13.0+cpu-....whl), --torch-index-url\n"
        "another index ('' = only pip's configured indexes). The installed torch is always verified against\n"
        "the job's variant (torch minor, CUDA build, C++ ABI) before compiling.\n\n"
        "Examples:\n"
        "  python -m build_matrix build --job torch2.13-cpu-linux-x86_64 --native --out wheelhouse\n"
        "  python -m build_matrix build --job torch2.14-cu130-linux-x86_64 --native --out wheelhouse --cuda-archs 9.0"
    )
    parser.add_argument(
        "--job", required=True, help="job id from `python -m build_matrix plan`, e.g. torch2.13-cpu-linux-x86_64"
    )
    parser.add_argument("--native", action="store_true", help="build on this machine, without containers (required)")
    parser.add_argument("--out", required=True, type=Path, help="directory that receives the finished wheel")
    parser.add_argument(
        "--torch-spec", help="pip requirement or wheel path for torch (default: torch==<job torch_version>)"
    )
    parser.add_argument("--torch-index-url", help="extra index for torch (default: the job's PyTorch index; '' = none)")
    parser.add_argument("--cuda-archs", help="TORCH_CUDA_ARCH_LIST override, e.g. '9.0' (default: the job's list)")
    parser.add_argument("--python", default=sys.executable, help="interpreter for the build venv (default: this one)")
    parser.add_argument(
        "--venv", type=Path, help="reuse this venv (created when missing) instead of a fresh temporary one"
    )
    parser.add_argument(
        "--max-jobs", type=int, help="parallel compile jobs (default: $MAX_JOBS, else from cores and free memory)"
    )
    parser.add_argument("--nvcc-threads", type=int, help="nvcc --threads (default: cores / max-jobs, at most 4)")
    parser.add_argument("--keep-temp", action="store_true", help="keep the temporary build directory")
    parser.add_argument("--report", type=Path, help="write a JSON report (wheel, tag, compile time, checks) here")


def run(args: argparse.Namespace) -> int:
    """Entry point of ``python -m build_matrix build``; errors propagate as BuildMatrixError."""
    if not args.native:
        raise BuildError(
            "only native builds run from this command: add --native (cibuildwheel builds run from CI with "
            "the environment of `python -m build_matrix plan --format json`; see docs/building.md)"
        )
    for name in ("max_jobs", "nvcc_threads"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise BuildError(f"Invalid --{name.replace('_', '-')} (expected a positive number): {value!r}")
    if args.cuda_archs:
        try:
            wheelcheck.parse_arch_list(args.cuda_archs)
        except ValueError as exc:
            raise BuildError(str(exc)) from None
    from build_matrix import compat
    from build_matrix.plan import resolve_job

    job = resolve_job(compat.load(getattr(args, "data", None)), args.job)
    if not job.stable_abi and job.compiled_against.torch_minor >= contract.STABLE_TARGET:
        say(
            f"note: {job.id} is not in the release plan (torch >= {contract.STABLE_TARGET[0]}.{contract.STABLE_TARGET[1]} "
            f"is served by the stable-ABI job stable{contract.STABLE_TARGET[0]}.{contract.STABLE_TARGET[1]}-{job.family}-{job.platform}); "
            "building the per-minor (legacy op layer) wheel as asked"
        )
    opts = options_from_args(
        BuildOptions,
        args,
        out=args.out.resolve(),
        venv=args.venv.resolve() if args.venv else None,
        report=args.report.resolve() if args.report else None,
    )
    report = build_job(job, opts)
    print(report.wheel)
    return 0
