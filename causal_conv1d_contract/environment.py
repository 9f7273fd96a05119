"""Every environment variable of the project, what it does, and the TRUE/FALSE settings parser.

The C++ side reads the kernel switches with the same rules (csrc/switch_on.h); tests/contract checks
that the C++ sources and the scripts read exactly these names.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Optional

__all__ = [
    "ENV_FORCE_BUILD",
    "ENV_SKIP_CUDA_BUILD",
    "ENV_FORCE_CXX11_ABI",
    "ENV_INDEX_URL",
    "ENV_LOCAL_VERSION",
    "ENV_PREBUILT_ONLY",
    "ENV_INDEX_TIMEOUT",
    "ENV_STABLE_ABI",
    "ENV_DETERMINISTIC",
    "KERNEL_SWITCHES",
    "ENVIRONMENT",
    "DEV_ENVIRONMENT",
    "InvalidSetting",
    "env_flag",
    "FLAG_SETTINGS",
    "check_settings",
]

ENV_FORCE_BUILD = "CAUSAL_CONV1D_FORCE_BUILD"  #: TRUE: skip the index, compile locally
ENV_SKIP_CUDA_BUILD = "CAUSAL_CONV1D_SKIP_CUDA_BUILD"  #: TRUE: build no CUDA extension
ENV_FORCE_CXX11_ABI = "CAUSAL_CONV1D_FORCE_CXX11_ABI"  #: TRUE/FALSE: override the C++ ABI
ENV_INDEX_URL = "CAUSAL_CONV1D_INDEX_URL"  #: base URL (or file://) of the site
ENV_LOCAL_VERSION = "CAUSAL_CONV1D_LOCAL_VERSION"  #: local version label to stamp
ENV_PREBUILT_ONLY = "CAUSAL_CONV1D_PREBUILT_ONLY"  #: TRUE: use a prebuilt wheel or stop; never compile
ENV_INDEX_TIMEOUT = "CAUSAL_CONV1D_INDEX_TIMEOUT"  #: seconds per socket operation talking to the index
#: TRUE: build the op layer on the LibTorch stable ABI; FALSE: the legacy (per-torch-minor) op layer.
#: Unset: stable when the torch built against is >= STABLE_ABI_MIN_TORCH, legacy otherwise.
ENV_STABLE_ABI = "CAUSAL_CONV1D_STABLE_ABI"
#: Accepted for upstream compatibility and not read: both backends' backward is deterministic.
ENV_DETERMINISTIC = "CAUSAL_CONV1D_DETERMINISTIC"

#: The run-time switches of the kernel paths, read once per process by the compiled extension
#: (csrc/switch_on.h, the same rules as :func:`env_flag`); each is on when unset, FALSE turns it off.
KERNEL_SWITCHES = {
    "CAUSAL_CONV1D_FWD_FAST": "CUDA: the channel-first forward fast path (csrc/cuda/fwd_cf_fast.cu; kernel path fwd_cf_fast, csrc/kernel_paths.h)",
    "CAUSAL_CONV1D_BWD_FAST": "CUDA: the channel-first backward fast path (csrc/cuda/bwd_cf_fast.cu; kernel path bwd_cf_fast)",
    "CAUSAL_CONV1D_FWD_CL_FAST": "CUDA: the channel-last forward fast path (csrc/cuda/fwd_cl_fast.cu; kernel path fwd_cl_fast)",
    "CAUSAL_CONV1D_BWD_CL_FAST": "CUDA: the channel-last backward fast path (csrc/cuda/bwd_cl_fast.cu; kernel path bwd_cl_fast)",
    "CAUSAL_CONV1D_UPDATE_FAST": "CUDA: the decode (update) fast path (csrc/cuda/update_fast.cu; kernel path update_fast)",
    "CAUSAL_CONV1D_VARLEN_CL_FAST": "CUDA: the channel-last varlen prefill fast path (csrc/cuda/varlen_cl_fast.cu; kernel path varlen_cl_fast)",
    "CAUSAL_CONV1D_VARLEN_CF_FAST": "CUDA: the channel-first varlen prefill fast path (csrc/cuda/varlen_cf_fast.cu; kernel path varlen_cf_fast)",
    "CAUSAL_CONV1D_SPEC_UPDATE_DECODE": "CUDA: the plain decode step of the serving API on the update fast path when state_len == width - 1 (csrc/cuda/spec_update_decode.cu; kernel path spec_update_decode)",
    "CAUSAL_CONV1D_SPEC_UPDATE_FAST": "CUDA: the decode / speculative update fast path of the serving API (csrc/cuda/spec_update_fast.cu; kernel path spec_update_fast)",
    "CAUSAL_CONV1D_PACKED_FWD_CL_FAST": "CUDA: the packed-sequence forward without states on the channel-last fast forward (csrc/cuda/fwd_cl_fast.cu; kernel path packed_fwd_cl_fast, recorded as varlen_fwd's)",
    "CAUSAL_CONV1D_PACKED_BWD_CL_FAST": "CUDA: the packed-sequence backward on the channel-last fast backward, without states (csrc/cuda/bwd_cl_fast.cu; kernel path packed_bwd_cl_fast)",
    "CAUSAL_CONV1D_CPU_HUGE_PAGES": "CPU: the transparent-huge-page hint for large buffers (csrc/cpu/fwd.cpp)",
}

#: Every environment variable a user or a build may set, and what it does (README.md's table).
#: ``TORCH_CUDA_ARCH_LIST``, ``MAX_JOBS`` and ``NVCC_THREADS`` keep their usual meanings (not ours).
ENVIRONMENT = {
    ENV_FORCE_BUILD: "TRUE: the sdist skips the index and compiles locally",
    ENV_SKIP_CUDA_BUILD: "TRUE: compile the CPU kernels only (no prebuilt CUDA wheel is taken)",
    ENV_FORCE_CXX11_ABI: "TRUE/FALSE: the C++ ABI of a local build (and of the variant looked up)",
    ENV_INDEX_URL: "base URL (or file:// path) of the site; default DEFAULT_INDEX_URL",
    ENV_LOCAL_VERSION: "local version label a release build stamps (always compiles)",
    ENV_PREBUILT_ONLY: "TRUE: never compile; stop when no verified prebuilt wheel is available",
    ENV_INDEX_TIMEOUT: "seconds per socket operation talking to the index (default 15)",
    ENV_STABLE_ABI: "TRUE/FALSE: build the op layer on the LibTorch stable ABI / the legacy one",
    ENV_DETERMINISTIC: "accepted for upstream compatibility and not read (backward is deterministic)",
    **KERNEL_SWITCHES,
}

#: Variables only the tests, CI and the scripts read (scripts/run-tests.sh, scripts/local-release.sh).
DEV_ENVIRONMENT = {
    "CAUSAL_CONV1D_TEST_TORCH": "the torch requirement the tests install (default torch==2.13.0)",
    "CAUSAL_CONV1D_TEST_CPU_WHEEL": "a CPU wheel the tests use instead of building one",
    "CAUSAL_CONV1D_EXPECT_OP_LAYER": "stable|legacy: the op layer tests/causal_conv1d must find loaded",
    "CAUSAL_CONV1D_REQUIRE_LINTERS": "1: a missing workflow linter fails the tests (ci.yml)",
    "CAUSAL_CONV1D_RELEASE_VENV": "the tools venv of scripts/local-release.sh (default .venv-release)",
}


class InvalidSetting(ValueError):
    """An environment variable of this project set to a value it does not take."""


_ENV_TRUE = ("1", "TRUE", "ON", "YES")
_ENV_FALSE = ("0", "FALSE", "OFF", "NO")


def env_flag(name: str, environ: Optional[Mapping[str, str]] = None) -> Optional[bool]:
    """A TRUE/FALSE setting (case-insensitive; also 1/0, ON/OFF, YES/NO); unset or empty -> None."""
    raw = (os.environ if environ is None else environ).get(name, "").strip()
    if not raw:
        return None
    if raw.upper() in _ENV_TRUE:
        return True
    if raw.upper() in _ENV_FALSE:
        return False
    raise InvalidSetting(f"Invalid value for {name} (expected TRUE or FALSE): {raw!r}")


#: The TRUE/FALSE settings of a build (:func:`env_flag`); the kernel switches are the extension's.
FLAG_SETTINGS = (ENV_FORCE_BUILD, ENV_SKIP_CUDA_BUILD, ENV_FORCE_CXX11_ABI, ENV_PREBUILT_ONLY, ENV_STABLE_ABI)


def check_settings(environ: Optional[Mapping[str, str]] = None) -> None:
    """Parse every build and install setting once, up front; InvalidSetting (one line naming the variable
    and the values it takes) for the first that is wrong, whatever path the build would take -- so a bad
    value never passes because the code that reads it did not run (``CAUSAL_CONV1D_PREBUILT_ONLY=sure``
    with a wheel found). The build backend, setup.py, doctor and the CLIs call it before anything else."""
    from causal_conv1d_contract.layout import index_base  # noqa: PLC0415  (layout imports this module)
    from causal_conv1d_contract.net import timeout_from_env  # noqa: PLC0415
    from causal_conv1d_contract.variants import InvalidVariant, build_variant_from_local_version  # noqa: PLC0415

    env = os.environ if environ is None else environ
    for name in FLAG_SETTINGS:
        env_flag(name, env)
    index_base(env)
    timeout_from_env(env)
    label = env.get(ENV_LOCAL_VERSION, "").strip()
    if label:
        try:
            build_variant_from_local_version(label)
        except InvalidVariant as exc:
            raise InvalidSetting(f"Invalid value for {ENV_LOCAL_VERSION} ({exc})") from None
