"""Write ``causal_conv1d/_build_info.json`` (the build record) at build time.

The record (keys ``contract.BUILD_INFO_KEYS``) says what the compiled extension was built
against; ``causal_conv1d/_guard.py`` compares it with the running torch at import time.

It must land in wheels AND in editable / in-place builds, so :func:`wrap_cmdclass` wraps two
setuptools commands:

- ``build_py``: writes the record into ``build_lib/causal_conv1d/`` (what a wheel packs);
- ``build_ext``: writes it into ``build_lib`` too (after the extension is compiled, so a build that
  compiles nothing still gets one from build_py) and, when it runs in place (``--inplace`` or
  setuptools' editable mode), into the source tree's ``causal_conv1d/`` next to the ``_C`` it
  just copied there.

Nothing here imports torch at module import; :func:`collect` does, at build time, when torch is
importable in the build environment (it has to be, to compile the extension).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import causal_conv1d_contract as contract
from build_support import REPO_ROOT

if TYPE_CHECKING:
    from setuptools import Command  # build_py / build_ext, whose distribution is read

__all__ = ["collect", "write_record", "wrap_cmdclass", "source_commit", "platform_tag", "archs_from_extensions"]

_GENCODE_RE = re.compile(r"arch=compute_(\d+)[a-z]?,\s*code=(?:sm|compute)_(\d+)([a-z]?)")


def platform_tag(plat_name: Optional[str] = None) -> str:
    """The wheel platform tag of this build (``linux_x86_64``, ``win_amd64``, ``macosx_...``).

    auditwheel may later retag a Linux wheel ``manylinux_*``; the record keeps what was built.
    """
    name = plat_name or sysconfig.get_platform()
    return name.replace("-", "_").replace(".", "_").replace(" ", "_")


def source_commit(root: Path = REPO_ROOT) -> Optional[str]:
    """The git commit of the source tree (with ``-dirty`` when it has local changes), else None."""
    if not (root / ".git").exists():
        return None
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{sha}-dirty" if sha and dirty else (sha or None)


def _nvcc_flags(ext: object) -> list[str]:
    args = getattr(ext, "extra_compile_args", None)
    if isinstance(args, Mapping):
        return [str(a) for a in args.get("nvcc", [])]
    return []


def archs_from_extensions(extensions: Iterable[object]) -> list[str]:
    """The CUDA compute capabilities the extensions are compiled for, as ``["8.0", "9.0a", ...]``.

    Read from explicit ``-gencode`` flags; when there are none torch's build helper uses
    ``TORCH_CUDA_ARCH_LIST`` (toolchain.py sets it before the build), so that is read instead.
    """
    archs: list[str] = []
    for ext in extensions:
        for flag in _nvcc_flags(ext):
            for m in _GENCODE_RE.finditer(flag):
                sm = m.group(2)
                arch = f"{sm[:-1]}.{sm[-1]}{m.group(3)}"
                if arch not in archs:
                    archs.append(arch)
    if archs:
        return archs
    env = os.environ.get("TORCH_CUDA_ARCH_LIST", "")
    for item in re.split(r"[;\s,]+", env.strip()):
        item = item.replace("+PTX", "")
        if item and item not in archs:
            archs.append(item)
    return archs


def has_cuda_sources(extensions: Iterable[object]) -> bool:
    return any(str(src).endswith(".cu") for ext in extensions for src in getattr(ext, "sources", []))


_STABLE_DEFINE = "CAUSAL_CONV1D_STABLE_ABI=1"


def is_stable_abi(extensions: Iterable[object]) -> bool:
    """Whether the extensions' op layer is compiled on the LibTorch stable ABI (build_support/extension.py
    passes -DCAUSAL_CONV1D_STABLE_ABI=1 to the host compiler): read from the flags actually used."""
    for ext in extensions:
        args = getattr(ext, "extra_compile_args", None)
        cxx = args.get("cxx", []) if isinstance(args, Mapping) else (args or [])
        if any(str(a).lstrip("-/").startswith("D" + _STABLE_DEFINE) for a in cxx):
            return True
    return False


def _forced_abi() -> Optional[bool]:
    return contract.env_flag(contract.ENV_FORCE_CXX11_ABI)


def collect(version: str, extensions: Iterable[object] = (), plat_name: Optional[str] = None) -> contract.BuildRecord:
    """The build record of the build running now (imports torch)."""
    import torch  # noqa: PLC0415  (the build needs it importable anyway)

    extensions = list(extensions)
    cuda = torch.version.cuda
    abi = _forced_abi()
    if abi is None:
        abi = bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", False))
    with_cuda = has_cuda_sources(extensions)
    stable = is_stable_abi(extensions)
    per_minor = contract.Variant.from_torch(str(torch.__version__), cuda, abi)
    variant: contract.BuildVariant = per_minor
    if stable:  # one library for every torch >= STABLE_TARGET of this accelerator family
        variant = contract.StableVariant(contract.accel_family(per_minor.accel))
    record: contract.BuildRecord = {
        "version": version,
        "variant": variant.name,
        "torch_version": str(torch.__version__),
        "cuda_version": cuda,
        "cxx11_abi": abi,
        "cuda_archs": archs_from_extensions(extensions) if with_cuda else [],
        "with_cuda": with_cuda,
        "platform": platform_tag(plat_name),
        "source_commit": source_commit(),
        "stable_abi_target": variant.torch if stable else None,
        "cuda_major": None if cuda is None else int(str(cuda).split(".", 1)[0]),
    }
    assert tuple(record) == tuple(contract.BUILD_INFO_KEYS), "build record keys drifted from the contract"
    return record


def write_record(package_dir: Path, record: Mapping[str, object]) -> Path:
    """Write the record atomically into ``package_dir``; returns its path."""
    missing = [k for k in contract.BUILD_INFO_KEYS if k not in record]
    if missing:
        raise ValueError(f"build record lacks the keys {missing} (contract.BUILD_INFO_KEYS)")
    package_dir.mkdir(parents=True, exist_ok=True)
    dest = package_dir / contract.BUILD_INFO_FILENAME
    fd, tmp = tempfile.mkstemp(prefix=".build_info.", suffix=".tmp", dir=str(package_dir))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({k: record[k] for k in contract.BUILD_INFO_KEYS}, fh, indent=2)
            fh.write("\n")
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; the record is an ordinary package data file
        os.replace(tmp, dest)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return dest


def _say(msg: str) -> None:
    print(f"causal-conv1d: {msg}", file=sys.stderr, flush=True)


def _plat_name(cmd: Command) -> Optional[str]:
    dist = cmd.distribution
    try:
        bdist = dist.get_command_obj("bdist_wheel", create=False)
    except Exception:  # noqa: BLE001  (older setuptools/wheel spell this differently)
        bdist = None
    return getattr(bdist, "plat_name", None) if bdist is not None else None


def _write_for(cmd: Command, dirs: Iterable[Path]) -> None:
    dist = cmd.distribution
    record = collect(dist.get_version(), dist.ext_modules or [], _plat_name(cmd))
    for d in dirs:
        path = write_record(d, record)
        _say(f"build record {path} (variant {record['variant']}, with_cuda={record['with_cuda']})")


def _source_package_dir(cmd: Command) -> Path:
    build_py = cmd.get_finalized_command("build_py")
    return Path(build_py.get_package_dir(contract.DIST_NAME)).resolve()


def wrap_cmdclass(cmdclass: Mapping[str, type]) -> dict[str, type]:
    """``cmdclass`` with ``build_py`` and ``build_ext`` wrapped to write the build record.

    Classes given (e.g. torch's ``BuildExtension``) are subclassed, not replaced.
    """
    from setuptools.command.build_ext import build_ext as _st_build_ext  # noqa: PLC0415
    from setuptools.command.build_py import build_py as _st_build_py  # noqa: PLC0415

    out = dict(cmdclass)
    base_py = out.get("build_py", _st_build_py)
    base_ext = out.get("build_ext", _st_build_ext)

    class build_py(base_py):  # type: ignore[valid-type,misc]
        def run(self) -> None:
            super().run()
            if not getattr(self, "editable_mode", False):
                _write_for(self, [Path(self.build_lib) / contract.DIST_NAME])

    class build_ext(base_ext):  # type: ignore[valid-type,misc]
        def run(self) -> None:
            super().run()
            dirs = [Path(self.build_lib) / contract.DIST_NAME]
            if self.inplace or getattr(self, "editable_mode", False):
                dirs.append(_source_package_dir(self))
            _write_for(self, dirs)

    build_py.__name__ = build_py.__qualname__ = "build_py"
    build_ext.__name__ = build_ext.__qualname__ = "build_ext"
    out["build_py"] = build_py
    out["build_ext"] = build_ext
    return out
