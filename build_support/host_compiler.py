"""The host C++ compiler of a build: which one, its version, whether it links a shared libstdc++,
and the gcc range each CUDA release supports."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
from typing import Optional

__all__ = ["Compiler", "GCC_RANGE", "gcc_range", "host_compiler", "host_compiler_at", "has_shared_libstdcxx"]

#: Supported host gcc major versions per CUDA (major, minor) -- from the "Host compiler support
#: policy" table of each CUDA release's Linux installation guide. Keys are the first CUDA
#: release of each range; a newer CUDA inherits the closest entry below it.
GCC_RANGE: dict[tuple[int, int], tuple[int, int]] = {
    (11, 0): (6, 9),
    (11, 1): (6, 10),
    (11, 4): (6, 11),
    (12, 0): (6, 12),
    (12, 4): (7, 13),
    (12, 8): (7, 14),
    (13, 0): (8, 15),
}


@dataclasses.dataclass
class Compiler:
    path: Optional[str]
    kind: Optional[str]  # "gcc", "clang", "msvc"
    version: Optional[str]


def has_shared_libstdcxx(compiler: str) -> bool:
    """Whether a gcc-like compiler links a shared libstdc++ (``-print-file-name`` finds the .so)."""
    try:
        proc = subprocess.run(
            [compiler, "-print-file-name=libstdc++.so"], capture_output=True, text=True, timeout=30, check=False
        )
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
        full = subprocess.run(
            [path, "-dumpfullversion", "-dumpversion"], capture_output=True, text=True, timeout=30, check=False
        ).stdout.strip()
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
