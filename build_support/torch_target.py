"""The target torch of a build: which torch the wheel is for, and its variant.

The torch importable in this build process, unless this is pip's isolated build environment (then
that torch -- if any -- is not the user's): then the user's interpreter is asked, run with pip's
isolation variables removed. pypa/build and uv build in a fresh venv: there the base interpreter's
torch is asked when the venv has none.
"""

from __future__ import annotations

import os
import sys
from typing import Optional

import causal_conv1d_contract as contract
from build_support.torch_probe import TorchInfo, torch_info
from causal_conv1d_contract.net import IndexClientError

__all__ = ["in_pip_isolation", "find_target_torch", "target_variant"]

_PIP_ISOLATION_VARS = ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONHOME", "PYTHONSAFEPATH")


def in_pip_isolation() -> bool:
    """Whether this process runs in pip's isolated build environment."""
    pp = os.environ.get("PYTHONPATH", "")
    return "pip-build-env-" in pp or bool(os.environ.get("PIP_BUILD_TRACKER") and os.environ.get("PYTHONNOUSERSITE"))


def _in_isolated_venv() -> bool:
    """pypa/build and uv build in a fresh virtual environment named build-env-* / builds-v*."""
    prefix = sys.prefix.replace("\\", "/")
    return "/build-env-" in prefix or "/builds-v" in prefix


def find_target_torch() -> tuple[TorchInfo, str]:
    """(torch info, which one and why)."""
    isolated = in_pip_isolation()
    if not isolated and not _in_isolated_venv():
        info = torch_info()
        return info, f"the torch importable in this build ({info.location or 'not importable'}; no build isolation)"
    here = torch_info()
    if isolated:
        env = {k: v for k, v in os.environ.items() if k not in _PIP_ISOLATION_VARS}
        user = torch_info(sys.executable, env=env, fast=True)
        if user.importable:
            if here.importable and here.version != user.version:
                why = (
                    f"pip's isolated build environment has torch {here.version}, which is not the torch you "
                    f"install into; "
                )
            else:
                why = "pip builds in an isolated environment, so "
            return user, f"{why}using the torch of your interpreter {sys.executable} ({user.location})"
        if here.importable:
            return here, (
                f"your interpreter {sys.executable} has no torch ({user.error}); using the torch of the "
                f"isolated build environment ({here.location})"
            )
        return user, f"no torch in your interpreter {sys.executable} nor in pip's isolated build environment"
    base = getattr(sys, "_base_executable", None)
    if not here.importable and base and base != sys.executable:
        user = torch_info(base, env={k: v for k, v in os.environ.items() if k not in _PIP_ISOLATION_VARS}, fast=True)
        if user.importable:
            return user, f"isolated build venv has no torch; using the torch of the base interpreter {base}"
    return here, f"the torch importable in the isolated build venv ({here.location or 'not importable'})"


def _forced_abi() -> Optional[bool]:
    return contract.env_flag(contract.ENV_FORCE_CXX11_ABI)


def target_variant(info: TorchInfo) -> contract.Variant:
    """The variant for a torch (``contract.Variant``); raises IndexClientError when there is none."""
    if not info.importable or not info.version:
        raise IndexClientError("no torch found to pick a variant for")
    if info.hip:
        raise IndexClientError(f"torch {info.version} is a ROCm build; no prebuilt wheels exist for ROCm")
    abi = _forced_abi()
    try:
        return contract.Variant.from_torch(info.version, info.cuda, info.cxx11_abi if abi is None else abi)
    except contract.InvalidVariant as exc:
        raise IndexClientError(str(exc)) from None
