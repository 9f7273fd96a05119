"""``python -m release check-version [--index-url URL]``: refuse a version the package index already holds.

PyPI holds ``causal-conv1d`` releases of upstream (1.7.0 among them) under this project's name, and an
index never takes a version twice: an upload of a version it has fails, and worse, a pinned
from-source command would build upstream's sdist instead of ours. This pre-flight asks the index's
project page (PEP 691 JSON or PEP 503 HTML, ``https://pypi.org/simple/causal-conv1d/``) for every
version it lists -- from its ``versions`` (PEP 700) and from every sdist and wheel file name -- and
refuses when ``PACKAGE_VERSION`` is among them (PEP 440 equality: ``1.7.0`` is ``1.7.0.0``). A project
the index does not have (404) holds nothing. An index that cannot be asked fails the check: the
release must not go ahead unverified. See docs/release.md, "Version scheme".
"""

from __future__ import annotations

__all__ = ["PYPI_SIMPLE", "versions_on_index", "check_version"]

import json
from typing import Optional

from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, parse_sdist_filename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

import causal_conv1d_contract as contract
from causal_conv1d_contract import net
from release.errors import ReleaseError

PYPI_SIMPLE = "https://pypi.org/simple/"


class VersionTaken(ReleaseError):
    """The version to release is already on the index."""


def _version_of(filename: str) -> Optional[Version]:
    try:
        if filename.endswith(".whl"):
            return parse_wheel_filename(filename)[1]
        return parse_sdist_filename(filename)[1]
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None  # an .exe or .egg of long ago: not a version this check can read


def versions_on_index(index_url: str, *, timeout: float = 20.0) -> set[Version]:
    """Every version of the project that the index's project page lists; empty when it has no such project."""
    url = contract.site_base(index_url) + contract.PROJECT_NAME + "/"
    try:
        resp = net.fetch_page(url, timeout=timeout, retries=3, user_agent="causal-conv1d-release-check")
    except net.IndexClientError as exc:
        if exc.status == 404:
            return set()
        raise ReleaseError(
            f"cannot ask {url} which versions it holds ({exc}); the release does not go ahead "
            "unverified: retry, or pass --index-url for a mirror of the index"
        ) from None
    try:
        page = net.parse_page(resp.body, resp.content_type, resp.url)
    except net.IndexClientError as exc:
        raise ReleaseError(f"{url} is not a package index page ({exc})") from None
    found = {v for v in (_version_of(link.filename) for link in page.links) if v is not None}
    if "json" in resp.content_type:
        try:
            listed = json.loads(resp.body).get("versions", [])
        except (ValueError, AttributeError):
            listed = []
        for raw in listed if isinstance(listed, list) else []:
            try:
                found.add(Version(str(raw)))
            except InvalidVersion:
                continue
    return found


def check_version(index_url: str = PYPI_SIMPLE, version: str = contract.PACKAGE_VERSION) -> str:
    """One line saying the version is free; VersionTaken when the index already holds it."""
    held = versions_on_index(index_url)
    mine = Version(version)
    if mine in held:
        newest = max(held)
        raise VersionTaken(
            f"{contract.PROJECT_NAME} {version} is already on {index_url} (it holds {len(held)} version(s), newest "
            f"{newest}): an index never takes a version twice, and a pinned install would get that file instead of "
            f"this project's. Give the release a version the index does not hold: the next post release of the "
            f'upstream version (PACKAGE_VERSION in causal_conv1d_contract/project.py, docs/release.md "Version scheme")'
        )
    return (
        f"{contract.PROJECT_NAME} {version} is not on {index_url} ({len(held)} other version(s) there): free to release"
    )
