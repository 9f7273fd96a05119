"""Render the site's pages (HTML through jinja2 templates with autoescape, PEP 691 JSON beside each)."""

from __future__ import annotations

__all__ = ["HTML_API_VERSION", "JSON_API_VERSION", "render_pages"]

import functools
import json
from typing import Any, Optional

import jinja2
from packaging.version import Version

from build_support.contract import contract
from index_site.coverage import (
    COVERAGE_NAME,
    PLATFORMS,
    Cell,
    CoverageRow,
    coverage_cells,
    dump_coverage,
    page_entries,
    platform_sort_key,
    variant_sort_key,
)
from index_site.manifest import Entry, Manifest

#: ``<meta name="pypi:repository-version">`` of the HTML pages (PEP 629).
HTML_API_VERSION = "1.0"
#: ``meta.api-version`` of the JSON pages: 1.1 adds ``size``, ``upload-time`` and ``versions`` (PEP 700).
JSON_API_VERSION = "1.1"
#: Project pages are at whl/<variant>/<project>/: three levels below the site root.
_PROJECT_PAGE_TO_ROOT = "../../../"
_PYTORCH_INDEX = "https://download.pytorch.org/whl/"


@functools.lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("index_site", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )


def _json(doc: Any) -> bytes:
    # compact: the C encoder (indent= falls back to the slow pure-Python one); sorted keys: reproducible
    return (json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def _href(entry: Entry) -> str:
    """The link from a project page: relative entries are relative to the site root."""
    return entry.url if not entry.is_relative else _PROJECT_PAGE_TO_ROOT + entry.url


def _yanked_json(entry: Entry) -> Any:
    return False if entry.yanked is None else (entry.yanked or True)


def _project_pages(variant: str, entries: list[Entry]) -> dict[str, bytes]:
    base = f"whl/{variant}/{contract.PROJECT_NAME}/"
    files = [
        {
            "filename": e.filename,
            "href": _href(e),
            "sha256": e.sha256,
            "requires_python": e.requires_python,
            "metadata_sha256": e.metadata_sha256,
            "yanked": e.yanked,
        }
        for e in entries
    ]
    html = (
        _env()
        .get_template("project.html")
        .render(api_version=HTML_API_VERSION, project=contract.PROJECT_NAME, variant=variant, files=files)
    )
    doc = {
        "meta": {"api-version": JSON_API_VERSION},
        "name": contract.PROJECT_NAME,
        "versions": sorted({e.version for e in entries}, key=Version),
        "files": [
            {
                "filename": e.filename,
                "url": _href(e),
                "hashes": {"sha256": e.sha256},
                **({"requires-python": e.requires_python} if e.requires_python else {}),
                "core-metadata": {"sha256": e.metadata_sha256},
                "dist-info-metadata": {"sha256": e.metadata_sha256},
                "yanked": _yanked_json(e),
                "size": e.size,
                "upload-time": e.upload_time,
            }
            for e in entries
        ],
    }
    return {base + "index.html": html.encode("utf-8"), base + "index.json": _json(doc)}


def _root_pages(variant: str) -> dict[str, bytes]:
    base = f"whl/{variant}/"
    html = (
        _env()
        .get_template("root.html")
        .render(api_version=HTML_API_VERSION, project=contract.PROJECT_NAME, variant=variant)
    )
    doc = {"meta": {"api-version": JSON_API_VERSION}, "projects": [{"name": contract.PROJECT_NAME}]}
    return {base + "index.html": html.encode("utf-8"), base + "index.json": _json(doc)}


_variant_sort_key = variant_sort_key


def _accel_label(accel: str) -> str:
    return "CPU" if accel == "cpu" else f"CUDA {contract.cuda_from_accel(accel)}"


def _family_label(family: str) -> str:
    return "CPU" if family == "cpu" else f"CUDA {family[2:]}.x"


def _newer_torch(variants: list[str], stable: list[Any]) -> Optional[str]:
    """The first torch minor after every one the site knows: the chooser's "X.Y or newer" entry,
    served by the stable family pages (``whl/stable2.10-cu13/``)."""
    known = [contract.Variant.parse(n).torch_minor for n in variants if not n.startswith("stable")]
    newest = max([tuple(sv.target) for sv in stable] + known)
    return f"{newest[0]}.{newest[1] + 1}"


def _landing(entries: list[Entry], rows: list[CoverageRow], site_url: str) -> bytes:
    cells = coverage_cells(entries, rows)
    platforms = sorted({p for p, _ in cells}, key=platform_sort_key)
    variants = sorted({v for _, v in cells}, key=_variant_sort_key)
    stable = [contract.StableVariant.parse(n) for n in variants if n.startswith("stable")]
    torch_accels: dict[str, list[dict[str, str]]] = {}
    newer = _newer_torch(variants, stable) if stable else None
    if newer is not None:  # any torch newer than the site knows: the stable family pages
        torch_accels[newer] = [{"id": sv.family, "label": _family_label(sv.family) + " (stable ABI)",
                                "variant": sv.name, "pytorch": _pytorch_accel(sv, variants)} for sv in stable]
    for name in variants:
        if name.startswith("stable"):
            continue
        v = contract.Variant.parse(name)
        torch_accels.setdefault(v.torch, []).append(
            {"id": v.accel, "label": _accel_label(v.accel), "variant": name, "pytorch": v.accel})
    table = []
    for name in variants:
        row: list[Cell] = [cells[(p, name)] for p in platforms]
        v = contract.parse_build_variant(name)
        if isinstance(v, contract.StableVariant):
            table.append({"variant": name, "torch": f"≥ {v.torch} (any)",
                          "accel": _family_label(v.family) + " (stable ABI)", "cells": row})
        else:
            table.append({"variant": name, "torch": v.torch, "accel": _accel_label(v.accel), "cells": row})
    data = {
        "site_url": site_url,
        "project": contract.PROJECT_NAME,
        "pytorch_index": _PYTORCH_INDEX,
        "platforms": [{"id": p, "label": PLATFORMS.get(p, p)} for p in platforms],
        "torch": [
            {"version": t, "label": f"{t} or newer" if t == newer else t, "accels": accels}
            for t, accels in torch_accels.items()
        ],
        # the chooser starts at the newest torch the site knows, not at the "or newer" entry
        "default_torch": next((t for t in torch_accels if t != newer), newer),
        "cells": {
            f"{p} {v}": {"wheel": c.wheel, "version": c.version, "reason": c.reason, "stable": c.stable}
            for (p, v), c in sorted(cells.items())
        },
    }
    html = (
        _env()
        .get_template("landing.html")
        .render(
            project=contract.PROJECT_NAME,
            site_url=site_url,
            platforms=[{"id": p, "label": PLATFORMS.get(p, p)} for p in platforms],
            table=table,
            data=data,
        )
    )
    return html.encode("utf-8")


def _pytorch_accel(sv: Any, variants: list[str]) -> str:
    """PyTorch's index for a family's newest known build (``cu132`` for cu13): the chooser's torch command."""
    accels = [contract.Variant.parse(n).accel for n in variants if not n.startswith("stable")]
    of_family = sorted((a for a in accels if contract.accel_family(a) == sv.family),
                       key=lambda a: -1 if a == "cpu" else int(a[2:]))
    return of_family[-1] if of_family else ("cpu" if sv.family == "cpu" else f"{sv.family}0")


def render_pages(manifest: Manifest, rows: list[CoverageRow]) -> dict[str, bytes]:
    """Every page of the site, keyed by its path relative to the site root (manifest.json included).

    One file, many pages (``coverage.page_entries``): a stable-ABI wheel is on its family page and on the
    page of every torch >= 2.10 variant of its family; the manifest keeps one entry per file."""
    site_url = manifest.site_url
    by_variant = page_entries(list(manifest.entries), rows)
    pages: dict[str, bytes] = {"manifest.json": manifest.dumps().encode("utf-8")}
    if rows:
        pages[COVERAGE_NAME] = dump_coverage(rows)
    for variant in sorted(by_variant, key=_variant_sort_key):
        entries = sorted(by_variant[variant], key=lambda e: e.filename)
        pages.update(_root_pages(variant))
        pages.update(_project_pages(variant, entries))
    listing = [
        {"name": v, "count": len(by_variant[v]), "yanked": sum(e.yanked is not None for e in by_variant[v])}
        for v in sorted(by_variant, key=_variant_sort_key)
    ]
    pages["whl/index.html"] = (
        _env().get_template("variants.html").render(project=contract.PROJECT_NAME, variants=listing).encode("utf-8")
    )
    url = site_url if site_url is None or site_url.endswith("/") else site_url + "/"
    pages["index.html"] = _landing(list(manifest.entries), rows, url or contract.DEFAULT_INDEX_URL)
    return pages
