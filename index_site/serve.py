"""``serve``: the site over HTTP on 127.0.0.1, with PEP 691 content negotiation.

A static host serves ``index.html`` for a directory URL. This server also honours
``Accept: application/vnd.pypi.simple.v1+json`` by serving the ``index.json`` written beside it,
which is what pip and uv ask for first.
"""

from __future__ import annotations

__all__ = ["JSON_TYPE", "negotiate", "make_server"]

import functools
import http.server
import os
import sys
from pathlib import Path
from typing import Callable, Optional

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
HTML_TYPE = "application/vnd.pypi.simple.v1+html"
_OFFERS = {
    JSON_TYPE: "json",
    "application/vnd.pypi.simple.latest+json": "json",
    HTML_TYPE: "html",
    "application/vnd.pypi.simple.latest+html": "html",
    "text/html": "html",
}


def negotiate(accept: Optional[str]) -> tuple[str, str]:
    """Pick ``("json"|"html", content type)`` for an Accept header (highest q, then the client's order)."""
    best: Optional[tuple[float, int, str]] = None
    for i, part in enumerate((accept or "").split(",")):
        fields = [f.strip() for f in part.split(";")]
        media = fields[0].lower()
        q = 1.0
        for param in fields[1:]:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if q <= 0 or (media not in _OFFERS and media not in ("*/*", "application/*", "text/*")):
            continue
        if media in ("*/*", "text/*"):
            media = "text/html"
        elif media == "application/*":
            media = JSON_TYPE
        if best is None or q > best[0]:
            best = (q, i, media)
    if best is None:
        return "html", "text/html; charset=utf-8"
    media = best[2]
    kind = _OFFERS[media]
    return kind, ("text/html; charset=utf-8" if media == "text/html" else media)


class _Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".html": "text/html; charset=utf-8",
        ".json": "application/json",
        ".whl": "application/octet-stream",
        ".metadata": "text/plain; charset=utf-8",
        ".css": "text/css; charset=utf-8",
        ".js": "text/javascript; charset=utf-8",
    }
    log: Callable[[str], None]

    def __init__(self, *args, log: Callable[[str], None], **kwargs):  # type: ignore[no-untyped-def]
        self.log = log
        super().__init__(*args, **kwargs)

    def send_head(self):  # type: ignore[no-untyped-def]
        path = self.translate_path(self.path)
        url_path = self.path.split("?", 1)[0].split("#", 1)[0]
        if os.path.isdir(path) and url_path.endswith("/") and os.path.isfile(os.path.join(path, "index.json")):
            kind, ctype = negotiate(self.headers.get("Accept"))
            name = "index.json" if kind == "json" else "index.html"
            return self._send_file(os.path.join(path, name), ctype)
        if os.path.basename(path) == "index.json" and os.path.isfile(path):
            return self._send_file(path, JSON_TYPE)
        return super().send_head()

    def _send_file(self, path: str, ctype: str):  # type: ignore[no-untyped-def]
        try:
            f = open(path, "rb")
        except OSError:
            self.send_error(404, "File not found")
            return None
        size = os.fstat(f.fileno()).st_size
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(size))
        self.send_header("Vary", "Accept")
        self.end_headers()
        return f

    def log_message(self, format: str, *args) -> None:  # type: ignore[no-untyped-def]  # noqa: A002
        self.log(f"{self.address_string()} {format % args}")


def make_server(
    site: Path, port: int = 0, host: str = "127.0.0.1", log: Optional[Callable[[str], None]] = None
) -> http.server.ThreadingHTTPServer:
    """A server for ``site`` (not started: call ``serve_forever``); ``port=0`` picks a free port."""
    if not site.is_dir():
        raise FileNotFoundError(f"site directory does not exist: {str(site)!r}")
    writer = log or (lambda line: print(line, file=sys.stderr, flush=True))
    handler = functools.partial(_Handler, directory=str(site.resolve()), log=writer)
    server = http.server.ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server
