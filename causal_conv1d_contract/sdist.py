"""The source distribution's file name (PEP 625): ``causal_conv1d-<public version>.tar.gz``.

The site serves it on its own index, ``<site>/source/`` (:mod:`causal_conv1d_contract.layout`);
the version scheme that keeps it apart from upstream's sdists on PyPI is docs/release.md's
"Version scheme". Stdlib only, like the rest of the contracts.
"""

from __future__ import annotations

import re

from causal_conv1d_contract.project import DIST_NAME

__all__ = ["SDIST_SUFFIX", "InvalidSdistName", "sdist_filename", "parse_sdist_name"]

SDIST_SUFFIX = ".tar.gz"

# PEP 625: {normalised name}-{version}.tar.gz; a public version only (an index takes no local label)
_SDIST_RE = re.compile(
    rf"^{DIST_NAME}-(?P<version>\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d+)?(?:\.dev\d+)?)\.tar\.gz$"
)


class InvalidSdistName(ValueError):
    """A file name that is not this project's sdist."""


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
