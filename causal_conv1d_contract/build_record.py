"""The build record every wheel carries next to the package's ``__init__.py``: its file name and keys.

build_support/build_info.py writes it, build_matrix's wheelcheck checks it, causal_conv1d/_guard.py
reads it.
"""

from __future__ import annotations

from typing import Optional, TypedDict

__all__ = ["BUILD_INFO_FILENAME", "BUILD_INFO_KEYS", "BuildRecord"]

#: The build record inside every wheel, next to the package's __init__.py.
BUILD_INFO_FILENAME = "_build_info.json"
#: Keys of the build record, each always present (null where it does not apply).
BUILD_INFO_KEYS = (
    "version",  # full package version, local label included, e.g. "1.7.0+cu128.torch2.7"
    "variant",  # variant name, e.g. "torch2.7-cu128"
    "torch_version",  # torch.__version__ built against, e.g. "2.7.1+cu128"
    "cuda_version",  # torch.version.cuda built against, or null for a CPU build
    "cxx11_abi",  # bool: torch._C._GLIBCXX_USE_CXX11_ABI of the torch built against
    "cuda_archs",  # list of "X.Y" compute capabilities compiled for; [] for a CPU build
    "with_cuda",  # bool: whether the CUDA kernels were compiled in
    "platform",  # the platform tag the wheel was built for, e.g. "linux_x86_64"
    "source_commit",  # git commit of the source tree, or null
    "stable_abi_target",  # "2.10": built on the LibTorch stable ABI with that TORCH_TARGET_VERSION; null: legacy
    "cuda_major",  # int: the CUDA major of the toolkit built with (13 for "13.0"), or null for a CPU build
)


class BuildRecord(TypedDict):
    """The build record as a type: the keys of :data:`BUILD_INFO_KEYS`, in that order (a record read
    from a file is what the file says: readers check the values, e.g. causal_conv1d/_guard.py)."""

    version: str
    variant: str
    torch_version: str
    cuda_version: Optional[str]
    cxx11_abi: bool
    cuda_archs: list[str]
    with_cuda: bool
    platform: str
    source_commit: Optional[str]
    stable_abi_target: Optional[str]
    cuda_major: Optional[int]
