"""fetch-site: the published site's manifest and .metadata, merged into by the next index_site build."""

from __future__ import annotations

import functools
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from index_site import cli as index_cli
from release import cli
from release.errors import ReleaseError, UsageError
from release.fetch import fetch_site
from tests.helpers.wheels import write_wheel

FILES_URL = "https://github.com/causal-conv1d/causal-conv1d/releases/download/v1.7.0/"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the stdlib's name
        pass


@pytest.fixture
def serve(monkeypatch) -> Iterator:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    servers = []

    def start(directory: Path) -> str:
        handler = functools.partial(_Quiet, directory=str(directory))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/site/"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def build_site(wheels: Path, site: Path, *extra: str) -> None:
    rc = index_cli.main(
        ["build", str(wheels), "--out", str(site), "--files-url", FILES_URL, "--now", "2026-01-01T00:00:00Z", *extra]
    )
    assert rc == 0


def test_fetch_then_publish_on_top_keeps_every_published_wheel(tmp_path: Path, serve) -> None:
    first = tmp_path / "first"
    write_wheel(first, variant="torch2.13-cpu")
    write_wheel(first, variant="torch2.14-cu130")
    live = tmp_path / "live"
    build_site(first, live / "site")
    url = serve(live)

    fetched = tmp_path / "fetched"
    result = fetch_site(url, fetched)
    assert result.found and result.entries == 2
    assert json.loads((fetched / "manifest.json").read_text()) == json.loads((live / "site/manifest.json").read_text())
    for meta in (live / "site/files").glob("*.metadata"):
        assert (fetched / "files" / meta.name).read_bytes() == meta.read_bytes()

    second = tmp_path / "second"
    write_wheel(second, variant="torch2.14-cpu")
    build_site(second, fetched, "--strict")  # strict: a missing .metadata of an old wheel would fail
    names = {e["filename"] for e in json.loads((fetched / "manifest.json").read_text())["files"]}
    assert len(names) == 3 and any("cu130" in n for n in names)


def test_first_release_has_nothing_to_fetch(tmp_path: Path, serve) -> None:
    (tmp_path / "empty" / "site").mkdir(parents=True)
    url = serve(tmp_path / "empty")
    result = fetch_site(url, tmp_path / "fetched")
    assert not result.found and "first release" in str(result)
    assert list((tmp_path / "fetched").iterdir()) == []


def test_cli_prints_what_it_fetched(tmp_path: Path, serve, capsys) -> None:
    (tmp_path / "empty" / "site").mkdir(parents=True)
    url = serve(tmp_path / "empty")
    assert cli.main(["fetch-site", url, "--out", str(tmp_path / "fetched")]) == 0
    assert "nothing to merge" in capsys.readouterr().err


def test_missing_metadata_on_the_live_site_fails(tmp_path: Path, serve) -> None:
    first = tmp_path / "first"
    write_wheel(first, variant="torch2.13-cpu")
    build_site(first, tmp_path / "live" / "site")
    for meta in (tmp_path / "live/site/files").glob("*.metadata"):
        meta.unlink()
    with pytest.raises(ReleaseError, match="HTTP 404"):
        fetch_site(serve(tmp_path / "live"), tmp_path / "fetched")


@pytest.mark.parametrize(
    ("url", "message"),
    [("ftp://example.org/", "Invalid site URL"), ("pages.example.org/site", "Invalid site URL")],
)
def test_bad_urls(tmp_path: Path, url: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        fetch_site(url, tmp_path / "out")


def test_refuses_a_non_empty_output(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x").write_text("keep me")
    with pytest.raises(UsageError, match="not empty"):
        fetch_site("http://127.0.0.1:9/", tmp_path / "out")


def test_release_publish_command_accepts_build_matrix_coverage(tmp_path: Path) -> None:
    """release.yml's publish step: build_matrix's coverage JSON feeds index_site build --strict."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    coverage = tmp_path / "coverage.json"
    proc = subprocess.run(
        [sys.executable, "-m", "build_matrix", "coverage", "--format", "json", "--output", str(coverage)],
        cwd=repo, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    wheels = tmp_path / "wheels"
    write_wheel(wheels, variant="torch2.13-cpu")
    build_site(
        wheels, tmp_path / "site", "--strict", "--coverage", str(coverage), "--site-url", "https://example.org/cc1d/"
    )
    landing = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "torch2.13-cpu" in landing or "2.13" in landing
