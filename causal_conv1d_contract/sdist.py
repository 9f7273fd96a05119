"""The source distribution: its file name and where the site serves it.

The site serves this project's sdist beside the wheels, on a PEP 503 index of its own,
``<site>/source/`` (project page ``<site>/source/causal-conv1d/``). A from-source install names that
index and pins this project's exact version, so pip and uv build *this* sdist and never another
project's distribution of the same name on PyPI (upstream causal-conv1d publishes 1.7.0 there; see
docs/release.md, "Version scheme"). Wheels stay on the variant pages (``whl/<variant>/``), so a
command with ``--only-binary`` never meets the sdist, and a uv command for a wheel never builds it.

Stdlib only, like the rest of the contracts.
"""

from __future__ import annotations

import re

from causal_conv1d_contract import DIST_NAME, PROJECT_NAME, site_base

__all__ = [
    "SOURCE_DIR",
    "SDIST_SUFFIX",
    "InvalidSdistName",
    "sdist_filename",
    "parse_sdist_name",
    "source_path",
    "source_index_url",
    "source_page_url",
    "UV_SOURCE_INDEX_NAME",
]

#: The folder of the sdist's PEP 503 index under the site root.
SOURCE_DIR = "source"
SDIST_SUFFIX = ".tar.gz"
#: uv's ``--index NAME=URL`` name of that index.
UV_SOURCE_INDEX_NAME = f"{PROJECT_NAME}-source"

# PEP 625: {normalised name}-{version}.tar.gz; a public version only (an index takes no local label)
_SDIST_RE = re.compile(rf"^{DIST_NAME}-(?P<version>\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d+)?(?:\.dev\d+)?)\.tar\.gz$")


class InvalidSdistName(ValueError):
    """A file name that is not this project's sdist (PEP 625: ``causal_conv1d-<public version>.tar.gz``)."""


def sdist_filename(version: str) -> str:
    """``1.7.0.post1`` -> ``causal_conv1d-1.7.0.post1.tar.gz``."""
    name = f"{DIST_NAME}-{version}{SDIST_SUFFIX}"
    parse_sdist_name(name)  # validates
    return name


def parse_sdist_name(filename: str) -> str:
    """The version of an sdist file name; InvalidSdistName for anything else."""
    m = _SDIST_RE.match(filename)
    if not m:
        raise InvalidSdistName(
            f"Invalid sdist filename (expected '{DIST_NAME}-<version>{SDIST_SUFFIX}' with a public version, "
            f"e.g. {DIST_NAME}-1.7.0.post1{SDIST_SUFFIX}): {filename!r}"
        )
    return m.group("version")


def source_path() -> str:
    """The sdist's PEP 503 root relative to the site root: ``source/``."""
    return f"{SOURCE_DIR}/"


def source_index_url(base: str) -> str:
    """``<site>/source/``: what ``--extra-index-url`` / uv's ``--index`` takes for a from-source install."""
    return site_base(base) + source_path()


def source_page_url(base: str) -> str:
    """``<site>/source/causal-conv1d/``: the project page listing the sdists."""
    return f"{source_index_url(base)}{PROJECT_NAME}/"
