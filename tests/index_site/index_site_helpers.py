"""Helpers shared by the index_site tests (imported by the tests and by conftest.py)."""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from index_site.serve import make_server

REPO_ROOT = Path(__file__).resolve().parents[2]
NOW = "2026-01-01T00:00:00Z"  # a fixed upload time keeps sites reproducible
ARTIFACTS = REPO_ROOT / "build" / "test-artifacts" / "index_site"


def snapshot(site: Path) -> dict[str, bytes]:
    """Every file of a site, by relative path, with its bytes."""
    return {str(p.relative_to(site)): p.read_bytes() for p in sorted(site.rglob("*")) if p.is_file()}


class Served:
    """A site served on 127.0.0.1 in a thread; ``requests`` lists the request lines seen."""

    def __init__(self, url: str, requests: list[str]) -> None:
        self.url = url
        self.requests = requests


@contextlib.contextmanager
def serve(site: Path, *, negotiate: bool = True) -> Iterator[Served]:
    """Serve ``site`` with index_site's server, or (negotiate=False) with the stdlib's plain static server."""
    log: list[str] = []
    if negotiate:
        server = make_server(site, 0, log=log.append)
    else:

        class Plain(http.server.SimpleHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                log.append(format % args)

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Plain, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Served(f"http://127.0.0.1:{server.server_address[1]}/", log)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def client_env(tmp: Path) -> dict[str, str]:
    """An environment where pip and uv see only what a test gives them (no machine config, no caches)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "VIRTUAL_ENV"))}
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_CACHE_DIR="1",
        PIP_NO_INPUT="1",
        UV_CACHE_DIR=str(tmp / "uv-cache"),
        UV_NO_CONFIG="1",
        UV_PYTHON_DOWNLOADS="never",
    )
    return env


def run_cmd(
    cmd: list[str], env: dict[str, str], *, check: bool = True, timeout: int = 300
) -> subprocess.CompletedProcess[str]:
    # run outside the repository, so that its causal_conv1d/ never shadows what was installed
    proc = subprocess.run(
        [str(c) for c in cmd],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=os.path.dirname(env.get("UV_CACHE_DIR", "/")) or "/",
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc
