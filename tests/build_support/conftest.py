"""Fixtures for the setup.py / install tests: a real CPU wheel, a static index built from it, an
HTTP server on 127.0.0.1 that can misbehave on demand, the sdist, and one fresh venv with torch.

Slow fixtures are session-scoped and shared by every test that needs them.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import causal_conv1d_contract as contract  # noqa: E402

TORCH_REQ = os.environ.get("CAUSAL_CONV1D_TEST_TORCH", "torch==2.13.0")
CPU_LABEL = "cpu.torch2.13"
CPU_VARIANT = "torch2.13-cpu"


def run(
    cmd: list[str],
    env: Optional[dict[str, str]] = None,
    timeout: float = 900,
    cwd: Optional[Path] = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(c) for c in cmd], capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd, check=False
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} failed ({proc.returncode}):\n{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}")
    return proc


def clean_env(**extra: str) -> dict[str, str]:
    """The environment minus anything of ours or of an outer pip that would change a test's meaning."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CAUSAL_CONV1D_") and k not in ("PYTHONPATH", "PIP_REQUIRE_VIRTUALENV", "VIRTUAL_ENV")
    }
    env.update(extra)
    return env


# --- the real CPU wheel --------------------------------------------------------------------------


def _build_cpu_wheel(out: Path) -> Path:
    """CAUSAL_CONV1D_LOCAL_VERSION=cpu.torch2.13 pip wheel --no-build-isolation --no-deps (a copy of the tree)."""
    src = out / "src"
    ignore = shutil.ignore_patterns(
        "build", ".git", "*.so", "_build_info.json", "__pycache__", "*.egg-info", ".venv*", "site", "wheelhouse", "out"
    )
    shutil.copytree(REPO, src, ignore=ignore)
    env = clean_env(**{contract.ENV_LOCAL_VERSION: CPU_LABEL, "MAX_JOBS": os.environ.get("MAX_JOBS", "1")})
    run(
        [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", out / "dist", src],
        env=env,
        timeout=3600,
    )
    wheels = sorted((out / "dist").glob("causal_conv1d-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="session")
def real_cpu_wheel(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real wheel of this project for torch2.13-cpu: tests/conftest.py's ``cpu_wheel`` when it
    exists, else built here (or CAUSAL_CONV1D_TEST_CPU_WHEEL names one)."""
    given = os.environ.get("CAUSAL_CONV1D_TEST_CPU_WHEEL")
    if given:
        return Path(given)
    try:
        wheel = request.getfixturevalue("cpu_wheel")
        return Path(wheel)
    except pytest.FixtureLookupError:
        pass
    return _build_cpu_wheel(tmp_path_factory.mktemp("cpu_wheel"))


# --- the index -----------------------------------------------------------------------------------


def _minimal_site(wheel: Path, site: Path) -> None:
    """A PEP 503 site for one wheel (used only when index_site cannot build one)."""
    variant = contract.parse_wheel_name(wheel.name).variant
    files = site / "files"
    files.mkdir(parents=True, exist_ok=True)
    shutil.copy2(wheel, files / wheel.name)
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    page = site / "whl" / variant.name / contract.PROJECT_NAME
    page.mkdir(parents=True, exist_ok=True)
    href = f"../../../files/{contract.quote_path(wheel.name)}#sha256={sha}"
    (page / "index.html").write_text(
        f'<!DOCTYPE html><html><body><a href="{href}" data-requires-python="&gt;=3.9">{wheel.name}</a></body></html>\n'
    )


@pytest.fixture(scope="session")
def site_dir(real_cpu_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The static site (index_site build) serving the real CPU wheel."""
    root = tmp_path_factory.mktemp("site")
    wheels, site = root / "wheels", root / "site"
    wheels.mkdir()
    shutil.copy2(real_cpu_wheel, wheels / real_cpu_wheel.name)
    proc = run(
        [sys.executable, "-m", "index_site", "build", wheels, "--out", site],
        cwd=REPO,
        check=False,
        env=clean_env(PYTHONPATH=str(REPO)),
    )
    page = site / "whl" / CPU_VARIANT / contract.PROJECT_NAME / "index.html"
    if proc.returncode != 0 or not page.exists():
        shutil.rmtree(site, ignore_errors=True)
        _minimal_site(real_cpu_wheel, site)
    return site


class FaultyIndex(http.server.ThreadingHTTPServer):
    """Serves a site directory; ``mode`` makes it misbehave the way real indexes do."""

    daemon_threads = True
    MODES = ("ok", "json", "404", "500", "stall", "garbage", "badhash", "truncate", "badsize", "bigger")

    def __init__(self, root: Path) -> None:
        self.root = root
        self.mode = "ok"
        self.stall_s = 30.0
        self.requests: list[str] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return  # a client that gave up on a stalled/truncated response: expected here
        super().handle_error(request, client_address)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/"


class _Handler(http.server.BaseHTTPRequestHandler):
    server: FaultyIndex

    def log_message(self, *args: Any) -> None:
        pass

    def _send(
        self, code: int, body: bytes, ctype: str = "text/html; charset=utf-8", length: Optional[int] = None
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        srv = self.server
        srv.requests.append(self.path)
        mode = srv.mode
        if mode == "404":
            return self._send(404, b"not found")
        if mode == "500":
            return self._send(500, b"internal error")
        if mode == "stall":
            time.sleep(srv.stall_s)
            return self._send(200, b"")
        rel = urllib.parse.unquote(urllib.parse.urlparse(self.path).path).lstrip("/")
        target = (srv.root / rel).resolve()
        if srv.root.resolve() not in target.parents and target != srv.root.resolve():
            return self._send(403, b"forbidden")
        if target.is_dir():
            if not self.path.endswith("/"):
                self.send_response(301)
                self.send_header("Location", self.path + "/")
                self.end_headers()
                return None
            accept = self.headers.get("Accept", "")
            if (
                mode in ("json", "badsize")
                and "application/vnd.pypi.simple.v1+json" in accept
                and (target / "index.json").exists()
            ):
                body = (target / "index.json").read_bytes()
                if mode == "badsize":  # the JSON page says the wheel is one byte longer than it is
                    doc = json.loads(body)
                    for f in doc["files"]:
                        f["size"] = f["size"] + 1
                    body = json.dumps(doc).encode()
                return self._send(200, body, "application/vnd.pypi.simple.v1+json")
            target = target / "index.html"
        if not target.is_file():
            return self._send(404, b"not found")
        body = target.read_bytes()
        if target.name == "index.html":
            if mode == "garbage":
                return self._send(200, b"<html><body><a hre\x00f=\xff\xfe garbage </b")
            if mode == "badhash":
                text = body.decode()
                i = text.find("#sha256=")
                if i >= 0:
                    text = text[: i + 8] + "0" * 64 + text[i + 8 + 64 :]
                return self._send(200, text.encode())
            return self._send(200, body)
        if mode == "bigger" and target.suffix == ".whl":  # the server appends bytes (and says so)
            return self._send(200, body + b"\0" * 100, "application/octet-stream")
        if mode == "truncate" and target.suffix == ".whl":
            self._send(200, body[: len(body) // 2], "application/octet-stream", length=len(body))
            self.wfile.flush()
            self.close_connection = True
            return None
        return self._send(200, body, "application/octet-stream")


@pytest.fixture(scope="session")
def _index_server(site_dir: Path) -> Iterator[FaultyIndex]:
    srv = FaultyIndex(site_dir)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def index(_index_server: FaultyIndex) -> Iterator[FaultyIndex]:
    _index_server.mode = "ok"
    _index_server.requests.clear()
    yield _index_server
    _index_server.mode = "ok"


@pytest.fixture(scope="session")
def refused_url() -> str:
    """A 127.0.0.1 URL nothing listens on (bound, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/"


# --- sdist, build deps, venv ---------------------------------------------------------------------


@pytest.fixture(scope="session")
def sdist_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sdist")
    src = out / "src"
    ignore = shutil.ignore_patterns(
        "build", ".git", "*.so", "_build_info.json", "__pycache__", "*.egg-info", ".venv*", "site", "wheelhouse", "out"
    )
    shutil.copytree(REPO, src, ignore=ignore)
    run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o", out / "dist", src], env=clean_env())
    sdists = list((out / "dist").glob("causal_conv1d-*.tar.gz"))
    assert len(sdists) == 1, sdists
    assert sdists[0].name == f"causal_conv1d-{contract.PACKAGE_VERSION}.tar.gz"
    return out / "dist"


@pytest.fixture(scope="session")
def build_deps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Wheels of the [build-system] requires, so pip can install with --no-index (no PyPI sdist of
    another causal-conv1d 1.7.0 can win)."""
    out = tmp_path_factory.mktemp("build_deps")
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--only-binary",
            ":all:",
            "-d",
            out,
            "setuptools>=77.0.3,<85",
            "packaging>=24",
            "ninja",
        ],
        env=clean_env(),
    )
    return out


class Venv:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.bin = path / ("Scripts" if os.name == "nt" else "bin")
        self.python = self.bin / ("python.exe" if os.name == "nt" else "python")

    def pip(
        self, *args: str, env: Optional[dict[str, str]] = None, check: bool = True, timeout: float = 1800
    ) -> subprocess.CompletedProcess[str]:
        return run([self.python, "-m", "pip", *args], env=env or clean_env(), check=check, timeout=timeout)

    def py(
        self, code: str, env: Optional[dict[str, str]] = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return run([self.python, "-c", code], env=env or clean_env(), check=check, cwd=self.path)

    def uninstall(self) -> None:
        self.pip("uninstall", "-y", contract.PROJECT_NAME, check=False)


@pytest.fixture(scope="session")
def torch_venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """One fresh venv with the CPU torch (no packaging, no causal-conv1d), shared by the install tests."""
    path = tmp_path_factory.mktemp("venv") / "v"
    venv.EnvBuilder(with_pip=True).create(path)
    v = Venv(path)
    v.pip("install", "-q", TORCH_REQ)
    v.py("import torch; assert torch.version.cuda is None, torch.__version__")
    return v


@pytest.fixture
def venv_clean(torch_venv: Venv) -> Iterator[Venv]:
    torch_venv.uninstall()
    yield torch_venv
    torch_venv.uninstall()


def install_env(tmp_path: Path, index_url: str, **extra: str) -> dict[str, str]:
    """pip environment for one install: our index, a private pip cache (no cached wheel reuse)."""
    return clean_env(
        **{
            contract.ENV_INDEX_URL: index_url,
            "PIP_CACHE_DIR": str(tmp_path / "pip-cache"),
            "CAUSAL_CONV1D_INDEX_TIMEOUT": "3",
            **extra,
        }
    )


def sdist_requirement_args(sdist_dir: Path, build_deps: Path) -> list[str]:
    """This version of the project from the local sdist and build dependencies only (pip and uv)."""
    return [
        "--no-index",
        "--find-links",
        str(sdist_dir),
        "--find-links",
        str(build_deps),
        f"{contract.PROJECT_NAME}=={contract.PACKAGE_VERSION}",
    ]


def pip_install_sdist_args(sdist_dir: Path, build_deps: Path, verbose: bool = True) -> list[str]:
    return ["install", *(["-v"] if verbose else []), *sdist_requirement_args(sdist_dir, build_deps)]


#: The faulty index's failure modes and what the fall-back reason says of each.
INDEX_FAILURES = [
    ("404", "HTTP 404"),
    ("500", "HTTP 500"),
    ("stall", "timed out"),
    ("garbage", "no wheel"),
    ("truncate", "truncated"),
]


def index_first_env(monkeypatch: pytest.MonkeyPatch, index_url: str) -> None:
    """No setting that skips the index-first step; the index at ``index_url``."""
    for var in (
        contract.ENV_FORCE_BUILD,
        contract.ENV_LOCAL_VERSION,
        contract.ENV_SKIP_CUDA_BUILD,
        contract.ENV_FORCE_CXX11_ABI,
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv(contract.ENV_INDEX_URL, index_url)


@pytest.fixture(scope="session")
def build_venv(tmp_path_factory: pytest.TempPathFactory, build_deps: Path) -> Venv:
    """A venv with torch, setuptools and packaging: what uv's --no-build-isolation-package needs."""
    path = tmp_path_factory.mktemp("build_venv") / "v"
    venv.EnvBuilder(with_pip=True).create(path)
    v = Venv(path)
    v.pip("install", "-q", TORCH_REQ, "--find-links", str(build_deps), "setuptools>=77.0.3,<85", "packaging>=24")
    return v


def wheel_record(wheel: Path) -> dict[str, Any]:
    with zipfile.ZipFile(wheel) as zf:
        return json.loads(zf.read(f"{contract.DIST_NAME}/{contract.BUILD_INFO_FILENAME}"))


def run_in_pty(
    cmd: list[str], env: dict[str, str], timeout: float = 900, until: Optional[str] = None
) -> tuple[Optional[int], str]:
    """Run ``cmd`` with a pseudo-terminal as its controlling terminal and stdout/stderr (what a user at
    a terminal sees): (exit status, everything written to the terminal, ANSI escapes removed).

    ``until``: stop (kill the whole process group) as soon as this text has appeared; status None."""
    import pty
    import select

    pid, fd = pty.fork()
    if pid == 0:  # the child: pty.fork made the pty its controlling terminal (setsid + TIOCSCTTY)
        try:
            os.execve(str(cmd[0]), [str(c) for c in cmd], env)
        finally:
            os._exit(127)
    chunks: list[bytes] = []
    killed = False
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 1.0)
            if not ready:
                continue
            try:
                data = os.read(fd, 1 << 16)
            except OSError:  # EIO: every process holding the terminal has exited
                break
            if not data:
                break
            chunks.append(data)
            if until is not None and until in _plain(b"".join(chunks)):
                killed = True
                break
        else:
            killed = True
    finally:
        if killed:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, 9)
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    return (None if killed else os.waitstatus_to_exitcode(status)), _plain(b"".join(chunks))


def _plain(data: bytes) -> str:
    import re

    text = data.decode("utf-8", "replace")
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07", "", text).replace("\r", "")
