"""The contracts every part of the project shares (see docs/ARCHITECTURE.md), one module each:

- :mod:`.project`: the distribution and import names, the version, the wheel tags;
- :mod:`.environment`: every environment variable and the TRUE/FALSE settings parser;
- :mod:`.variants`: variants (one torch minor, or a stable-ABI family), their names and labels;
- :mod:`.wheels`: wheel file names and the torch pin of a wheel's metadata;
- :mod:`.layout`: the site's URL layout and the index base;
- :mod:`.build_record`: the build record's file name and keys;
- :mod:`.commands`: the install commands every part prints;
- :mod:`.cli`: what the command-line tools share (the error base class, exit codes, arguments -> options);
- :mod:`.net`: the network code (the PEP 503/691 index client, index reachability).

This module only re-exports the names of the first six, so ``import causal_conv1d_contract as
contract; contract.Variant`` keeps working; ``commands``, ``cli`` and ``net`` are imported by name.

A top-level package of its own, shipped in the wheel and the sdist next to ``causal_conv1d``:
importing it runs no ``causal_conv1d/__init__.py`` (which imports torch and the compiled
extension), so setup.py and ``build_support`` (inside pip's isolated build environment, maybe
without torch), ``build_matrix``, ``index_site`` and the release rehearsal import it as they import
anything else, and so do the import guard and doctor. It must stay stdlib-only and importable on
Python 3.9: no torch, no compiled code, and no ``packaging`` at import (not a runtime requirement;
only :func:`parse_wheel_name` imports it).
"""

from __future__ import annotations

from causal_conv1d_contract.build_record import (
    BUILD_INFO_FILENAME,
    BUILD_INFO_KEYS,
)
from causal_conv1d_contract.environment import (
    DEV_ENVIRONMENT,
    ENV_DETERMINISTIC,
    ENV_FORCE_BUILD,
    ENV_FORCE_CXX11_ABI,
    ENV_INDEX_TIMEOUT,
    ENV_INDEX_URL,
    ENV_LOCAL_VERSION,
    ENV_PREBUILT_ONLY,
    ENV_SKIP_CUDA_BUILD,
    ENV_STABLE_ABI,
    ENVIRONMENT,
    KERNEL_SWITCHES,
    InvalidSetting,
    env_flag,
)
from causal_conv1d_contract.layout import (
    DEFAULT_INDEX_URL,
    WHEELS_DIR,
    index_base,
    project_page_url,
    project_path,
    quote_path,
    site_base,
    uv_index_name,
    variant_index_url,
    variant_path,
)
from causal_conv1d_contract.project import (
    ABI_TAG,
    DIST_NAME,
    PACKAGE_VERSION,
    PROJECT_NAME,
    PYTHON_TAG,
    REQUIRES_PYTHON,
    TOPLEVEL_ENTRIES,
)
from causal_conv1d_contract.variants import (
    ACCEL_FAMILIES,
    STABLE_ABI_MIN_TORCH,
    STABLE_TARGET,
    BuildVariant,
    InvalidVariant,
    StableVariant,
    Variant,
    accel_family,
    accel_from_cuda,
    build_variant_from_local_version,
    cuda_from_accel,
    local_version,
    official_cxx11_abi,
    parse_build_variant,
    stable_target_macro,
    stable_variant_for,
    variant_from_local_version,
)
from causal_conv1d_contract.wheels import (
    InvalidWheelName,
    WheelName,
    parse_wheel_name,
    torch_requirement,
    wheel_filename,
)

__all__ = [
    "PROJECT_NAME",
    "DIST_NAME",
    "TOPLEVEL_ENTRIES",
    "PACKAGE_VERSION",
    "PYTHON_TAG",
    "ABI_TAG",
    "REQUIRES_PYTHON",
    "DEFAULT_INDEX_URL",
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
    "STABLE_ABI_MIN_TORCH",
    "STABLE_TARGET",
    "ACCEL_FAMILIES",
    "BUILD_INFO_FILENAME",
    "BUILD_INFO_KEYS",
    "InvalidVariant",
    "InvalidWheelName",
    "InvalidSetting",
    "env_flag",
    "Variant",
    "StableVariant",
    "BuildVariant",
    "accel_family",
    "stable_target_macro",
    "stable_variant_for",
    "build_variant_from_local_version",
    "parse_build_variant",
    "WheelName",
    "accel_from_cuda",
    "cuda_from_accel",
    "official_cxx11_abi",
    "torch_requirement",
    "local_version",
    "wheel_filename",
    "parse_wheel_name",
    "variant_from_local_version",
    "WHEELS_DIR",
    "site_base",
    "index_base",
    "variant_path",
    "project_path",
    "variant_index_url",
    "project_page_url",
    "uv_index_name",
    "quote_path",
]
