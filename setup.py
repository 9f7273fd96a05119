"""Build script for causal-conv1d.

Kept thin: the contracts live in causal_conv1d/_contract.py, the extension definition in
build_support/extension.py, the machine diagnosis in build_support/toolchain.py and the
index-first wheel step in build_support/prebuilt.py. See README.md ("Installing") for the
environment variables this honours.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from setuptools import find_packages, setup  # noqa: E402

from build_support import extension  # noqa: E402
from build_support.contract import contract  # noqa: E402


def package_version() -> str:
    """The package version, with the local label the build driver stamps (if any)."""
    label = os.environ.get(contract.ENV_LOCAL_VERSION, "").strip()
    if not label:
        return contract.PACKAGE_VERSION
    contract.variant_from_local_version(label)  # validates: a clear error for a bad label
    return f"{contract.PACKAGE_VERSION}+{label}"


setup(
    name=contract.PROJECT_NAME,
    version=package_version(),
    packages=find_packages(include=["causal_conv1d", "causal_conv1d.*"]),
    package_data={"causal_conv1d": [contract.BUILD_INFO_FILENAME]},
    install_requires=extension.install_requires(),
    ext_modules=extension.ext_modules(),
    cmdclass=extension.cmdclass(),
    options={"bdist_wheel": {"py_limited_api": contract.PYTHON_TAG}},
    zip_safe=False,
)
