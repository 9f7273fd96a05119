"""Fixtures of the build_matrix tests: data files, a CLI runner, a local PyTorch-like index, and for
the wheel builds and checks (native.py, wheelcheck.py) synthetic wheels, the cached native builds,
fresh venvs."""

from __future__ import annotations

import http.server
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Optional

import pytest

from build_matrix import compat
from build_matrix.cli import main

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No outside configuration leaks in; the local test server is never proxied."""
    for var in (compat.DATA_ENV, compat.INDEX_ENV, "BUILD_MATRIX_TRACEBACK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.fixture(scope="session")
def data() -> compat.CompatData:
    return compat.load()


@pytest.fixture
def data_copy(tmp_path: Path) -> Path:
    """A writable copy of the packaged data file."""
    target = tmp_path / "compat.toml"
    shutil.copy(compat.DEFAULT_DATA_PATH, target)
    return target


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    """Run ``python -m build_matrix ARGS`` in-process: ``cli("plan", "--format", "json")``."""

    def run(*args: str) -> Result:
        code = main(list(args))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


# --- a local PyTorch-like wheel index ---------------------------------------------------------


@dataclass
class Route:
    """What the server answers for one path."""

    filenames: list[str] = field(default_factory=list)
    status: int = 200
    delay: float = 0.0  # seconds to sleep before answering (timeouts)
    body: Optional[bytes] = None  # raw body instead of a rendered page (garbage)
    content_type: Optional[str] = None
    json: bool = True  # offer PEP 691 JSON when asked for it
    hits: int = 0


def render_html(accel: str, filenames: list[str]) -> str:
    """A page in the layout of download.pytorch.org/whl/<accel>/torch/ (href quoted, #sha256)."""
    links = []
    for i, name in enumerate(filenames):
        href = f"/whl/{accel}/{urllib.parse.quote(name)}#sha256={i:064x}"
        links.append(f'    <a href="{href}" data-dist-info-metadata="sha256={i:064x}">{name}</a><br/>')
    return (
        "<!DOCTYPE html>\n<html>\n  <body>\n    <h1>Links for torch</h1>\n"
        + "\n".join(links)
        + "\n  </body>\n</html>\n"
    )


def render_json(accel: str, filenames: list[str]) -> str:
    return json.dumps(
        {
            "meta": {"api-version": "1.1"},
            "name": "torch",
            "files": [{"filename": n, "url": f"/whl/{accel}/{urllib.parse.quote(n)}", "hashes": {}} for n in filenames],
        }
    )


class IndexServer:
    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                route = server.routes.get(self.path)
                if route is None:
                    self.send_error(404, "Not Found")
                    return
                route.hits += 1
                if route.delay:
                    time.sleep(route.delay)
                accel = self.path.strip("/").split("/")[-2]
                wants_json = "application/vnd.pypi.simple.v1+json" in (self.headers.get("Accept") or "")
                if route.body is not None:
                    body, ctype = route.body, route.content_type or "text/html"
                elif route.json and wants_json:
                    body, ctype = render_json(accel, route.filenames).encode(), "application/vnd.pypi.simple.v1+json"
                else:
                    body, ctype = render_html(accel, route.filenames).encode(), "text/html; charset=utf-8"
                try:
                    self.send_response(route.status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/whl"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def page(self, accel: str, filenames: list[str], **kw: object) -> Route:
        route = Route(filenames=list(filenames), **kw)  # type: ignore[arg-type]
        self.routes[f"/whl/{accel}/torch/"] = route
        return route

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def index_server() -> Iterator[IndexServer]:
    server = IndexServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def renderers():
    """(render_html, render_json): the page renderers of the test index."""
    return render_html, render_json


# --- wheel builds and checks (build_matrix build --native / check) ----------------------------
REPO = HERE.parents[1]
CACHE = REPO / "build" / "test-wheels"
CPU_JOB = "torch2.13-cpu-linux-x86_64"
CUDA_JOB = "torch2.14-cu130-linux-x86_64"
CUDA_TEST_ARCHS = "9.0"  #: one arch keeps the CUDA build within CI's time


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


synthetic = _load("_build_matrix_synthetic", HERE / "_synthetic.py")


@pytest.fixture()
def make_wheel(tmp_path: Path) -> Callable[..., Path]:
    """Factory: a small real wheel (g++-compiled abi3 extension); keywords break one thing each."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is needed to compile the synthetic wheels")
    counter = iter(range(1000))

    def factory(**kwargs: Any) -> Path:
        dest = tmp_path / f"w{next(counter)}"
        dest.mkdir()
        return synthetic.make_wheel(dest, **kwargs)

    return factory


def _run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "build_matrix", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=timeout,
    )


@pytest.fixture()
def run_cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """``run_cli(*args, env=None)``: ``python -m build_matrix ARGS`` from the repository root."""
    return _run_cli


@pytest.fixture(scope="session")
def timings() -> Iterator[dict[str, float]]:
    """Durations the slow tests measured (printed at the end of the session)."""
    found: dict[str, float] = {}
    yield found
    if found:
        print("\nnative build timings: " + ", ".join(f"{k} {v:.0f} s" for k, v in found.items()))


@pytest.fixture(scope="session")
def cuda_wheel(timings: dict[str, float]) -> Path:
    """The CUDA 13.0 wheel (one arch) built natively, cached like ``cpu_wheel``."""
    from build_matrix.wheel_cache import cached_wheel

    start = time.monotonic()
    wheel = cached_wheel(CUDA_JOB, CACHE, cuda_archs=CUDA_TEST_ARCHS, torch_index_url="")
    timings["cuda wheel (build or cache)"] = time.monotonic() - start
    return wheel


def _fresh_venv(path: Path, *requirements: str) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    py = path / "bin" / "python"
    proc = subprocess.run(
        [str(py), "-m", "pip", "install", "--disable-pip-version-check", "-q", *requirements],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return py


@pytest.fixture()
def fresh_venv() -> Callable[..., Path]:
    """``fresh_venv(path, *requirements)``: a new venv with those installed; returns its python."""
    return _fresh_venv


@pytest.fixture()
def clean_env() -> dict[str, str]:
    """os.environ without the variables a stray shell could use to sway a build."""
    env = dict(os.environ)
    for var in ("CAUSAL_CONV1D_SKIP_CUDA_BUILD", "CAUSAL_CONV1D_FORCE_CXX11_ABI", "TORCH_CUDA_ARCH_LIST"):
        env.pop(var, None)
    return env
