"""causal_conv1d_contract.net: the one PEP 503/691 client (file://, http on 127.0.0.1) and index reachability."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import causal_conv1d_contract as contract
from causal_conv1d_contract import net as ic

WHEEL = "causal_conv1d-1.7.0+cpu.torch2.13-cp39-abi3-linux_x86_64.whl"
SHA = "ab" * 32
META = "cd" * 32
HTML = (
    '<!DOCTYPE html><html><head><meta name="pypi:repository-version" content="1.0"></head><body>\n'
    f'<a href="../../../files/{contract.quote_path(WHEEL)}#sha256={SHA.upper()}" data-requires-python="&gt;=3.9" '
    f'data-dist-info-metadata="sha256={META}" data-core-metadata="sha256={META}">{WHEEL}</a><br>\n'
    '<a href="old.whl" data-yanked="">old.whl</a>\n'
    '<a href="bad.whl" data-yanked="broken build">bad.whl</a>\n'
    "<a>no href</a>\n"
    "</body></html>\n"
)
JSON_DOC = {
    "meta": {"api-version": "1.1"},
    "name": "causal-conv1d",
    "files": [
        {
            "filename": WHEEL,
            "url": f"../../../files/{contract.quote_path(WHEEL)}",
            "hashes": {"sha256": SHA},
            "requires-python": ">=3.9",
            "core-metadata": {"sha256": META},
            "yanked": False,
            "size": 123,
        },
        {"filename": "old.whl", "url": "old.whl#sha256=" + "ef" * 32, "hashes": {}, "yanked": True},
        {"filename": "bad.whl", "url": "bad.whl", "hashes": {}, "yanked": "broken build", "core-metadata": True},
        {"no": "filename"},
    ],
}
PAGE = "http://h/whl/torch2.13-cpu/causal-conv1d/"


def test_html_page() -> None:
    page = ic.parse_page(HTML.encode(), "text/html", PAGE)
    first, old, bad = page.links
    assert first.filename == WHEEL and first.url == f"http://h/files/{contract.quote_path(WHEEL)}"
    assert first.sha256 == SHA and first.requires_python == ">=3.9" and not first.is_yanked
    assert first.core_metadata == first.dist_info_metadata == f"sha256={META}"
    assert first.href.endswith(f"#sha256={SHA.upper()}") and first.attrs["data-core-metadata"] == f"sha256={META}"
    assert (old.yanked, bad.yanked) == ("", "broken build") and old.is_yanked and old.sha256 is None
    assert page.meta == {"pypi:repository-version": "1.0"}


def test_json_page() -> None:
    page = ic.parse_page(json.dumps(JSON_DOC).encode(), "application/vnd.pypi.simple.v1+json", PAGE)
    first, old, bad = page.links
    assert (first.filename, first.sha256, first.size, first.core_metadata) == (WHEEL, SHA, 123, f"sha256={META}")
    assert first.url == f"http://h/files/{contract.quote_path(WHEEL)}" and not first.is_yanked
    assert old.sha256 == "ef" * 32 and old.yanked == "" and old.url == PAGE + "old.whl"  # hash from the fragment
    assert bad.yanked == "broken build" and bad.core_metadata == "true"
    assert page.meta == {"api-version": "1.1"}


def test_links_resolve_against_the_page_as_a_directory() -> None:
    page = ic.parse_page(b'<a href="x.whl">x</a>', "text/html", "http://h/whl/v/causal-conv1d")
    assert page.links[0].url == "http://h/whl/v/causal-conv1d/x.whl"


@pytest.mark.parametrize(
    "body,ctype,message",
    [
        (b"\xff\xfe<a>", "text/html", "not UTF-8 HTML"),
        (b"{nope", "application/vnd.pypi.simple.v1+json", "invalid PEP 691 JSON"),
        (b'{"files": 3}', "application/json", "invalid PEP 691 JSON"),
    ],
)
def test_bad_pages(body: bytes, ctype: str, message: str) -> None:
    with pytest.raises(ic.IndexClientError, match=message):
        ic.parse_page(body, ctype, PAGE)


def test_anchor_text_and_meta() -> None:
    anchors, meta = ic.parse_anchors('<meta name="a" content="b"><a href="p/q.whl">q &amp; r</a><a href="">s')
    assert [(a.href, a.text) for a in anchors] == [("p/q.whl", "q & r"), ("", "s")] and meta == {"a": "b"}


def test_fragments() -> None:
    assert ic.split_fragment("u.whl#sha256=AB&md5=x") == ("u.whl", {"sha256": "ab", "md5": "x"})
    assert ic.split_fragment("u.whl") == ("u.whl", {})
    assert ic.filename_of("http://h/files/causal_conv1d-1.7.0%2Bcpu.whl#sha256=1") == "causal_conv1d-1.7.0+cpu.whl"


def test_file_urls(tmp_path: Path) -> None:
    page_dir = tmp_path / "whl" / "torch2.13-cpu" / "causal-conv1d"
    page_dir.mkdir(parents=True)
    (page_dir / "index.html").write_text(HTML)
    got = ic.fetch_page(page_dir.as_uri() + "/")
    assert got.body == HTML.encode() and got.content_type == "text/html" and got.url.endswith("/index.html")
    assert ic.parse_page(got.body, got.content_type, got.url).links[0].url == (
        (tmp_path / "files").as_uri() + "/" + contract.quote_path(WHEEL)
    )
    assert ic.fetch_page(page_dir.as_uri()).body == HTML.encode()  # a directory without the slash
    with pytest.raises(ic.IndexClientError, match="cannot read .*index.html") as err:
        ic.fetch_page((tmp_path / "nowhere").as_uri() + "/")
    assert err.value.status is None
    with pytest.raises(ic.IndexClientError, match="unsupported index URL scheme 'ftp'"):
        ic.fetch_page("ftp://h/x/")


class _Handler(http.server.BaseHTTPRequestHandler):
    routes: dict = {}
    seen: list = []

    def do_GET(self) -> None:  # noqa: N802
        self.seen.append((self.path, self.headers.get("Accept"), self.headers.get("User-Agent")))
        route = self.routes.get(self.path.split("?")[0])
        if route is None:
            self.send_error(404)
            return
        status, ctype, body, delay = route() if callable(route) else route
        if delay:
            time.sleep(delay)
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout, size limit)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    _Handler.routes, _Handler.seen = {}, []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_http_json_and_html(server: str) -> None:
    _Handler.routes["/p/"] = (200, "application/vnd.pypi.simple.v1+json", json.dumps(JSON_DOC).encode(), 0)
    _Handler.routes["/h/"] = (200, "text/html; charset=utf-8", HTML.encode(), 0)
    got = ic.fetch_page(server + "/p/", user_agent="ua-test")
    assert [ln.filename for ln in ic.parse_page(got.body, got.content_type, got.url).links] == [
        WHEEL,
        "old.whl",
        "bad.whl",
    ]
    assert _Handler.seen[-1] == ("/p/", ic.ACCEPT_ANY, "ua-test")
    got = ic.fetch_page(server + "/h/", accept=ic.ACCEPT_HTML)
    assert ic.parse_page(got.body, got.content_type, got.url).links[0].sha256 == SHA
    assert _Handler.seen[-1][1] == "text/html"


def test_http_errors_and_retries(server: str) -> None:
    sleeps: list[float] = []
    with pytest.raises(ic.IndexClientError, match="^HTTP 404$") as err:
        ic.fetch_page(server + "/missing/", sleep=sleeps.append)
    assert err.value.status == 404 and len(_Handler.seen) == 1 and not sleeps  # 4xx: no retry
    answers = iter([(503, "text/plain", b"busy", 0), (200, "text/html", HTML.encode(), 0)])
    _Handler.routes["/flaky/"] = lambda: next(answers)
    assert ic.fetch_page(server + "/flaky/", sleep=sleeps.append).body == HTML.encode()
    assert sleeps == [0.5]
    _Handler.routes["/down/"] = (500, "text/plain", b"", 0)
    with pytest.raises(ic.IndexClientError, match="^HTTP 500$") as err:
        ic.fetch_page(server + "/down/", retries=2, sleep=sleeps.append)
    assert err.value.status == 500


def test_timeout_limit_and_refused(server: str) -> None:
    _Handler.routes["/slow/"] = (200, "text/html", HTML.encode(), 1.5)
    started = time.monotonic()
    with pytest.raises(ic.IndexClientError, match=r"^timed out after 0.3 s$") as err:
        ic.fetch_page(server + "/slow/", timeout=0.3, retries=1)
    assert err.value.status is None and time.monotonic() - started < 1.4
    _Handler.routes["/big/"] = (200, "text/html", b"x" * 5000, 0)
    with pytest.raises(ic.IndexClientError, match=r"^response larger than expected \(5000 > 1000 bytes\)$"):
        ic.fetch_page(server + "/big/", limit=1000, retries=1)
    port = server.rsplit(":", 1)[1]
    _Handler.routes["/p/"] = (200, "text/html", HTML.encode(), 0)
    # an explicit empty proxy map ignores the environment's proxy (the rehearsal's local server)
    import os

    os.environ["http_proxy"] = "http://127.0.0.1:9/"
    try:
        assert ic.fetch_page(f"http://localhost:{port}/p/", proxies={}).body == HTML.encode()
    finally:
        del os.environ["http_proxy"]


def test_refused_connection_is_not_retried() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    sleeps: list[float] = []
    with pytest.raises(ic.IndexClientError, match="refused"):
        ic.fetch_page(f"http://127.0.0.1:{port}/x/", sleep=sleeps.append)
    assert sleeps == []


def test_timeout_from_env() -> None:
    assert ic.timeout_from_env({}) == 15.0
    assert ic.timeout_from_env({contract.ENV_INDEX_TIMEOUT: " 2.5 "}) == 2.5
    for bad in ("0", "-1", "soon", "nan"):
        with pytest.raises(contract.InvalidSetting, match=f"{contract.ENV_INDEX_TIMEOUT}='{bad}' is not a positive"):
            ic.timeout_from_env({contract.ENV_INDEX_TIMEOUT: bad})
