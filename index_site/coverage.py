"""Which (OS, variant) combinations have wheels, and why the others don't (the landing page's table).

Derived from the manifest, refined by an optional coverage file from build_matrix (``--coverage``:
the output of ``python -m build_matrix coverage --format json``), which knows the combinations that
are not built and the reason (e.g. PyTorch publishes no such build).
"""

from __future__ import annotations

__all__ = [
    "PLATFORMS",
    "COVERAGE_NAME",
    "Cell",
    "CoverageRow",
    "platform_of",
    "read_coverage",
    "dump_coverage",
    "coverage_cells",
    "page_entries",
    "variant_sort_key",
    "stable_families",
]

import dataclasses
import json
from pathlib import Path
from typing import Any, Optional

from packaging.version import Version

import causal_conv1d_contract as contract
from index_site.errors import IndexSiteError
from index_site.manifest import Entry

COVERAGE_NAME = "coverage.json"  #: the coverage in use, kept in the site for the next build or yank

#: The platforms of ARCHITECTURE.md's job ids, in display order, with their labels.
PLATFORMS = {
    "linux-x86_64": "Linux x86_64",
    "linux-aarch64": "Linux aarch64",
    "windows-amd64": "Windows x86_64",
}


def platform_of(tag: str) -> str:
    """The job platform of a wheel platform tag: ``manylinux_2_28_x86_64`` -> ``linux-x86_64``."""
    if tag == "win_amd64":
        return "windows-amd64"
    if tag.startswith(("linux_", "manylinux", "musllinux")):
        for arch in ("x86_64", "aarch64"):
            if tag.endswith("_" + arch):
                return f"linux-{arch}"
    return tag  # shown as is (e.g. a macOS tag): still one column of the table


@dataclasses.dataclass(frozen=True)
class CoverageRow:
    """One cell of build_matrix's coverage: whether a wheel is built for a (platform, variant), and why not."""

    platform: str
    variant: str
    wheel: bool
    reason: Optional[str]
    confidence: Optional[str] = None  # of the build data of the row's torch release: high, medium, low
    note: Optional[str] = None  # for low confidence: what the data assumes


@dataclasses.dataclass(frozen=True)
class Cell:
    """What the landing page says about one (platform, variant)."""

    wheel: bool
    version: Optional[str]  # newest published, not yanked version
    reason: Optional[str]  # why there is no wheel
    stable: bool = False  # the newest live wheel is a stable-ABI one (serves every torch >= its target)


def _parse(name: str) -> contract.BuildVariant:
    """A page's variant: ``torch2.13-cu130`` (Variant) or ``stable2.10-cu13`` (StableVariant)."""
    return contract.parse_build_variant(name)


def variant_sort_key(name: str) -> tuple[int, tuple[int, ...], int, str]:
    """Newest torch first; within a torch, CUDA builds newest first, CPU last; stable family pages
    (every torch >= their target) before them all, cu13, cu12, cpu."""
    v = _parse(name)
    if isinstance(v, contract.StableVariant):
        return (0, tuple(-x for x in v.target), -(v.cuda_major or 0), name)
    accel_rank = -1 if v.accel == "cpu" else int(v.accel[2:])
    return (1, tuple(-x for x in v.torch_minor), -accel_rank, name)


def page_entries(entries: list[Entry], rows: list[CoverageRow]) -> dict[str, list[Entry]]:
    """Which files each ``whl/<variant>/`` page links: one file, many pages.

    Every wheel is on the page of its own variant (a stable wheel: its family page,
    ``whl/stable2.10-cu13/``, the index for any torch >= 2.10 of that family, also torch releases newer
    than the build matrix knows). A stable wheel is also on the page of every variant it serves that
    the coverage lists (``whl/torch2.12-cu128/`` links the cu12 stable wheel) or that has per-minor
    wheels of its own, so install commands written for one torch minor keep working.
    """
    pages: dict[str, list[Entry]] = {}
    stable: list[tuple[contract.StableVariant, Entry]] = []
    for e in entries:
        pages.setdefault(e.variant, []).append(e)
        v = _parse(e.variant)
        if isinstance(v, contract.StableVariant):
            stable.append((v, e))
    if not stable:
        return pages
    served = {name for name in pages if not isinstance(_parse(name), contract.StableVariant)}
    served |= {r.variant for r in rows}
    for name in sorted(served):
        variant = contract.Variant.parse(name)
        linked = [e for sv, e in stable if sv.serves(variant)]
        if linked:
            pages.setdefault(name, []).extend(linked)
    return pages


def stable_families(entries: list[Entry]) -> list[str]:
    """The stable family pages of the manifest (``stable2.10-cu13`` ...), newest CUDA first."""
    names = {e.variant for e in entries if isinstance(_parse(e.variant), contract.StableVariant)}
    return sorted(names, key=variant_sort_key)


_STATUSES = ("covered", "unavailable")
_CONFIDENCE = ("high", "medium", "low")


def _rows_of(raw: Any, where: str) -> list[CoverageRow]:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected an object, got {raw!r}")
    variant = raw.get("variant")
    if not isinstance(variant, str):
        raise ValueError(f"{where}: needs a string field 'variant': {raw!r}")
    try:
        contract.Variant.parse(variant)
    except contract.InvalidVariant as exc:
        raise ValueError(f"{where}: {exc}") from None
    confidence, note = raw.get("confidence"), raw.get("note")
    if confidence is not None and confidence not in _CONFIDENCE:
        raise ValueError(f"{where}: 'confidence' must be one of {_CONFIDENCE}: {raw!r}")
    if note is not None and not isinstance(note, str):
        raise ValueError(f"{where}: 'note' must be a string: {raw!r}")
    cells = raw.get("cells")
    if not isinstance(cells, dict):
        raise ValueError(f"{where}: needs an object 'cells' (platform -> cell): {raw!r}")
    rows = []
    for platform, cell in cells.items():
        status = cell.get("status") if isinstance(cell, dict) else None
        if status not in _STATUSES:
            raise ValueError(f"{where}.cells[{platform!r}]: 'status' must be one of {_STATUSES}: {cell!r}")
        reason = cell.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise ValueError(f"{where}.cells[{platform!r}]: 'reason' must be a string: {cell!r}")
        rows.append(CoverageRow(platform, variant, status == "covered", reason, confidence, note))
    return rows


def read_coverage(path: Path) -> list[CoverageRow]:
    """Read ``python -m build_matrix coverage --format json`` output (see docs/index_site.md)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IndexSiteError(f"{str(path)!r}: cannot read the coverage file ({exc})") from None
    rows = doc.get("rows") if isinstance(doc, dict) else None
    if not isinstance(rows, list):
        raise IndexSiteError(
            f"{str(path)!r}: not a coverage file (expected the object that 'python -m build_matrix coverage "
            "--format json' writes, with a 'rows' list)"
        )
    try:
        return [row for i, raw in enumerate(rows) for row in _rows_of(raw, f"rows[{i}]")]
    except ValueError as exc:
        raise IndexSiteError(f"{str(path)!r}: {exc}") from None


def platform_sort_key(platform: str) -> tuple[int, str]:
    return (list(PLATFORMS).index(platform) if platform in PLATFORMS else len(PLATFORMS), platform)


def dump_coverage(rows: list[CoverageRow]) -> bytes:
    """The coverage kept in the site (build_matrix's format), read back when no --coverage is given."""
    platforms = sorted({r.platform for r in rows}, key=platform_sort_key)
    by_variant: dict[str, dict[str, Any]] = {}
    facts: dict[str, dict[str, str]] = {}
    for r in rows:
        cell: dict[str, Any] = {"status": "covered" if r.wheel else "unavailable"}
        if r.reason is not None:
            cell["reason"] = r.reason
        by_variant.setdefault(r.variant, {})[r.platform] = cell
        known = facts.setdefault(r.variant, {})
        if r.confidence is not None:
            known["confidence"] = r.confidence
        if r.note is not None:
            known["note"] = r.note
    out = []
    for name in sorted(by_variant, key=variant_sort_key):
        v = contract.Variant.parse(name)
        out.append({"torch": v.torch, "accel": v.accel, "variant": name, **facts[name], "cells": by_variant[name]})
    doc = {"platforms": platforms, "rows": out}
    return (json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def coverage_cells(entries: list[Entry], rows: list[CoverageRow]) -> dict[tuple[str, str], Cell]:
    """(platform, variant) -> Cell, for every official variant in the manifest or the coverage, and for
    every stable family page (``stable2.10-cu13``): a variant's cell counts the files of its page."""
    published: dict[tuple[str, str], list[Entry]] = {}
    variants: set[str] = set()
    platforms: set[str] = set()
    for name, files in page_entries(entries, rows).items():
        if not _parse(name).is_official:
            continue  # unofficial-ABI builds are listed under whl/ but not offered by the chooser
        variants.add(name)
        for e in files:
            for tag in e.platforms:
                platforms.add(platform_of(tag))
                published.setdefault((platform_of(tag), name), []).append(e)
    planned: dict[tuple[str, str], CoverageRow] = {}
    for row in rows:
        if contract.Variant.parse(row.variant).is_official:
            variants.add(row.variant)
            platforms.add(row.platform)
            planned[(row.platform, row.variant)] = row
    if not platforms:
        platforms = set(PLATFORMS)
    cells: dict[tuple[str, str], Cell] = {}
    for platform in platforms:
        for variant in variants:
            files = published.get((platform, variant), [])
            live = [e for e in files if e.yanked is None]
            planned_row = planned.get((platform, variant))
            if live:
                newest = max(live, key=lambda e: Version(e.version))
                stable = isinstance(_parse(newest.variant), contract.StableVariant)
                cells[(platform, variant)] = Cell(True, Version(newest.version).public, None, stable)
            elif files:
                reasons = sorted({e.yanked for e in files if e.yanked})
                why = f": {'; '.join(reasons)}" if reasons else ""
                cells[(platform, variant)] = Cell(False, None, f"every wheel published for it is yanked{why}")
            elif planned_row is not None and not planned_row.wheel:
                cells[(platform, variant)] = Cell(False, None, planned_row.reason or "not built by the build matrix")
            elif planned_row is not None:
                cells[(platform, variant)] = Cell(False, None, "in the build matrix, but no wheel is published yet")
            else:
                cells[(platform, variant)] = Cell(False, None, "no wheel is published for this platform")
    return cells
