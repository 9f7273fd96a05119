"""The project's names and the tags of its wheels: what pip sees and what a wheel installs."""

from __future__ import annotations

__all__ = [
    "PROJECT_NAME",
    "DIST_NAME",
    "TOPLEVEL_ENTRIES",
    "PACKAGE_VERSION",
    "PYTHON_TAG",
    "ABI_TAG",
    "REQUIRES_PYTHON",
]

PROJECT_NAME = "causal-conv1d"  #: the distribution name as pip sees it (PEP 503 normalised)
DIST_NAME = "causal_conv1d"  #: the name in wheel files and the import name
#: What a wheel installs at the top of site-packages: the package, these contracts (torch-free, so the
#: build and the tools import them without importing the package) and upstream's module name.
TOPLEVEL_ENTRIES = ("causal_conv1d", "causal_conv1d_contract", "causal_conv1d_cuda.py")
#: Upstream causal-conv1d 1.7.0 with our post-release number: the API is upstream 1.7.0 (a drop-in), and the
#: version is one PyPI does not hold under the name (upstream published 1.7.0 there), so a pinned
#: from-source install builds this sdist and a release never collides; docs/release.md, "Version scheme".
PACKAGE_VERSION = "1.7.0.post1"
PYTHON_TAG = "cp39"  #: one abi3 wheel serves every CPython >= 3.9 (torch narrows it further)
ABI_TAG = "abi3"
REQUIRES_PYTHON = ">=3.9"
