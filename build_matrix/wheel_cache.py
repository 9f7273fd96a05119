"""A build cache for tests and local rehearsals: the wheel of a job for the current sources, built
natively (``python -m build_matrix build --native``) on first use and kept by a hash of the sources.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Optional

import causal_conv1d_contract as contract
from build_matrix.errors import BuildError
from build_support import REPO_ROOT

__all__ = ["SOURCE_PATHS", "source_hash", "cached_wheel"]

#: What a wheel is built from; the cache key hashes these (ignored build products excluded).
SOURCE_PATHS = ("csrc", "causal_conv1d", "causal_conv1d_contract", "setup.py", "build_support")
_SKIP_PARTS = ("__pycache__", ".egg-info")
_SKIP_SUFFIXES = (".pyc", ".pyo", ".so", ".pyd", ".o")


def source_hash(root: Path = REPO_ROOT) -> str:
    """sha256 (16 hex) over the paths and bytes of :data:`SOURCE_PATHS`, build products excluded."""
    import hashlib

    digest = hashlib.sha256()
    for rel in SOURCE_PATHS:
        base = root / rel
        files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
        for path in files:
            name = path.relative_to(root).as_posix()
            if any(part in name for part in _SKIP_PARTS) or name.endswith(_SKIP_SUFFIXES):
                continue
            if path.name == contract.BUILD_INFO_FILENAME:
                continue
            digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def cached_wheel(
    job_id: str,
    cache_root: Path,
    *,
    cuda_archs: Optional[str] = None,
    torch_index_url: Optional[str] = None,
    extra_args: tuple[str, ...] = (),
    timeout: float = 3600,
) -> Path:
    """The wheel of ``job_id`` for the current sources, built natively on first use.

    Cached under ``cache_root/<source hash>/<job>[-archs<...>]/`` (so a rerun with unchanged
    sources is instant); the build venv is kept in ``cache_root/venvs/<job>`` across source
    changes. ``torch_index_url`` is passed as ``--torch-index-url`` (``""``: pip's configured
    indexes only, as the test suite does). Concurrent callers wait on a lock file instead of building twice. Raises
    BuildError with the build log's tail when the build fails.
    """
    import fcntl

    key = job_id + (f"-archs{cuda_archs.replace(';', '_').replace('+', 'p')}" if cuda_archs else "")
    out = cache_root / source_hash() / key
    found = sorted(out.glob("*.whl"))
    if len(found) == 1:
        return found[0]
    cache_root.mkdir(parents=True, exist_ok=True)
    with open(cache_root / f".{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = sorted(out.glob("*.whl"))
        if len(found) == 1:
            return found[0]
        log = cache_root / f"{key}.log"
        cmd = [
            sys.executable,
            "-m",
            "build_matrix",
            "build",
            "--job",
            job_id,
            "--native",
            "--out",
            str(out),
            "--venv",
            str(cache_root / "venvs" / job_id),
            "--report",
            str(out.parent / f"{key}.report.json"),
            *(["--cuda-archs", cuda_archs] if cuda_archs else []),
            *(["--torch-index-url", torch_index_url] if torch_index_url is not None else []),
            *extra_args,
        ]
        with open(log, "w") as fh:
            proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=REPO_ROOT, timeout=timeout)
        if proc.returncode != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
            raise BuildError(f"native build of {job_id} failed (exit {proc.returncode}); log {log}:\n{tail}")
        found = sorted(out.glob("*.whl"))
        if len(found) != 1:
            raise BuildError(f"native build of {job_id} left {len(found)} wheels in {out}")
        return found[0]
