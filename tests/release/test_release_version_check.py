"""The release pre-flight refuses a version the package index already holds (a local fixture index,
never the real network): PyPI holds upstream causal-conv1d 1.7.0 under this project's name."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.version import Version

import causal_conv1d_contract as contract
from release import version_check

REPO = Path(__file__).resolve().parents[2]
# What PyPI's causal-conv1d page lists (upstream's sdists; no wheels there)
UPSTREAM = ["causal_conv1d-1.6.1.tar.gz", "causal_conv1d-1.7.0.tar.gz", "causal-conv1d-1.0.0.tar.gz"]


def _html_index(root: Path, files: list[str]) -> str:
    page = root / contract.PROJECT_NAME
    page.mkdir(parents=True)
    links = "".join(f'<a href="../../files/{f}#sha256={"a" * 64}">{f}</a><br>' for f in files)
    (page / "index.html").write_text(f"<!DOCTYPE html><html><body>{links}</body></html>")
    return root.as_uri() + "/"


def test_the_package_version_is_not_one_upstream_published(tmp_path: Path) -> None:
    index = _html_index(tmp_path / "simple", UPSTREAM)
    assert version_check.versions_on_index(index) == {Version("1.6.1"), Version("1.7.0"), Version("1.0.0")}
    assert "free to release" in version_check.check_version(index)
    assert Version(contract.PACKAGE_VERSION) > Version("1.7.0")  # pip prefers it over upstream's 1.7.0 unpinned too


@pytest.mark.parametrize("version", ["1.7.0", "1.7.0.0", "1.6.1"])  # PEP 440 equality, not string equality
def test_a_version_the_index_holds_is_refused(tmp_path: Path, version: str) -> None:
    index = _html_index(tmp_path / "simple", UPSTREAM)
    with pytest.raises(version_check.VersionTaken, match=rf"causal-conv1d {version} is already on .*post release"):
        version_check.check_version(index, version)


class _Index(http.server.BaseHTTPRequestHandler):
    pages: dict[str, tuple[str, bytes]] = {}

    def do_GET(self) -> None:  # noqa: N802
        ctype, body = self.pages.get(self.path, ("text/plain", b""))
        self.send_response(200 if self.path in self.pages else 404)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def served() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Index)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple/"
    server.shutdown()
    server.server_close()


def test_json_index_versions_and_a_missing_project(served: str) -> None:
    doc = {
        "meta": {"api-version": "1.1"},
        "name": contract.PROJECT_NAME,
        "versions": [contract.PACKAGE_VERSION],
        "files": [],
    }  # a release whose files were all deleted still holds its version (PyPI never reuses one)
    _Index.pages = {"/simple/causal-conv1d/": ("application/vnd.pypi.simple.v1+json", json.dumps(doc).encode())}
    with pytest.raises(version_check.VersionTaken):
        version_check.check_version(served)
    _Index.pages = {}  # 404: the index has no such project, so it holds no version of it
    assert version_check.versions_on_index(served) == set()


def test_cli_exit_codes(tmp_path: Path) -> None:
    free = _html_index(tmp_path / "a", UPSTREAM)
    taken = _html_index(tmp_path / "b", [*UPSTREAM, f"causal_conv1d-{contract.PACKAGE_VERSION}.tar.gz"])
    run = [sys.executable, "-m", "release", "check-version", "--index-url"]
    ok = subprocess.run([*run, free], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert ok.returncode == 0 and "free to release" in ok.stdout, ok.stderr
    bad = subprocess.run([*run, taken], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert bad.returncode != 0 and "is already on" in bad.stderr and "Traceback" not in bad.stderr
    # an index that cannot be asked stops the release too (never "unverified, go ahead")
    gone = subprocess.run(
        [*run, (tmp_path / "none").as_uri() + "/"], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert gone.returncode != 0 and "does not go ahead unverified" in gone.stderr
