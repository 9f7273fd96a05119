"""The project's network code: the one client of PEP 503 / PEP 691 index pages (fetch a page, parse
its links) and the reachability check of an index.

Used by the sdist's index-first step (``build_support/prebuilt.py``: fetch, select, download),
``python -m causal_conv1d doctor`` (one request: is the wheel there?), ``index_site verify`` (every
link of a site resolves and matches) and the release rehearsal (the served page lists the wheel);
``build_matrix refresh`` parses PyTorch's pages with :func:`parse_anchors`; the build driver and the
release rehearsal ask :func:`index_reachable` before they use an index.

Stdlib only, like the rest of ``causal_conv1d_contract``: doctor runs in a user's venv that has torch
and this wheel and nothing else (no ``packaging``, no ``requests``), and the index-first step runs
inside pip's isolated build environment, which has only what ``[build-system] requires`` lists. A
library such as ``pypi-simple`` needs ``requests`` and ``packaging`` (docs/ARCHITECTURE.md).

- Fetching (:func:`open_url`, :func:`fetch_page`): ``http(s)://`` through urllib with a
  ``ProxyHandler`` (``http_proxy`` / ``https_proxy`` / ``no_proxy`` from the environment, or the
  mapping given: ``{}`` for none), a timeout per socket operation, an overall deadline and a size
  limit while reading; ``file://`` URLs read the file, a directory its ``index.html``. Retries
  (:func:`fetch_page`) for 5xx, 429 and network errors, never for other 4xx or a refused connection.
- Parsing (:func:`parse_page`): PEP 691 JSON when the content type says so, else PEP 503 HTML:
  each link's file name, absolute URL, ``#sha256=`` fragment, ``data-requires-python``,
  ``data-yanked``, ``data-core-metadata`` / ``data-dist-info-metadata`` (PEP 658/714) and, in
  JSON, ``size``. The raw attributes stay available for checks of the page itself.
"""

from __future__ import annotations

import dataclasses
import html.parser
import http.client
import json
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any, Callable, Optional, Union

from causal_conv1d_contract.environment import ENV_INDEX_TIMEOUT, InvalidSetting

__all__ = [
    "ACCEPT_ANY",
    "ACCEPT_HTML",
    "ACCEPT_JSON",
    "PAGE_LIMIT",
    "IndexClientError",
    "TooLarge",
    "Anchor",
    "Link",
    "Page",
    "timeout_from_env",
    "open_url",
    "read_all",
    "fetch_page",
    "parse_anchors",
    "parse_page",
    "describe",
    "retryable",
    "split_fragment",
    "filename_of",
    "index_reachable",
]

#: PEP 691 JSON preferred, PEP 503 HTML accepted.
ACCEPT_ANY = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
ACCEPT_HTML = "text/html"
ACCEPT_JSON = "application/vnd.pypi.simple.v1+json"
#: The most bytes a page may have (a project page of this project is a few kB).
PAGE_LIMIT = 20 << 20
DEFAULT_TIMEOUT_S = 15.0


class IndexClientError(Exception):
    """The index gave no usable answer; the message is one line for the user. ``status``: the HTTP
    status when the server answered with an error, else None (no answer, or an unusable one)."""

    def __init__(self, message: str, status: Optional[int] = None) -> None:
        super().__init__(message)
        self.status = status


class TooLarge(IndexClientError):
    """More bytes than the limit (the page limit, or the size the index announced)."""


def timeout_from_env(environ: Optional[Mapping[str, str]] = None, default: float = DEFAULT_TIMEOUT_S) -> float:
    """``CAUSAL_CONV1D_INDEX_TIMEOUT``: seconds per socket operation talking to the index (default 15).

    Raises InvalidSetting (naming the variable) for anything but a positive number."""
    raw = (os.environ if environ is None else environ).get(ENV_INDEX_TIMEOUT, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise InvalidSetting(
            f"{ENV_INDEX_TIMEOUT}={raw!r} is not a positive number of seconds; "
            f"unset it or use e.g. {ENV_INDEX_TIMEOUT}=30"
        )
    return value


# --- fetching ------------------------------------------------------------------------------------


@dataclasses.dataclass
class _FileResponse:
    """A ``file://`` URL read like an HTTP response."""

    fh: IO[bytes]
    url: str
    headers: Mapping[str, str]

    def read(self, n: int = -1) -> bytes:
        return self.fh.read(n)

    def geturl(self) -> str:
        return self.url

    def close(self) -> None:
        self.fh.close()

    def __enter__(self) -> _FileResponse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _file_path(url: str) -> Path:
    path = Path(urllib.request.url2pathname(urllib.parse.urlsplit(url).path))
    return path / "index.html" if url.endswith("/") or path.is_dir() else path


def open_url(
    url: str,
    *,
    accept: Optional[str] = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    user_agent: str = "causal-conv1d",
    proxies: Optional[Mapping[str, str]] = None,
) -> Any:
    """An open response (``read``, ``headers``, ``geturl``; a context manager) for ``http(s)://`` or
    ``file://`` (a directory: its ``index.html``). ``proxies``: None = the environment's settings.

    Raises urllib's errors (``HTTPError``, ``URLError``, ``OSError``) unchanged for http(s); OSError
    for a file that cannot be read; IndexClientError for another scheme."""
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme == "file":
        path = _file_path(url)
        ctype = "application/vnd.pypi.simple.v1+json" if path.suffix == ".json" else "text/html"
        return _FileResponse(open(path, "rb"), path.as_uri(), {"Content-Type": ctype})  # noqa: SIM115
    if scheme not in ("http", "https"):
        raise IndexClientError(f"unsupported index URL scheme {scheme!r} (use http(s):// or file://)")
    headers = {"User-Agent": user_agent}
    if accept:
        headers["Accept"] = accept
    handler = urllib.request.ProxyHandler(None if proxies is None else dict(proxies))
    return urllib.request.build_opener(handler).open(urllib.request.Request(url, headers=headers), timeout=timeout)


def read_all(
    resp: Any, deadline: float, limit: Optional[int] = None, sink: Optional[Callable[[bytes], None]] = None
) -> bytes:
    """Read to the end by chunks: IndexClientError past ``deadline`` (``time.monotonic()``), TooLarge past
    ``limit`` bytes (the chunk that crossed it still goes to ``sink``). With ``sink`` returns b""."""
    chunks: list[bytes] = []
    total = 0
    while True:
        if time.monotonic() > deadline:
            raise IndexClientError("timed out (server too slow)")
        chunk = resp.read(1 << 16)
        if not chunk:
            break
        total += len(chunk)
        if limit is not None and total > limit:
            if sink is not None:
                sink(chunk)
            raise TooLarge(f"response larger than expected ({total} > {limit} bytes)")
        if sink is None:
            chunks.append(chunk)
        else:
            sink(chunk)
    return b"".join(chunks)


def describe(exc: BaseException, timeout: float) -> str:
    """One line for a failed request: ``HTTP 404``, ``timed out after 15 s``, the network error."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code}"
    if isinstance(exc, urllib.error.URLError):
        reason = exc.reason
        if isinstance(reason, (socket.timeout, TimeoutError)):
            return f"timed out after {timeout:g} s"
        return f"{reason}"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return f"timed out after {timeout:g} s"
    if isinstance(exc, http.client.IncompleteRead):
        return f"truncated download ({len(exc.partial)} bytes, then the connection closed)"
    if isinstance(exc, IndexClientError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def retryable(exc: BaseException) -> bool:
    """Whether another attempt may help: not for 4xx (but 429) nor for a refused connection."""
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code >= 500 or exc.code == 429
    if isinstance(exc, urllib.error.URLError):
        return not isinstance(exc.reason, ConnectionRefusedError)
    return not isinstance(exc, ValueError)  # a malformed URL stays malformed


@dataclasses.dataclass
class Response:
    body: bytes
    content_type: str
    url: str  # after redirects; a directory URL ends with "/"


def fetch_page(
    url: str,
    *,
    accept: str = ACCEPT_ANY,
    timeout: float = DEFAULT_TIMEOUT_S,
    deadline_s: float = 30.0,
    retries: int = 3,
    limit: int = PAGE_LIMIT,
    user_agent: str = "causal-conv1d",
    proxies: Optional[Mapping[str, str]] = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Response:
    """GET one index page (or read it from ``file://``). Raises IndexClientError with one line: the
    last attempt's failure (``status`` set when the server answered an HTTP error)."""
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme == "file":
        path = _file_path(url)
        try:
            with open_url(url) as resp:
                return Response(resp.read(), resp.headers.get("Content-Type", ""), resp.geturl())
        except OSError as exc:
            raise IndexClientError(f"cannot read {path}: {exc.strerror or exc}") from None
    if scheme not in ("http", "https"):
        raise IndexClientError(f"unsupported index URL scheme {scheme!r} (use http(s):// or file://)")
    last: BaseException = IndexClientError("no attempt")
    for attempt in range(retries):
        try:
            with open_url(url, accept=accept, timeout=timeout, user_agent=user_agent, proxies=proxies) as resp:
                body = read_all(resp, time.monotonic() + deadline_s, limit=limit)
                return Response(body, resp.headers.get("Content-Type", ""), resp.geturl())
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException, IndexClientError) as exc:
            last = exc
            if not retryable(exc):
                break
        if attempt + 1 < retries:
            sleep(0.5 * (attempt + 1))
    status = last.code if isinstance(last, urllib.error.HTTPError) else None
    raise IndexClientError(describe(last, timeout), status)


# --- parsing -------------------------------------------------------------------------------------


@dataclasses.dataclass
class Anchor:
    """One ``<a>`` of an HTML page: its attributes (a valueless one maps to None) and its text."""

    attrs: dict[str, Optional[str]]
    text: str = ""

    @property
    def href(self) -> str:
        return self.attrs.get("href") or ""


class _Anchors(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.anchors: list[Anchor] = []
        self.meta: dict[str, Optional[str]] = {}
        self._open: Optional[Anchor] = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, Optional[str]]]) -> None:
        if tag == "a":
            self._close()
            self._open, self._text = Anchor(dict(attrs)), []
        elif tag == "meta":
            d = dict(attrs)
            if d.get("name"):
                self.meta[str(d["name"])] = d.get("content")

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self._close()

    def _close(self) -> None:
        if self._open is not None:
            self._open.text = "".join(self._text).strip()
            self.anchors.append(self._open)
            self._open = None

    def close(self) -> None:
        super().close()
        self._close()


def parse_anchors(text: str) -> tuple[list[Anchor], dict[str, Optional[str]]]:
    """(every ``<a>``, every ``<meta name=... content=...>``) of an HTML page. Raises IndexClientError
    when html.parser gives up (it is lenient; rarely)."""
    parser = _Anchors()
    try:
        parser.feed(text)
        parser.close()
    except Exception as exc:  # noqa: BLE001  (html.parser is lenient; be safe)
        raise IndexClientError(f"unparsable HTML ({exc})") from None
    return parser.anchors, parser.meta


def split_fragment(url: str) -> tuple[str, dict[str, str]]:
    """``.../x.whl#sha256=ab`` -> (``.../x.whl``, {"sha256": "ab"}) (hash names lower-cased)."""
    base, _, frag = url.partition("#")
    hashes: dict[str, str] = {}
    for part in frag.split("&") if frag else ():
        name, _, value = part.partition("=")
        if name and value:
            hashes[name.lower()] = value.lower()
    return base, hashes


def filename_of(url: str) -> str:
    """The file name a link points at: the last path segment, URL-unquoted."""
    return urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])


@dataclasses.dataclass(frozen=True)
class Link:
    """One file of a project page."""

    filename: str
    url: str  # absolute, without the fragment
    sha256: Optional[str]  # the fragment's (HTML) or hashes.sha256 (JSON), lower-case
    requires_python: Optional[str] = None
    yanked: Optional[str] = None  # None: not yanked; "" yanked without a reason; else the reason
    core_metadata: Optional[str] = None  # data-core-metadata: "sha256=<hex>" or "true"; None: none
    dist_info_metadata: Optional[str] = None  # data-dist-info-metadata (PEP 658's older name)
    size: Optional[int] = None  # JSON only (PEP 700)
    href: str = ""  # the link exactly as the page has it (fragment included)
    attrs: Mapping[str, Any] = dataclasses.field(default_factory=dict, compare=False)  # the raw attributes

    @property
    def is_yanked(self) -> bool:
        return self.yanked is not None


@dataclasses.dataclass
class Page:
    url: str
    links: list[Link]
    meta: dict[str, Optional[str]]  # HTML <meta name> (pypi:repository-version); JSON: the "meta" object


def _base_url(page_url: str) -> str:
    """Links resolve against the page as a directory (``.../causal-conv1d/``), also when it was asked
    for without the trailing slash."""
    return page_url if page_url.endswith(("/", ".html", ".json")) else page_url + "/"


def _json_metadata(value: Any) -> Optional[str]:
    if isinstance(value, dict) and value:
        return "&".join(f"{k}={v}" for k, v in value.items())
    return "true" if value is True else None


def _parse_json(body: bytes, page_url: str) -> Page:
    try:
        doc = json.loads(body)
        files = doc["files"]
        if not isinstance(files, list):
            raise TypeError("files is not a list")
    except (ValueError, KeyError, TypeError) as exc:
        raise IndexClientError(f"invalid PEP 691 JSON ({type(exc).__name__})") from None
    base = _base_url(page_url)
    links = []
    for f in files:
        if not isinstance(f, dict) or "filename" not in f or "url" not in f:
            continue
        url, frag = split_fragment(urllib.parse.urljoin(base, f["url"]))
        raw_hashes = f.get("hashes")
        hashes: dict[str, Any] = raw_hashes if isinstance(raw_hashes, dict) else {}
        size, yanked = f.get("size"), f.get("yanked")
        links.append(
            Link(
                f["filename"],
                url,
                (hashes.get("sha256") or frag.get("sha256") or None),
                f.get("requires-python"),
                None if yanked in (None, False) else ("" if yanked is True else str(yanked)),
                _json_metadata(f.get("core-metadata")),
                _json_metadata(f.get("dist-info-metadata")),
                size if isinstance(size, int) else None,
                f["url"],
                f,
            )
        )
    raw_meta = doc.get("meta") if isinstance(doc, dict) else None
    meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    return Page(page_url, links, dict(meta))


def _parse_html(body: bytes, page_url: str) -> Page:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise IndexClientError("the project page is not UTF-8 HTML") from None
    anchors, meta = parse_anchors(text)
    base = _base_url(page_url)
    links = []
    for a in anchors:
        if not a.href:
            continue
        url, frag = split_fragment(urllib.parse.urljoin(base, a.href))
        yanked = (a.attrs["data-yanked"] or "") if "data-yanked" in a.attrs else None
        links.append(
            Link(
                filename_of(url),
                url,
                frag.get("sha256"),
                a.attrs.get("data-requires-python"),
                yanked,
                a.attrs.get("data-core-metadata"),
                a.attrs.get("data-dist-info-metadata"),
                None,
                a.href,
                a.attrs,
            )
        )
    return Page(page_url, links, meta)


def parse_page(body: Union[bytes, str], content_type: str, page_url: str) -> Page:
    """A PEP 691 JSON page (the content type names JSON) or a PEP 503 HTML page; links made absolute
    against ``page_url``. Raises IndexClientError for a page that is neither."""
    data = body.encode("utf-8") if isinstance(body, str) else body
    if "json" in content_type:
        return _parse_json(data, page_url)
    return _parse_html(data, page_url)


def index_reachable(url: str, timeout: float = 8.0) -> bool:
    """Whether an index answers at all: any HTTP status counts; DNS/connect failures do not.

    ``file:`` URLs always count (a folder is checked when it is read).
    """
    if url.startswith("file:"):
        return True
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False
