"""What a compiled extension links, imports and embeds, read from the binary itself: its DT_NEEDED
libraries and symbols (pyelftools), the C++ ABI its symbols use, the torch C++ symbols and C shims
it imports (c++filt when present), and the CUDA SASS/PTX it embeds (cuobjdump). The wheel checks
(:mod:`build_matrix.wheelcheck`) and the op-layer test read binaries through these functions.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Optional

__all__ = ["find_cuobjdump", "needed_and_symbols", "binary_cxx11_abi", "embedded_cuda_archs", "torch_cxx_imports"]

_OLD_ABI_RE = re.compile(r"^_ZNK?Ss|(?:RK|PK|R|P|O)Ss(?:[0-9A-Z_E]|$)")
_NEW_ABI_MARKERS = ("St7__cxx11", "B5cxx11")
_PTX_ARCH_RE = re.compile(r"\bsm_(\d+)([af]?)\b|\bcompute_(\d+)([af]?)\b")


def find_cuobjdump(extra_dirs: Iterable[Path] = ()) -> Optional[str]:
    """cuobjdump from PATH, CUDA_HOME/CUDA_PATH, the nvidia-cuda-cuobjdump pip package or triton."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    candidates: list[Path] = [Path(d) / "cuobjdump" for d in extra_dirs]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(Path(os.environ[var]) / "bin" / "cuobjdump")
    for entry in sys.path:
        base = Path(entry)
        candidates += sorted(base.glob("nvidia/cu*/bin/cuobjdump"))
        candidates.append(base / "triton" / "backends" / "nvidia" / "bin" / "cuobjdump")
    for cand in candidates:
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    return None


def needed_and_symbols(path: Path) -> tuple[list[str], list[str]]:
    """(DT_NEEDED libraries, every symbol name) of an ELF binary."""
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    needed: list[str] = []
    symbols: list[str] = []
    with open(path, "rb") as fh:
        elf = ELFFile(fh)
        for section in elf.iter_sections():
            if isinstance(section, DynamicSection):
                needed += [t.needed for t in section.iter_tags() if t.entry.d_tag == "DT_NEEDED"]  # type: ignore[attr-defined]  # set by pyelftools for DT_NEEDED
            elif isinstance(section, SymbolTableSection):
                symbols += [s.name for s in section.iter_symbols() if s.name]
    return needed, symbols


def binary_cxx11_abi(symbols: Sequence[str]) -> Optional[bool]:
    """The C++ ABI a binary uses, from its (mangled) symbols: True (cxx11), False (pre-cxx11), None.

    cxx11 strings live in ``std::__cxx11`` (mangled ``St7__cxx11``) or carry the ``[abi:cxx11]`` tag
    (``B5cxx11``); the old copy-on-write string is ``Ss`` (``_ZNSs…``, ``RKSs`` parameters).
    Raises ValueError when both appear (a mixed binary).
    """
    new = [s for s in symbols if any(m in s for m in _NEW_ABI_MARKERS)]
    old = [s for s in symbols if s.startswith("_Z") and _OLD_ABI_RE.search(s)]
    if new and old:
        raise ValueError(f"both ABIs in one binary, e.g. {new[0]} and {old[0]}")
    if new:
        return True
    if old:
        return False
    return None


def embedded_cuda_archs(cuobjdump: str, binary: Path) -> tuple[set[str], set[str]]:
    """(SASS archs, PTX archs) embedded in a binary, as cuobjdump keys (``"90"``, ``"90a"``)."""
    sass: set[str] = set()
    ptx: set[str] = set()
    for flag, dest in (("--list-elf", sass), ("--list-ptx", ptx)):
        proc = subprocess.run([cuobjdump, flag, str(binary)], capture_output=True, text=True)
        text = proc.stdout + proc.stderr
        if proc.returncode != 0 and "does not contain device code" not in text:
            raise RuntimeError(f"{cuobjdump} {flag} failed (exit {proc.returncode}): {text.strip()[-400:]}")
        for m in _PTX_ARCH_RE.finditer(proc.stdout):
            dest.add((m.group(1) or m.group(3)) + (m.group(2) or m.group(4) or ""))
    return sass, ptx


#: Namespaces of torch's C++ API; a stable-ABI binary imports no symbol of theirs.
_TORCH_CXX_PREFIXES = ("c10::", "at::", "torch::", "caffe2::")
_TORCH_CXX_RE = re.compile(r"(?:^|[^\w:])(?:c10|at|torch|caffe2)::")
#: Their mangled nested-name components (used where c++filt is not installed).
_TORCH_MANGLED_RE = re.compile(r"(?<![0-9])(?:3c10|2at|5torch|6caffe2)(?=[0-9A-Z])")


def _undefined_dynamic_symbols(path: Path) -> list[str]:
    """``nm -D --undefined-only``: the names the binary imports from other libraries."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    names: list[str] = []
    with open(path, "rb") as fh:
        section = ELFFile(fh).get_section_by_name(".dynsym")
        if isinstance(section, SymbolTableSection):
            names = [s.name for s in section.iter_symbols() if s.name and s.entry.st_shndx == "SHN_UNDEF"]
    return names


def _demangle(names: list[str]) -> Optional[list[str]]:
    """The names demangled by c++filt (one process for all), or None when it is not installed."""
    tool = shutil.which("c++filt")
    if tool is None or not names:
        return None if tool is None else []
    proc = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True, timeout=60)
    out = proc.stdout.splitlines()
    return out if proc.returncode == 0 and len(out) == len(names) else None


def torch_cxx_imports(path: Path) -> tuple[list[str], list[str]]:
    """(torch C++ symbols the ELF binary imports, demangled; the torch C shims it imports).

    A binary built on the LibTorch stable ABI imports only C functions from torch (``aoti_torch_*``,
    ``torch_*``) besides libc, libstdc++, the CUDA runtime and Python; any ``c10::``, ``at::`` or
    ``torch::`` symbol ties it to one torch build.
    """
    names = _undefined_dynamic_symbols(path)
    demangled = _demangle(names)
    offending = []
    for i, name in enumerate(names):
        if not name.startswith("_Z"):
            continue
        if demangled is not None:
            if _TORCH_CXX_RE.search(demangled[i]):
                offending.append(demangled[i])
        elif _TORCH_MANGLED_RE.search(name):
            offending.append(name)
    shims = sorted(n for n in names if n.startswith(("aoti_torch_", "torch_")))
    return offending, shims
