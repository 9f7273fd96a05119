"""Writing the compatibility data and the command line's output files (``refresh``, ``--output``):
``to_raw`` (the document :func:`build_matrix.compat.parse` accepts), ``dumps`` (TOML in the
canonical layout of the packaged file) and ``write_atomic``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from build_matrix.compat import SCHEMA, CompatData, toml_key

__all__ = ["to_raw", "dumps", "write_atomic"]


def to_raw(data: CompatData) -> dict[str, Any]:
    """The document ``parse`` accepts, for ``dumps`` (``parse(to_raw(d))`` equals ``d``)."""
    raw: dict[str, Any] = {"schema": SCHEMA}
    if data.meta:
        raw["meta"] = dict(data.meta)
    raw["defaults"] = {"torch_index_base": data.torch_index_base}
    b = data.build
    raw["build"] = {
        "max_jobs_cpu": b.max_jobs_cpu,
        "max_jobs_cuda": b.max_jobs_cuda,
        "nvcc_threads": b.nvcc_threads,
        "build_requires": list(b.build_requires),
    }
    raw["platforms"] = {
        p.name: {"os": p.os, "arch": p.arch, "cibw_arch": p.cibw_arch, "runs_on": p.runs_on}
        for p in data.platforms.values()
    }
    raw["abi"] = {a.name: {"manylinux": a.manylinux, "glibc": a.glibc, "source": a.source} for a in data.abi.values()}
    raw["cuda"] = {}
    for c in data.cuda.values():
        entry: dict[str, Any] = {
            "archs": c.archs,
            "archs_aarch64": c.archs_aarch64,
            "source": c.source,
            "confidence": c.confidence,
        }
        if c.note:
            entry["note"] = c.note
        raw["cuda"][c.version] = entry
    raw["torch"] = {}
    for r in data.torch.values():
        entry = {"latest": r.latest, "cpp_std": r.cpp_std, "pythons": list(r.pythons), "source": r.source}
        if r.availability_source:
            entry["availability_source"] = r.availability_source
        entry["confidence"] = r.confidence
        if r.note:
            entry["note"] = r.note
        entry["builds"] = {accel: list(plats) for accel, plats in r.builds.items()}
        if r.python_overrides:
            entry["python_overrides"] = {k: list(vals) for k, vals in r.python_overrides.items()}
        raw["torch"][r.minor] = entry
    return raw


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to TOML: {value!r}")


def _toml_table(lines: list[str], prefix: str, table: Mapping[str, Any]) -> None:
    scalars = [(k, val) for k, val in table.items() if not isinstance(val, dict)]
    tables = [(k, val) for k, val in table.items() if isinstance(val, dict)]
    if prefix and (scalars or not tables):
        lines.append("")
        lines.append(f"[{prefix}]")
    for k, val in scalars:
        lines.append(f"{toml_key(k)} = {_toml_value(val)}")
    for k, val in tables:
        _toml_table(lines, f"{prefix}.{toml_key(k)}" if prefix else toml_key(k), val)


def dumps(data: CompatData, *, header: str = "") -> str:
    """The data as TOML, in the canonical layout of the packaged file."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    _toml_table(lines, "", to_raw(data))
    return "\n".join(lines).lstrip("\n") + "\n"


def write_atomic(path: os.PathLike[str] | str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and ``os.replace``."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
