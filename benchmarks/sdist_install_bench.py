"""Benchmark: `pip install` of the sdist when the index has the prebuilt wheel (target <= 10 s).

    python benchmarks/sdist_install_bench.py --wheel dist/causal_conv1d-1.7.0+cpu.torch2.13-...whl [--runs 3]

Setup, not timed: the sdist (python -m build --sdist), a static site with the wheel
(python -m index_site build, served on 127.0.0.1), a fresh venv with torch (``--torch``,
default torch==2.13.0: the wheel's variant) and the [build-system] requires downloaded once.
Timed: ``pip install --no-index --find-links SDIST --find-links BUILD_DEPS causal-conv1d==1.7.0``
-- pip's isolated build environment, the index-first step (query, download, sha256), install --
each run with an empty pip cache and causal-conv1d uninstalled before. torch is already in the
venv (the issue: "excluding the torch download"). Prints one JSON line and a summary.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import causal_conv1d_contract as contract  # noqa: E402

TARGET_S = 10.0


def sh(cmd: list, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def env_without_ours(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAUSAL_CONV1D_") and k != "PYTHONPATH"}
    env.update(extra)
    return env


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wheel", required=True, type=Path, help="a wheel of this project for the venv's torch")
    ap.add_argument("--torch", default="torch==2.13.0", help="torch requirement for the venv")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="work in this directory and keep it")
    args = ap.parse_args()

    work = args.keep or Path(tempfile.mkdtemp(prefix="sdist-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.monotonic()
        src = work / "src"
        shutil.rmtree(src, ignore_errors=True)
        shutil.copytree(
            REPO,
            src,
            ignore=shutil.ignore_patterns(
                "build", ".git", "*.so", "_build_info.json", "__pycache__", "*.egg-info", ".venv*", "site"
            ),
        )
        sh(
            [sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o", work / "sdist", src],
            env=env_without_ours(),
        )
        wheels = work / "wheels"
        wheels.mkdir(exist_ok=True)
        shutil.copy2(args.wheel, wheels / args.wheel.name)
        sh(
            [sys.executable, "-m", "index_site", "build", wheels, "--out", work / "site"],
            cwd=REPO,
            env=env_without_ours(PYTHONPATH=str(REPO)),
        )
        deps = work / "build_deps"
        sh(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--only-binary",
                ":all:",
                "-d",
                deps,
                "setuptools>=77.0.3,<85",
                "packaging>=24",
            ],
            env=env_without_ours(),
        )
        vdir = work / "venv"
        if not (vdir / "bin" / "python").exists():
            venv.EnvBuilder(with_pip=True).create(vdir)
            sh([vdir / "bin" / "python", "-m", "pip", "install", "-q", args.torch], env=env_without_ours())
        setup_s = time.monotonic() - t0

        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *a: object) -> None:
                pass

        handler = functools.partial(Quiet, directory=str(work / "site"))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}/"

        py = vdir / "bin" / "python"
        times = []
        for i in range(args.runs):
            subprocess.run([py, "-m", "pip", "uninstall", "-y", "-q", contract.PROJECT_NAME], capture_output=True)
            cache = work / f"pip-cache-{i}"
            env = env_without_ours(**{contract.ENV_INDEX_URL: url, "PIP_CACHE_DIR": str(cache)})
            start = time.monotonic()
            proc = sh(
                [
                    py,
                    "-m",
                    "pip",
                    "install",
                    "-v",
                    "--no-index",
                    "--find-links",
                    work / "sdist",
                    "--find-links",
                    deps,
                    f"{contract.PROJECT_NAME}=={contract.PACKAGE_VERSION}",
                ],
                env=env,
            )
            times.append(time.monotonic() - start)
            if "(nothing compiled)" not in proc.stdout + proc.stderr:
                raise SystemExit("the prebuilt wheel was not used:\n" + (proc.stdout + proc.stderr)[-3000:])
            shutil.rmtree(cache, ignore_errors=True)
        server.shutdown()
        line = next(ln.strip() for ln in (proc.stdout + proc.stderr).splitlines() if "using prebuilt wheel" in ln)
        result = {
            "benchmark": "sdist_install_with_prebuilt",
            "runs_s": [round(t, 2) for t in times],
            "median_s": round(statistics.median(times), 2),
            "min_s": round(min(times), 2),
            "target_s": TARGET_S,
            "setup_s_not_timed": round(setup_s, 1),
            "cpu_count": os.cpu_count(),
            "load_avg": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        }
        print(json.dumps(result))
        print(
            f"{line}\nsdist install with a prebuilt wheel: median {result['median_s']} s over {args.runs} runs "
            f"(min {result['min_s']} s; target <= {TARGET_S} s) -- "
            f"{'OK' if result['median_s'] <= TARGET_S else 'OVER TARGET'}"
        )
        return 0 if result["median_s"] <= TARGET_S else 1
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
