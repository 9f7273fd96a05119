"""``verify``: every link of a site (a folder or a URL) resolves and matches its hash, size and metadata."""

from __future__ import annotations

__all__ = ["verify_site"]

import hashlib
import json
import tempfile
import urllib.error
import urllib.parse
import zipfile
from pathlib import Path
from typing import IO, Any, Optional

import causal_conv1d_contract as contract
from causal_conv1d_contract import net
from causal_conv1d_contract.net import IndexClientError
from index_site.coverage import COVERAGE_NAME, CoverageRow, page_entries, read_coverage
from index_site.errors import IndexSiteError, Problem
from index_site.manifest import MANIFEST_NAME, Entry, parse_manifest

_TIMEOUT = 60


class _Fetcher:
    """Opens file:// and http(s):// URLs (``causal_conv1d_contract.net``); a directory URL means
    its index.html."""

    def open(self, url: str, accept: Optional[str] = None) -> IO[bytes]:
        return net.open_url(url, accept=accept, timeout=_TIMEOUT, user_agent="causal-conv1d-index-site-verify")

    def read(self, url: str, accept: Optional[str] = None) -> bytes:
        with self.open(url, accept) as f:
            return f.read()


def _anchors(fetcher: _Fetcher, url: str) -> tuple[list[dict[str, Optional[str]]], dict[str, Optional[str]]]:
    """(the attributes of every <a>, the <meta name> tags) of an HTML page."""
    anchors, meta = net.parse_anchors(fetcher.read(url, accept=net.ACCEPT_HTML).decode("utf-8"))
    return [a.attrs for a in anchors], meta


def _describe(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        return f"cannot connect ({exc.reason})"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return str(exc)  # IndexClientError: its one line


def _base_url(target: str) -> str:
    parts = urllib.parse.urlsplit(target)
    if parts.scheme in ("http", "https", "file"):
        return target if target.endswith("/") else target + "/"
    path = Path(target)
    if not path.is_dir():
        raise IndexSiteError(f"not a site folder or an http(s):// URL: {target!r}")
    return path.resolve().as_uri() + "/"


def _check_wheel(
    fetcher: _Fetcher,
    url: str,
    entry: Optional[Entry],
    attrs: dict[str, Optional[str]],
    where: str,
    problems: list[Problem],
) -> None:
    """Download one linked file, check hash and size, and compare its METADATA with the .metadata file."""
    name = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
    with tempfile.TemporaryDirectory() as tmp:
        local = Path(tmp) / "wheel.whl"
        digest = hashlib.sha256()
        size = 0
        try:
            with fetcher.open(url) as src, open(local, "wb") as dst:
                while chunk := src.read(1 << 20):
                    digest.update(chunk)
                    dst.write(chunk)
                    size += len(chunk)
        except (OSError, urllib.error.URLError) as exc:
            problems.append(Problem(where, f"link to {name!r} does not resolve: {url} ({_describe(exc)})"))
            return
        sha256 = digest.hexdigest()
        fragment = urllib.parse.urlsplit(attrs.get("href") or "").fragment
        if fragment != f"sha256={sha256}":
            problems.append(Problem(where, f"{name!r}: link fragment {fragment!r} but the file's sha256 is {sha256}"))
        if entry is not None and entry.size != size:
            problems.append(Problem(where, f"{name!r}: the manifest says {entry.size} bytes, the file has {size}"))
        if entry is not None and entry.sha256 != sha256:
            problems.append(Problem(where, f"{name!r}: the manifest says sha256 {entry.sha256}, the file has {sha256}"))
        core = attrs.get("data-core-metadata")
        if core is None:
            return
        if attrs.get("data-dist-info-metadata") != core:
            problems.append(Problem(where, f"{name!r}: data-dist-info-metadata differs from data-core-metadata"))
        try:
            metadata = fetcher.read(url.split("#", 1)[0] + ".metadata")
        except (OSError, urllib.error.URLError) as exc:
            problems.append(Problem(where, f"{name!r}: its .metadata does not resolve ({_describe(exc)})"))
            return
        if core != "sha256=" + hashlib.sha256(metadata).hexdigest():
            problems.append(Problem(where, f"{name!r}: .metadata does not match data-core-metadata={core!r}"))
        try:
            with zipfile.ZipFile(local) as zf:
                inside = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
                if len(inside) != 1 or zf.read(inside[0]) != metadata:
                    problems.append(Problem(where, f"{name!r}: its .metadata is not the wheel's METADATA"))
        except (zipfile.BadZipFile, OSError) as exc:
            problems.append(Problem(where, f"{name!r}: not a readable wheel ({exc})"))


def _check_json(
    fetcher: _Fetcher, page_url: str, html_links: dict[str, dict[str, Any]], where: str, problems: list[Problem]
) -> None:
    """The PEP 691 JSON page beside the HTML page lists the same files with the same attributes."""
    try:
        doc = json.loads(fetcher.read(page_url + "index.json", accept=net.ACCEPT_JSON))
        files = {f["filename"]: f for f in doc["files"]}
    except (OSError, urllib.error.URLError, ValueError, KeyError, TypeError) as exc:
        problems.append(Problem(where, f"index.json is missing or not a PEP 691 project page ({_describe(exc)})"))
        return
    if set(files) != set(html_links):
        problems.append(Problem(where, f"index.json lists {sorted(files)} but index.html lists {sorted(html_links)}"))
    for name, link in html_links.items():
        f = files.get(name)
        if f is None:
            continue
        href = link.get("href") or ""
        expected = {
            "url": href.split("#", 1)[0],
            "hashes": {"sha256": urllib.parse.urlsplit(href).fragment.partition("=")[2]},
            "requires-python": link.get("data-requires-python"),
            "core-metadata": {"sha256": (link.get("data-core-metadata") or "").partition("=")[2]},
            "yanked": False if "data-yanked" not in link else (link["data-yanked"] or True),
        }
        got = {k: f.get(k) for k in expected}
        if got != expected:
            problems.append(Problem(where, f"{name!r}: index.json says {got}, index.html says {expected}"))


def _site_coverage(fetcher: _Fetcher, base: str, problems: list[Problem]) -> list[CoverageRow]:
    """The coverage kept in the site (it decides which torch >= 2.10 pages link the stable wheels)."""
    try:
        raw = fetcher.read(base + COVERAGE_NAME)
    except (OSError, urllib.error.URLError):
        return []  # a site built without coverage: stable wheels are on their family pages only
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / COVERAGE_NAME
        path.write_bytes(raw)
        try:
            return read_coverage(path)
        except IndexSiteError as exc:
            problems.append(Problem(base + COVERAGE_NAME, str(exc)))
            return []


def verify_site(target: str) -> tuple[int, list[Problem]]:
    """Check a site; returns (number of files checked, problems).

    Every page links exactly the files ``coverage.page_entries`` gives it: its own variant's, and on a
    torch >= 2.10 page the stable-ABI wheels of its family (also listed on ``whl/stable2.10-<family>/``)."""
    fetcher = _Fetcher()
    base = _base_url(target)
    problems: list[Problem] = []
    try:
        manifest, manifest_problems = parse_manifest(
            fetcher.read(base + MANIFEST_NAME).decode("utf-8"), base + MANIFEST_NAME
        )
    except (OSError, urllib.error.URLError, UnicodeDecodeError) as exc:
        raise IndexSiteError(f"cannot read {base + MANIFEST_NAME}: {_describe(exc)}") from None
    problems += manifest_problems
    by_name = manifest.by_name()
    expected = page_entries(list(manifest.entries), _site_coverage(fetcher, base, problems))
    variants = sorted(expected)
    variants_url = base + contract.WHEELS_DIR + "/"
    try:
        listing, _meta = _anchors(fetcher, variants_url)
        listed = {(a.get("href") or "").rstrip("/") for a in listing}
        for v in variants:
            if v not in listed:
                problems.append(Problem(variants_url, f"variant {v!r} is in the manifest but not listed"))
    except (OSError, urllib.error.URLError, UnicodeDecodeError, IndexClientError) as exc:
        problems.append(Problem(variants_url, f"variant list does not resolve ({_describe(exc)})"))
    checked = 0
    downloaded: set[tuple[str, str, Optional[str]]] = set()
    seen: set[str] = set()
    for variant in variants:
        root_url = contract.variant_index_url(base, variant)
        page_url = contract.project_page_url(base, variant)
        try:
            root, _meta = _anchors(fetcher, root_url)
            if not any((a.get("href") or "").rstrip("/") == contract.PROJECT_NAME for a in root):
                problems.append(Problem(root_url, f"does not link to {contract.PROJECT_NAME}/"))
            page_links, page_meta = _anchors(fetcher, page_url)
        except (OSError, urllib.error.URLError, UnicodeDecodeError, IndexClientError) as exc:
            problems.append(Problem(page_url, f"page does not resolve ({_describe(exc)})"))
            continue
        if page_meta.get("pypi:repository-version") is None:
            problems.append(Problem(page_url, 'no <meta name="pypi:repository-version">'))
        links: dict[str, dict[str, Any]] = {}
        for attrs in page_links:
            href = attrs.get("href") or ""
            url = urllib.parse.urljoin(page_url, href)
            name = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
            links[name] = attrs
            entry = by_name.get(name)
            if entry is None:
                problems.append(Problem(page_url, f"links {name!r}, which is not in the manifest"))
            elif entry not in expected[variant]:
                problems.append(
                    Problem(page_url, f"links {name!r} of variant {entry.variant!r}, which does not serve {variant}")
                )
            else:
                seen.add(name)
                if (attrs.get("data-requires-python") or None) != entry.requires_python:
                    problems.append(Problem(page_url, f"{name!r}: data-requires-python differs from the manifest"))
                yanked = attrs.get("data-yanked") if "data-yanked" in attrs else None
                if (yanked is None) != (entry.yanked is None) or (yanked or "") != (entry.yanked or ""):
                    problems.append(Problem(page_url, f"{name!r}: data-yanked differs from the manifest"))
            # one file, many pages: download it once; a page whose link differs is checked in full
            key = (url.split("#", 1)[0], href.partition("#")[2], attrs.get("data-core-metadata"))
            if key not in downloaded:
                _check_wheel(fetcher, url, entry, attrs, page_url, problems)
                downloaded.add(key)
                checked += 1
        for e in expected[variant]:
            if e.filename not in links:
                problems.append(
                    Problem(page_url, f"does not link {e.filename!r} (variant {e.variant!r} serves {variant})")
                )
        _check_json(fetcher, page_url, links, page_url, problems)
    for name in sorted(set(by_name) - seen):
        problems.append(Problem(base + MANIFEST_NAME, f"{name!r} is in the manifest but on no project page"))
    checked += _check_sdists(fetcher, base, list(manifest.sdists), problems)
    return checked, problems


def _check_sdists(fetcher: _Fetcher, base: str, sdists: list[Any], problems: list[Problem]) -> int:
    """The sdist page (``source/causal-conv1d/``) links exactly the manifest's sdists, each file resolving
    with its sha256 and size; returns how many files were downloaded."""
    if not sdists:
        return 0
    page_url = contract.source_page_url(base)
    try:
        anchors, _meta = _anchors(fetcher, page_url)
    except (OSError, urllib.error.URLError, UnicodeDecodeError, IndexClientError) as exc:
        problems.append(Problem(page_url, f"page does not resolve ({_describe(exc)})"))
        return 0
    links = {}
    for attrs in anchors:
        url = urllib.parse.urljoin(page_url, attrs.get("href") or "")
        links[urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])] = (url, attrs)
    checked = 0
    for sd in sdists:
        if sd.filename not in links:
            problems.append(Problem(page_url, f"does not link the sdist {sd.filename!r}"))
            continue
        url, attrs = links.pop(sd.filename)
        if url.partition("#sha256=")[2] != sd.sha256:
            problems.append(Problem(page_url, f"{sd.filename!r}: the link's sha256 differs from the manifest"))
        try:
            data = fetcher.read(url.split("#", 1)[0])
        except (OSError, urllib.error.URLError) as exc:
            problems.append(Problem(url, f"does not resolve ({_describe(exc)})"))
            continue
        checked += 1
        if hashlib.sha256(data).hexdigest() != sd.sha256 or len(data) != sd.size:
            problems.append(Problem(url, f"{sd.filename!r}: its sha256 or size differs from the manifest"))
    for name in sorted(links):
        problems.append(Problem(page_url, f"links {name!r}, which is not among the manifest's sdists"))
    return checked
