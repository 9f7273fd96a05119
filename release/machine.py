"""What this machine can build: its build-job platform and the CUDA compiler it has (if any)."""

from __future__ import annotations

import dataclasses
import os
import platform as _platform
import re
import shutil
import subprocess
from pathlib import Path
from typing import Optional

from release.errors import UsageError

__all__ = ["Machine", "detect", "job_platform", "nvcc_version", "wheel_job_platform"]

#: (system, machine) -> the build-job platform of docs/ARCHITECTURE.md ("Build jobs").
_PLATFORMS = {
    ("linux", "x86_64"): "linux-x86_64",
    ("linux", "amd64"): "linux-x86_64",
    ("linux", "aarch64"): "linux-aarch64",
    ("linux", "arm64"): "linux-aarch64",
    ("windows", "amd64"): "windows-amd64",
    ("windows", "x86_64"): "windows-amd64",
}


@dataclasses.dataclass(frozen=True)
class Machine:
    platform: str  # build-job platform, e.g. "linux-x86_64"
    nvcc: Optional[Path]  # the CUDA compiler found, or None
    cuda_version: Optional[str]  # "13.0" from `nvcc --version`, or None
    cores: int

    @property
    def cuda_major(self) -> Optional[int]:
        return None if self.cuda_version is None else int(self.cuda_version.split(".")[0])


def job_platform(system: Optional[str] = None, machine: Optional[str] = None) -> str:
    system = system or _platform.system()
    machine = machine or _platform.machine()
    try:
        return _PLATFORMS[(system.lower(), machine.lower())]
    except KeyError:
        known = ", ".join(sorted(set(_PLATFORMS.values())))
        raise UsageError(
            f"Invalid machine for a local release (no build-job platform for {system}/{machine}): "
            f"wheels are built for {known}"
        ) from None


def wheel_job_platform(platform_tag: str) -> Optional[str]:
    """The build-job platform of a wheel platform tag (``manylinux_2_28_x86_64`` -> ``linux-x86_64``)."""
    if platform_tag == "win_amd64":
        return "windows-amd64"
    m = re.match(r"^(?:linux|manylinux\d*|manylinux_\d+_\d+|musllinux_\d+_\d+)_(x86_64|aarch64)$", platform_tag)
    if m:
        return f"linux-{m.group(1)}"
    return None


def _find_nvcc() -> Optional[Path]:
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = os.environ.get(var)
        if home:
            candidate = Path(home) / "bin" / ("nvcc.exe" if os.name == "nt" else "nvcc")
            if candidate.is_file():
                return candidate
    found = shutil.which("nvcc")
    if found:
        return Path(found)
    default = Path("/usr/local/cuda/bin/nvcc")
    return default if default.is_file() else None


def nvcc_version(nvcc: Path) -> Optional[str]:
    """``"13.0"`` from ``nvcc --version`` ("Cuda compilation tools, release 13.0, V13.0.88")."""
    try:
        out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"release (\d+)\.(\d+)", out)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def detect() -> Machine:
    nvcc = _find_nvcc()
    return Machine(
        platform=job_platform(),
        nvcc=nvcc,
        cuda_version=nvcc_version(nvcc) if nvcc is not None else None,
        cores=os.cpu_count() or 1,
    )
