"""The local release end to end with a real CPU wheel: publish, serve, pip install, run the op.

The wheel comes from the shared ``cpu_wheel`` fixture (built once by native mode and cached), so
the rehearsal here skips its build step with --wheels-from; everything after it is real: the
wheel checks, index_site build / serve / verify, a fresh venv, pip from 127.0.0.1, the op.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_local_release_with_the_cpu_wheel(cpu_wheel: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    argv = [
        sys.executable, "-m", "release", "local",
        "--variants", "torch2.13-cpu",
        "--wheels-from", str(cpu_wheel.parent),
        "--work-dir", str(work),
        "--torch-index-url", "",  # tests reach no index but pip's configured ones
    ]  # fmt: skip
    proc = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=1800)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    for n, title in enumerate(["plan the build matrix", "take prebuilt wheels", "check the wheels",
                               "publish into a local index site", "serve the site", "install from the local index",
                               "import and run the op"], start=1):  # fmt: skip
        assert f"[{n}/7] {title}" in out
    assert "local release finished: 7 steps in" in out

    report = json.loads((work / "report.json").read_text())
    assert report["ok"] and [s["status"] for s in report["steps"]] == ["ok"] * 7
    installed = report["installed"]
    assert installed["url"].startswith("http://127.0.0.1:")  # it came from the local index
    assert installed["filename"] == cpu_wheel.name and installed["variant"] == "torch2.13-cpu"
    smoke = report["smoke"]
    assert smoke["build_record"]["variant"] == "torch2.13-cpu"
    assert str(work / "venv") in smoke["module"]  # the installed package, not the source tree
    assert smoke["checks"] and all(c["ok"] for c in smoke["checks"])

    # the server is gone: its port accepts no connection any more
    port = int(report["index_url"].rsplit(":", 1)[1].strip("/"))
    with socket.socket() as s:
        s.settimeout(2)
        assert s.connect_ex(("127.0.0.1", port)) != 0
    # the site it served is a valid one
    verify = subprocess.run([sys.executable, "-m", "index_site", "verify", str(work / "site")],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert verify.returncode == 0, verify.stdout + verify.stderr


@pytest.mark.slow
def test_local_release_builds_and_installs_the_stable_cpu_wheel(tmp_path: Path) -> None:
    """The default rehearsal, build included: stable2.10-cpu compiled against this machine's torch 2.13,
    published with the coverage (family page + every torch >= 2.10 CPU page), installed from
    whl/torch2.13-cpu/, the op run. Measured: 5 min 42 s on 2 cores."""
    work = tmp_path / "work"
    argv = [sys.executable, "-m", "release", "local", "--no-cuda", "--work-dir", str(work), "--torch-index-url", ""]
    proc = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=3000)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    report = json.loads((work / "report.json").read_text())
    assert report["jobs"] == ["stable2.10-cpu-linux-x86_64"]
    installed = report["installed"]
    assert installed["variant"] == "stable2.10-cpu" and "+cpu.stable2.10-" in installed["filename"]
    assert report["smoke"]["build_record"]["variant"] == "stable2.10-cpu"
    assert report["smoke"]["torch"].startswith("2.13")  # built for every torch >= 2.10, run on this one
    pages = {p.name for p in (work / "site" / "whl").iterdir() if p.is_dir()}
    assert {"stable2.10-cpu", "torch2.10-cpu", "torch2.13-cpu", "torch2.15-cpu"} <= pages
