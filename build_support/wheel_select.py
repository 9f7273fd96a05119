"""Which prebuilt wheel to take: the project pages to ask, their candidates, the best one.

For a torch >= 2.10 (:func:`lookups`): first the stable-ABI family page ``whl/stable2.10-<family>/``
(it serves any torch >= 2.10 of the family, also torch releases newer than the build matrix, and any
C++ ABI), then the torch minor's own page, where the stable wheel or a per-minor wheel of exactly
this variant both count. On a page (:func:`select`): the wheel of exactly this version (public
version == contract.PACKAGE_VERSION, local label of an accepted variant), not yanked,
Requires-Python satisfied, with the best compatible tag (``packaging.tags.sys_tags()``); a
stable-ABI wheel before a per-minor one at the same tag. Pages are fetched and parsed by
``causal_conv1d_contract.net``.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from typing import Optional, Union

from packaging import tags as _tags
from packaging.specifiers import InvalidSpecifier, SpecifierSet

import causal_conv1d_contract as contract
from causal_conv1d_contract import net
from causal_conv1d_contract.net import IndexClientError

__all__ = ["Candidate", "parse_page", "fetch_candidates", "select", "lookups", "find_candidate"]

#: The overall deadline of one project page (the timeout per socket operation and the retries: prebuilt's).
PAGE_DEADLINE_S = 30.0


@dataclasses.dataclass(frozen=True)
class Candidate:
    filename: str
    url: str
    sha256: Optional[str]
    size: Optional[int] = None
    requires_python: Optional[str] = None
    yanked: bool = False


def _candidate(link: net.Link) -> Candidate:
    return Candidate(link.filename, link.url, link.sha256, link.size, link.requires_python, link.is_yanked)


def parse_page(body: bytes, content_type: str, page_url: str) -> list[Candidate]:
    """Candidates of a PEP 691 JSON or PEP 503 HTML project page."""
    return [_candidate(link) for link in net.parse_page(body, content_type, page_url).links]


def fetch_candidates(page_url: str, *, timeout: float = net.DEFAULT_TIMEOUT_S, retries: int = 3) -> list[Candidate]:
    page = net.fetch_page(
        page_url,
        accept=net.ACCEPT_ANY,
        timeout=timeout,
        retries=retries,
        deadline_s=PAGE_DEADLINE_S,
        user_agent="causal-conv1d-setup",
    )
    return parse_page(page.body, page.content_type, page.url)


def select(
    candidates: list[Candidate],
    variant: Union[contract.BuildVariant, Sequence[contract.BuildVariant]],
    supported: Optional[list[_tags.Tag]] = None,
) -> tuple[Optional[Candidate], str]:
    """(the best candidate or None, why none). ``variant``: the accepted wheel variant, or a tuple of
    them (a Variant and its StableVariant); at the same tag rank a stable-ABI wheel wins."""
    accepted = tuple(variant) if isinstance(variant, (tuple, list)) else (variant,)
    supported = list(_tags.sys_tags()) if supported is None else supported
    rank = {t: i for i, t in enumerate(supported)}
    py = ".".join(str(x) for x in sys.version_info[:3])
    best: Optional[tuple[tuple[int, bool], Candidate]] = None
    seen_versions: set[str] = set()
    seen_platforms: set[str] = set()
    for c in candidates:
        if not c.filename.endswith(".whl"):
            continue
        try:
            w = contract.parse_wheel_name(c.filename)
        except contract.InvalidWheelName:
            continue
        if w.variant not in accepted:
            continue
        seen_versions.add(str(w.version))
        if w.public_version != contract.PACKAGE_VERSION or c.yanked:
            continue
        seen_platforms.update(w.platforms)
        if c.requires_python:
            try:
                if not SpecifierSet(c.requires_python).contains(py, prereleases=True):
                    continue
            except InvalidSpecifier:
                continue
        ranks = [rank[t] for t in w.tags if t in rank]
        key = (min(ranks), not isinstance(w.variant, contract.StableVariant)) if ranks else None
        if key is not None and (best is None or key < best[0]):
            best = (key, c)
    if best is not None:
        return best[1], ""
    if seen_platforms:
        return None, (
            f"no {contract.PACKAGE_VERSION} wheel compatible with this platform "
            f"(index has: {', '.join(sorted(seen_platforms))})"
        )
    if seen_versions:
        return None, f"no {contract.PACKAGE_VERSION} wheel (index has versions {', '.join(sorted(seen_versions))})"
    return None, "no wheel"


def lookups(variant: contract.Variant, base: str) -> list[tuple[str, tuple[contract.BuildVariant, ...]]]:
    """The project pages to ask, in order, and the wheel variants each may give (see the module docstring)."""
    stable = None
    try:
        stable = contract.stable_variant_for(variant)
    except contract.InvalidVariant:  # an accelerator with no stable family (e.g. cu118): per-minor only
        pass
    if stable is None:
        return [(contract.project_page_url(base, variant), (variant,))] if variant.is_official else []
    pages: list[tuple[str, tuple[contract.BuildVariant, ...]]] = [(contract.project_page_url(base, stable), (stable,))]
    if variant.is_official:  # an unofficial ABI has no page of its own; the stable wheel serves it
        pages.append((contract.project_page_url(base, variant), (stable, variant)))
    return pages


def find_candidate(
    variant: contract.Variant, base: str, *, timeout: float = net.DEFAULT_TIMEOUT_S, retries: int = 3
) -> tuple[Optional[Candidate], str, list[str]]:
    """(the wheel to use or None, the page it is on, why not: one line per page asked)."""
    why: list[str] = []
    for page, accepted in lookups(variant, base):
        try:
            cand, reason = select(fetch_candidates(page, timeout=timeout, retries=retries), accepted)
        except IndexClientError as exc:
            reason, cand = str(exc), None
        if cand is not None:
            return cand, page, why
        why.append(f"{page}: {reason}")
    return None, "", why
