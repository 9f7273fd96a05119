"""The one compiled extension, ``causal_conv1d._C``: sources, flags, CUDA/CPU choice.

setup.py calls :func:`install_requires`, :func:`ext_modules` and :func:`cmdclass`. torch and
``torch.utils.cpp_extension`` are imported inside these functions only, so that setup.py (and
``build_support.toolchain``) can prepare the environment (CUDA_HOME, PATH, ...) first.

Environment variables honoured here (names from causal_conv1d_contract where shared):

* ``CAUSAL_CONV1D_SKIP_CUDA_BUILD=TRUE``: build the CPU kernels only, even with a CUDA torch.
* ``CAUSAL_CONV1D_STABLE_ABI=TRUE/FALSE``: build the op layer on the LibTorch stable ABI (one library
  for every torch >= contract.STABLE_TARGET) or on ATen (legacy: one library per torch minor).
  Default: stable iff the torch built against is >= contract.STABLE_ABI_MIN_TORCH. Same sources
  either way (csrc/torch_api.h maps the op layer's names onto one or the other).
* ``CAUSAL_CONV1D_FORCE_CXX11_ABI=TRUE/FALSE``: override ``-D_GLIBCXX_USE_CXX11_ABI``
  (default: the running torch's).
* ``NVCC_THREADS``: nvcc ``--threads`` (default 4).
* ``TORCH_CUDA_ARCH_LIST``: CUDA archs; read by torch's own helper.
* ``MAX_JOBS``: parallel compile jobs; read by torch's BuildExtension (ninja).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any, Optional

import causal_conv1d_contract as contract

__all__ = [
    "install_requires",
    "ext_modules",
    "cmdclass",
    "with_cuda",
    "stable_abi",
    "EXT_NAME",
    "PY_LIMITED_API",
]

ROOT = Path(__file__).resolve().parent.parent
EXT_NAME = "causal_conv1d._C"
# The limited API version: cp39-abi3 (contract.PYTHON_TAG). torch's BuildExtension passes its own
# -DPy_LIMITED_API for py_limited_api extensions (3.10 in torch 2.13); only csrc/ops.cpp includes
# Python.h, and it pins this value itself, so no -D flag of ours competes with torch's.
PY_LIMITED_API = "0x03090000"
DEFAULT_NVCC_THREADS = "4"


def _torch_minor() -> tuple[int, int]:
    import torch
    from packaging.version import Version

    v = Version(torch.__version__)
    return (v.major, v.minor)


def stable_abi(torch_minor: Optional[tuple[int, int]] = None) -> bool:
    """Whether the op layer is built on the LibTorch stable ABI: ``CAUSAL_CONV1D_STABLE_ABI`` when set,
    else whether the torch built against is >= contract.STABLE_ABI_MIN_TORCH. A stable build on an
    older torch is refused (its headers lack the stable API the op layer uses)."""
    minor = _torch_minor() if torch_minor is None else torch_minor
    forced = contract.env_flag(contract.ENV_STABLE_ABI)
    if forced is None:
        return minor >= contract.STABLE_ABI_MIN_TORCH
    if forced and minor < contract.STABLE_ABI_MIN_TORCH:
        need = ".".join(map(str, contract.STABLE_ABI_MIN_TORCH))
        raise contract.InvalidSetting(
            f"{contract.ENV_STABLE_ABI}=TRUE needs torch >= {need} to build against, "
            f"but torch {'.'.join(map(str, minor))} is installed"
        )
    return forced


def install_requires() -> list[str]:
    """The runtime requirement: ``torch>=2.10`` (no upper bound) for a stable-ABI build, else the torch
    minor this extension is compiled against."""
    try:
        minor = _torch_minor()
    except ImportError:  # metadata-only invocations (sdist, egg_info) without torch installed
        return ["torch"]
    if stable_abi(minor):
        return [contract.torch_requirement(contract.STABLE_TARGET, stable=True)]
    return [contract.torch_requirement(minor)]


def with_cuda() -> bool:
    """Whether to compile the CUDA kernels: a CUDA torch and no CAUSAL_CONV1D_SKIP_CUDA_BUILD=TRUE."""
    import torch

    if contract.env_flag(contract.ENV_SKIP_CUDA_BUILD):
        return False
    return torch.version.cuda is not None


def _cxx11_abi() -> bool:
    import torch

    forced = contract.env_flag(contract.ENV_FORCE_CXX11_ABI)
    return bool(torch._C._GLIBCXX_USE_CXX11_ABI) if forced is None else forced


def _cxx_std() -> str:
    # torch >= 2.13 headers use C++20 features.
    return "c++20" if _torch_minor() >= (2, 13) else "c++17"


def _rel(paths: list[Path]) -> list[str]:
    # setuptools wants paths relative to setup.py's directory.
    return [p.relative_to(ROOT).as_posix() for p in paths]


def _op_layer_defines(cuda: bool) -> list[str]:
    """The op layer's compile-time switch (csrc/torch_api.h): for a stable build,
    CAUSAL_CONV1D_STABLE_ABI=1 and TORCH_TARGET_VERSION pinned to contract.STABLE_TARGET (so no shim
    newer than that is used), plus USE_CUDA for the CUDA shims (aoti_torch_get_current_cuda_stream)."""
    if not stable_abi():
        return []
    defines = ["CAUSAL_CONV1D_STABLE_ABI=1", f"TORCH_TARGET_VERSION={contract.stable_target_macro()}"]
    if cuda:
        defines.append("USE_CUDA")
    return defines


def _define_flags(defines: list[str]) -> list[str]:
    prefix = "/D" if sys.platform == "win32" else "-D"
    return [prefix + d for d in defines]


def _cxx_flags() -> list[str]:
    std = _cxx_std()
    if sys.platform == "win32":
        return ["/O2", f"/std:{std}", "/openmp", "/Zc:__cplusplus"]
    flags = ["-O3", f"-std={std}", "-fopenmp"]
    flags.append(f"-D_GLIBCXX_USE_CXX11_ABI={int(_cxx11_abi())}")
    return flags


def _nvcc_flags() -> list[str]:
    threads = os.environ.get("NVCC_THREADS", "").strip() or DEFAULT_NVCC_THREADS
    if not threads.isdigit():
        raise ValueError(f"Invalid value for NVCC_THREADS (expected a number): {threads!r}")
    flags = [
        "-O3",
        "-lineinfo",
        f"-std={_cxx_std()}",
        "--threads",
        threads,
        "--expt-relaxed-constexpr",
        "--expt-extended-lambda",
        "--use_fast_math",
        "-DCAUSAL_CONV1D_WITH_CUDA",
    ]
    if sys.platform != "win32":
        flags.append(f"-D_GLIBCXX_USE_CXX11_ABI={int(_cxx11_abi())}")
    return flags


def _link_flags() -> list[str]:
    """OpenMP, and no host debug sections in the library (setuptools compiles with -g: 20 MB of
    DWARF in a CUDA build's _C.so, most of a wheel's download). Symbols stay (.symtab, .dynsym: the
    wheel checks read them), and so does the CUDA line info inside the device code (-lineinfo)."""
    if sys.platform == "win32":
        return []
    return ["-fopenmp", "-Wl,--strip-debug"]


def ext_modules() -> list[Any]:
    """``[causal_conv1d._C]``: a CUDAExtension for a CUDA torch, else a CppExtension (CPU kernels)."""
    from torch.utils.cpp_extension import CppExtension, CUDAExtension

    csrc = ROOT / "csrc"
    # Host sources: the schemas and the CPU kernels; the legacy op layer also compiles the C++
    # autograd of fwd (csrc/autograd.cpp). The stable ABI has no C++ autograd: there the same rules
    # are registered in Python (causal_conv1d/_ops.py).
    cpu_sources = [csrc / "ops.cpp", *sorted((csrc / "cpu").glob("*.cpp"))]
    if not stable_abi():
        cpu_sources.insert(1, csrc / "autograd.cpp")
    common: dict[str, Any] = {
        "name": EXT_NAME,
        "include_dirs": [str(csrc)],
        "py_limited_api": True,
    }
    if with_cuda():
        cuda_sources = sorted((csrc / "cuda").glob("*.cu")) + sorted((csrc / "cuda").glob("*.cpp"))
        if not cuda_sources:
            raise RuntimeError(
                f"No CUDA sources under {csrc / 'cuda'}: set {contract.ENV_SKIP_CUDA_BUILD}=TRUE for a CPU-only build"
            )
        defines = _define_flags(["CAUSAL_CONV1D_WITH_CUDA", *_op_layer_defines(cuda=True)])
        return [
            CUDAExtension(
                sources=_rel(cpu_sources + cuda_sources),
                # nvcc: the kernel files include no torch header, so the op-layer defines do not reach them
                extra_compile_args={"cxx": _cxx_flags() + defines, "nvcc": _nvcc_flags()},
                extra_link_args=_link_flags(),
                **common,
            )
        ]
    return [
        CppExtension(
            sources=_rel(cpu_sources),
            extra_compile_args={"cxx": _cxx_flags() + _define_flags(_op_layer_defines(cuda=False))},
            extra_link_args=_link_flags(),
            **common,
        )
    ]


def cmdclass() -> dict[str, Any]:
    """``{"build_ext": BuildExtension}`` (no Python ABI suffix: one abi3 library; ninja when present)."""
    from torch.utils.cpp_extension import BuildExtension

    use_ninja = shutil.which("ninja") is not None
    return {"build_ext": BuildExtension.with_options(no_python_abi_suffix=True, use_ninja=use_ninja)}
