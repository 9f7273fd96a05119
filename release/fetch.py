"""``python -m release fetch-site URL --out DIR``: the published site's state, to publish on top of.

Publishing is append-only (index_site merges new wheels into the existing manifest, and needs the
``files/<wheel>.metadata`` of every wheel already published). The release workflow's runner starts
empty, so this downloads what the next ``index_site build`` merges into: ``manifest.json``, every
``files/*.metadata``, ``coverage.json`` when present, and the wheel files of self-hosted entries.
A site that does not exist yet (404 on manifest.json) is a first release: DIR is left empty.
"""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path
from typing import Optional

import requests

from release.errors import ReleaseError, UsageError

__all__ = ["fetch_site", "FetchResult"]

_TIMEOUT = (10, 60)  # connect, read (seconds)
_RETRIES = 3


class FetchResult:
    def __init__(self, found: bool, entries: int, files: int) -> None:
        self.found, self.entries, self.files = found, entries, files

    def __str__(self) -> str:
        if not self.found:
            return "no published site yet (first release): nothing to merge"
        return f"{self.entries} published wheel(s); {self.files} file(s) downloaded"


def _get(session: requests.Session, url: str, *, allow_404: bool = False) -> Optional[bytes]:
    last: Optional[Exception] = None
    for _attempt in range(_RETRIES):
        try:
            resp = session.get(url, timeout=_TIMEOUT)
        except requests.RequestException as exc:
            last = exc
            continue
        if resp.status_code == 404 and allow_404:
            return None
        if resp.status_code >= 500:
            last = ReleaseError(f"HTTP {resp.status_code}")
            continue
        if resp.status_code != 200:
            raise ReleaseError(f"GET {url} answered HTTP {resp.status_code}")
        return resp.content
    raise ReleaseError(f"GET {url} failed after {_RETRIES} tries: {last}")


def _write(path: Path, data: bytes, *, root: Path) -> None:
    if root.resolve() not in path.resolve().parents:
        raise ReleaseError(f"the published manifest names a path outside the site: {path}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.part")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def fetch_site(base_url: str, out: Path, *, session: Optional[requests.Session] = None) -> FetchResult:
    from index_site.manifest import parse_manifest

    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"Invalid site URL (expected http(s)://…): {base_url!r}")
    base = base_url if base_url.endswith("/") else base_url + "/"
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"Invalid --out {out}: not empty (fetch into a fresh directory)")
    session = session or requests.Session()
    raw = _get(session, base + "manifest.json", allow_404=True)
    out.mkdir(parents=True, exist_ok=True)
    if raw is None:
        return FetchResult(False, 0, 0)
    manifest, problems = parse_manifest(raw.decode("utf-8"), base + "manifest.json")
    if problems:
        listed = "; ".join(str(p) for p in problems[:5])
        raise ReleaseError(f"the published manifest has problems ({listed}); fix them before publishing on top")
    files = 0
    for entry in manifest.entries:
        meta = f"files/{entry.filename}.metadata"
        _write(out / meta, _get(session, base + urllib.parse.quote(meta)) or b"", root=out)
        files += 1
        if entry.is_relative:
            rel = urllib.parse.unquote(entry.url.split("#", 1)[0])
            _write(out / rel, _get(session, urllib.parse.urljoin(base, entry.url.split("#", 1)[0])) or b"", root=out)
            files += 1
    coverage = _get(session, base + "coverage.json", allow_404=True)
    if coverage is not None:
        _write(out / "coverage.json", coverage, root=out)
        files += 1
    _write(out / "manifest.json", raw, root=out)
    return FetchResult(True, len(manifest.entries), files + 1)
