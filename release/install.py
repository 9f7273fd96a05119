"""Fresh virtual environments, pip's install report, and the smoke test run inside them."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

from packaging.utils import canonicalize_name

import causal_conv1d_contract as contract
from release.errors import StepFailed

__all__ = [
    "venv_python",
    "install_origin",
    "SMOKE_SCRIPT",
    "check_smoke_output",
    "DOCTOR_ARGS",
    "check_doctor_output",
]


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def remove_tree(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def install_origin(report: Mapping[str, Any], *, step: str) -> dict[str, Any]:
    """From pip's ``--report`` JSON: where causal-conv1d came from (url, version, archive hash).

    Raises StepFailed when pip did not install causal-conv1d.
    """
    for item in report.get("install", []):
        meta = item.get("metadata", {})
        if canonicalize_name(meta.get("name", "")) == contract.PROJECT_NAME:
            info = item.get("download_info", {})
            hashes = info.get("archive_info", {}).get("hashes", {}) or {}
            return {
                "url": info.get("url", ""),
                "version": meta.get("version", ""),
                "requires_dist": list(meta.get("requires_dist", []) or []),
                "sha256": hashes.get("sha256"),
            }
    names = [it.get("metadata", {}).get("name") for it in report.get("install", [])]
    raise StepFailed(step, f"pip's report lists no {contract.PROJECT_NAME} among what it installed: {names}")


def check_origin(origin: Mapping[str, Any], *, index_root: str, variant: str, step: str) -> str:
    """The wheel came from ``index_root`` (the local server), is a wheel, and is of ``variant``."""
    url = str(origin["url"])
    if not url.startswith(index_root):
        raise StepFailed(
            step, f"{contract.PROJECT_NAME} was installed from {url!r}, not from the local index {index_root}"
        )
    filename = url.rsplit("/", 1)[-1].split("#", 1)[0]
    from urllib.parse import unquote

    try:
        parsed = contract.parse_wheel_name(unquote(filename))
    except contract.InvalidWheelName as exc:
        raise StepFailed(step, f"pip installed something that is not one of our wheels: {exc}") from None
    if parsed.variant.name != variant:
        raise StepFailed(step, f"pip picked a {parsed.variant.name} wheel ({filename}), expected {variant}")
    return unquote(filename)


#: Run with the fresh venv's python, ``-I`` and a scratch working directory, so the package
#: imported is the installed one and never the source tree.
SMOKE_SCRIPT = r"""
import importlib.resources, json, sys
import torch
import causal_conv1d
from causal_conv1d import causal_conv1d_fn
from causal_conv1d.causal_conv1d_interface import causal_conv1d_ref

torch.manual_seed(0)
results = []
for dtype, tol in ((torch.float32, 1e-4), (torch.float64, 1e-10)):
    for activation in (None, "silu"):
        x = torch.randn(2, 64, 300, dtype=dtype)
        w = torch.randn(64, 4, dtype=dtype)
        b = torch.randn(64, dtype=dtype)
        out = causal_conv1d_fn(x, w, b, activation=activation)
        ref = causal_conv1d_ref(x, w, b, activation=activation)
        err = (out - ref).abs().max().item()
        results.append({"dtype": str(dtype), "activation": activation, "max_abs_err": err, "tol": tol,
                        "ok": bool(err <= tol * max(1.0, ref.abs().max().item()))})
record = json.loads(importlib.resources.files("causal_conv1d").joinpath("_build_info.json").read_text())
print(json.dumps({
    "module": causal_conv1d.__file__,
    "version": causal_conv1d.__version__,
    "torch": torch.__version__,
    "build_record": record,
    "checks": results,
}))
"""


def check_smoke_output(stdout: str, *, variant: str, step: str, forbidden_root: Optional[Path] = None) -> dict:
    """Parse the smoke script's JSON line and fail the step on any mismatch."""
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise StepFailed(step, f"the smoke script printed no result (output: {stdout[-500:]!r})")
    data = json.loads(lines[-1])
    module = Path(data["module"])
    if forbidden_root is not None and forbidden_root in module.resolve().parents:
        raise StepFailed(step, f"imported causal_conv1d from the source tree ({module}), not the installed wheel")
    if data["build_record"].get("variant") != variant:
        raise StepFailed(step, f"build record says variant {data['build_record'].get('variant')!r}, expected {variant}")
    bad = [c for c in data["checks"] if not c["ok"]]
    if bad:
        raise StepFailed(step, f"causal_conv1d_fn differs from the reference: {bad}")
    return data


def summarize_checks(checks: Sequence[Mapping[str, Any]]) -> str:
    worst = max(c["max_abs_err"] for c in checks)
    return f"{len(checks)} comparisons with causal_conv1d_ref, max |diff| {worst:.2e}"


#: ``python -m causal_conv1d doctor`` without network: the build record against the running torch.
DOCTOR_ARGS = ("-m", "causal_conv1d", "doctor", "--json", "--offline")


def check_doctor_output(stdout: str, *, step: str) -> str:
    """The import guard's verdict from ``doctor --json``: the build record matches the running
    torch and the package imports. (Other problems it lists, e.g. a local nvcc of another CUDA
    major, concern source builds, not an installed wheel.)"""
    try:
        report = json.loads(stdout)
        record, imported = report["build_record"], report["import"]
    except (ValueError, KeyError, TypeError) as exc:
        raise StepFailed(
            step, f"`python -m causal_conv1d doctor --json` printed no report ({exc}): {stdout[-300:]!r}"
        ) from None
    if record.get("status") != "ok":
        raise StepFailed(
            step, f"the import guard reports the build record as {record.get('status')!r}: {record.get('mismatches')}"
        )
    if not imported.get("ok"):
        raise StepFailed(step, f"doctor: import causal_conv1d fails: {imported.get('error')}")
    variant = (record.get("record") or {}).get("variant")
    return f"doctor: build record {variant} matches torch {report.get('torch', {}).get('version')}"
