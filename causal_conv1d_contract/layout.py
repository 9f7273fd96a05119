"""The site's URL layout: ``whl/<variant>/`` (PEP 503 root) and ``whl/<variant>/causal-conv1d/``
(project page) under a base URL, ``source/`` (the sdist's own PEP 503 root), the index base a build
or doctor asks, and uv's index names."""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Mapping
from typing import Optional, Union

from causal_conv1d_contract.environment import ENV_INDEX_URL, InvalidSetting
from causal_conv1d_contract.project import PROJECT_NAME
from causal_conv1d_contract.variants import InvalidVariant, StableVariant, Variant, parse_build_variant

__all__ = [
    "DEFAULT_INDEX_URL",
    "WHEELS_DIR",
    "site_base",
    "index_base",
    "variant_path",
    "project_path",
    "variant_index_url",
    "project_page_url",
    "uv_index_name",
    "quote_path",
    "SOURCE_DIR",
    "UV_SOURCE_INDEX_NAME",
    "source_path",
    "source_index_url",
    "source_page_url",
]

#: The project's published site. Stamped at release time; always overridable by ENV_INDEX_URL.
DEFAULT_INDEX_URL = "https://causal-conv1d.github.io/causal-conv1d/"

#: The folder of the variant indexes under the site root: ``whl/index.html`` lists them.
WHEELS_DIR = "whl"


def site_base(url: str) -> str:
    """A site's base URL as every URL of the layout is made from: with a trailing slash."""
    return url if url.endswith("/") else url + "/"


def index_base(environ: Optional[Mapping[str, str]] = None) -> str:
    """The site to use: ``CAUSAL_CONV1D_INDEX_URL`` when set (a mirror, a ``file://`` copy), else
    :data:`DEFAULT_INDEX_URL`; with a trailing slash. InvalidSetting for a value that is not a site's
    base URL: a plain path (no ``file://``) or a page inside the site (``.../whl/<variant>/``)."""
    raw = (os.environ if environ is None else environ).get(ENV_INDEX_URL, "").strip()
    if not raw:
        return DEFAULT_INDEX_URL
    parts = urllib.parse.urlsplit(raw)
    expected = (
        f"expected the site's base URL, the folder that holds {WHEELS_DIR}/ and index.html: "
        "http(s)://HOST/PATH/ or file:///PATH/"
    )
    if parts.scheme not in ("http", "https", "file") or (parts.scheme != "file" and not parts.netloc):
        hint = f"; for a folder give file://{os.path.abspath(raw)}/" if parts.scheme in ("", "c", "d") else ""
        raise InvalidSetting(f"Invalid value for {ENV_INDEX_URL} ({expected}): {raw!r}{hint}")
    segments = parts.path.split("/")
    for i, (segment, after) in enumerate(zip(segments, segments[1:])):
        # whl/<variant>/... (a variant page) or source/causal-conv1d/ (the sdist page): a page, not the site
        if (segment == WHEELS_DIR and _is_variant_name(after)) or (segment == SOURCE_DIR and after == PROJECT_NAME):
            root = urllib.parse.urlunsplit(parts._replace(path="/".join(segments[:i]) + "/", query="", fragment=""))
            raise InvalidSetting(
                f"Invalid value for {ENV_INDEX_URL} ({expected}): {raw!r} is a page inside the "
                f"site; give the site's base URL, {root!r}"
            )
    return site_base(raw)


def _is_variant_name(name: str) -> bool:
    try:
        parse_build_variant(name)
    except InvalidVariant:
        return False
    return True


def _variant_name(variant: Union[str, Variant, StableVariant]) -> str:
    return variant if isinstance(variant, str) else variant.name


def variant_path(variant: Union[str, Variant, StableVariant]) -> str:
    """The PEP 503 root of a variant relative to the site root: ``whl/<variant>/``."""
    return f"{WHEELS_DIR}/{_variant_name(variant)}/"


def project_path(variant: Union[str, Variant, StableVariant]) -> str:
    """The PEP 503 project page of a variant relative to the site root: ``whl/<variant>/causal-conv1d/``."""
    return f"{variant_path(variant)}{PROJECT_NAME}/"


def variant_index_url(index_url: str, variant: Union[str, Variant, StableVariant]) -> str:
    """The PEP 503 root of a variant: ``<site>/whl/<variant>/`` (what ``--extra-index-url`` takes)."""
    return site_base(index_url) + variant_path(variant)


def project_page_url(index_url: str, variant: Union[str, Variant, StableVariant]) -> str:
    """The PEP 503 project page of a variant: ``<site>/whl/<variant>/causal-conv1d/``."""
    return site_base(index_url) + project_path(variant)


def uv_index_name(variant: Union[str, Variant, StableVariant]) -> str:
    """The name uv's ``--index NAME=URL`` / ``[[tool.uv.index]]`` gives a variant's index:
    ``causal-conv1d-torch2-13-cpu``, ``causal-conv1d-stable2-10-cu13`` (dots become dashes)."""
    return f"{PROJECT_NAME}-{_variant_name(variant)}".replace(".", "-")


def quote_path(path: str) -> str:
    """URL-quote a path segment by segment; ``+`` becomes ``%2B``."""
    return "/".join(urllib.parse.quote(part, safe="") for part in path.split("/"))


#: The sdist's PEP 503 root under the site root. Wheels stay on the variant pages, so a command with
#: ``--only-binary`` never meets the sdist, and a uv command for a wheel never builds it; a from-source
#: install names this index and pins this project's version (``causal_conv1d_contract.commands``),
#: so it builds *this* sdist, never PyPI's upstream package of the same name.
SOURCE_DIR = "source"
#: uv's ``--index NAME=URL`` name of that index.
UV_SOURCE_INDEX_NAME = f"{PROJECT_NAME}-source"


def source_path() -> str:
    """The sdist's PEP 503 root relative to the site root: ``source/``."""
    return f"{SOURCE_DIR}/"


def source_index_url(base: str) -> str:
    """``<site>/source/``: what ``--extra-index-url`` / uv's ``--index`` takes for a from-source install."""
    return site_base(base) + source_path()


def source_page_url(base: str) -> str:
    """``<site>/source/causal-conv1d/``: the project page listing the sdists."""
    return f"{source_index_url(base)}{PROJECT_NAME}/"
