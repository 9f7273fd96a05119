"""Render the site's pages (HTML through jinja2 templates with autoescape, PEP 691 JSON beside each)."""

from __future__ import annotations

__all__ = ["HTML_API_VERSION", "JSON_API_VERSION", "render_pages"]

import functools
import json
from collections.abc import Sequence
from typing import TypedDict, Union

import jinja2
from packaging.version import Version

import causal_conv1d_contract as contract
from causal_conv1d_contract import commands as install_cmds
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
from index_site.doctor_app import DOCTOR_APP_NAME, doctor_app
from index_site.doctor_app import run_command as doctor_command
from index_site.manifest import Entry, Manifest, SdistEntry

#: ``<meta name="pypi:repository-version">`` of the HTML pages (PEP 629).
HTML_API_VERSION = "1.0"
#: ``meta.api-version`` of the JSON pages: 1.1 adds ``size``, ``upload-time`` and ``versions`` (PEP 700).
JSON_API_VERSION = "1.1"
#: Project pages are at whl/<variant>/<project>/ (contract.project_path): three levels below the site root.
_PROJECT_PAGE_TO_ROOT = "../" * contract.project_path("v").count("/")
_PYTORCH_INDEX = install_cmds.PYTORCH_INDEX_URL


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


def _json(doc: object) -> bytes:
    # compact: the C encoder (indent= falls back to the slow pure-Python one); sorted keys: reproducible
    return (json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def _href(entry: Entry) -> str:
    """The link from a project page: relative entries are relative to the site root."""
    return entry.url if not entry.is_relative else _PROJECT_PAGE_TO_ROOT + entry.url


def _yanked_json(entry: Entry | SdistEntry) -> Union[bool, str]:
    return False if entry.yanked is None else (entry.yanked or True)


def _pep691_file(e: Entry | SdistEntry, url: str) -> dict[str, object]:
    """A file of a PEP 691 project page (a wheel's adds its core metadata)."""
    return {
        "filename": e.filename,
        "url": url,
        "hashes": {"sha256": e.sha256},
        **({"requires-python": e.requires_python} if e.requires_python else {}),
        "yanked": _yanked_json(e),
        "size": e.size,
        "upload-time": e.upload_time,
    }


def _pep691_page(entries: Sequence[Entry | SdistEntry], files: list[dict[str, object]]) -> dict[str, object]:
    return {
        "meta": {"api-version": JSON_API_VERSION},
        "name": contract.PROJECT_NAME,
        "versions": sorted({e.version for e in entries}, key=Version),
        "files": files,
    }


def _project_pages(variant: str, entries: list[Entry]) -> dict[str, bytes]:
    base = contract.project_path(variant)
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
    json_files: list[dict[str, object]] = [
        {
            **_pep691_file(e, _href(e)),
            "core-metadata": {"sha256": e.metadata_sha256},
            "dist-info-metadata": {"sha256": e.metadata_sha256},
        }
        for e in entries
    ]
    doc = _pep691_page(entries, json_files)
    return {base + "index.html": html.encode("utf-8"), base + "index.json": _json(doc)}


def _source_pages(sdists: list[SdistEntry]) -> dict[str, bytes]:
    """``source/`` (PEP 503 root) and ``source/causal-conv1d/`` listing the sdists (no core metadata:
    pip reads an sdist's by building it)."""
    root = contract.source_path()
    to_root = "../" * (root + contract.PROJECT_NAME + "/").count("/")
    href = {e.filename: (e.url if not e.is_relative else to_root + e.url) for e in sdists}
    files = [
        {
            "filename": e.filename,
            "href": href[e.filename],
            "sha256": e.sha256,
            "requires_python": e.requires_python,
            "metadata_sha256": None,
            "yanked": e.yanked,
        }
        for e in sdists
    ]
    env = _env()
    page = root + contract.PROJECT_NAME + "/"
    label = "source distributions"
    doc = _pep691_page(sdists, [_pep691_file(e, href[e.filename]) for e in sdists])
    roots = {"meta": {"api-version": JSON_API_VERSION}, "projects": [{"name": contract.PROJECT_NAME}]}
    return {
        root + "index.html": env.get_template("root.html")
        .render(api_version=HTML_API_VERSION, project=contract.PROJECT_NAME, variant=label)
        .encode("utf-8"),
        root + "index.json": _json(roots),
        page + "index.html": env.get_template("project.html")
        .render(api_version=HTML_API_VERSION, project=contract.PROJECT_NAME, variant=label, files=files)
        .encode("utf-8"),
        page + "index.json": _json(doc),
    }


def _root_pages(variant: str) -> dict[str, bytes]:
    base = contract.variant_path(variant)
    html = (
        _env()
        .get_template("root.html")
        .render(api_version=HTML_API_VERSION, project=contract.PROJECT_NAME, variant=variant)
    )
    doc = {"meta": {"api-version": JSON_API_VERSION}, "projects": [{"name": contract.PROJECT_NAME}]}
    return {base + "index.html": html.encode("utf-8"), base + "index.json": _json(doc)}


_variant_sort_key = variant_sort_key


def _is_stable(name: str) -> bool:
    return isinstance(contract.parse_build_variant(name), contract.StableVariant)


def _accel_label(accel: str) -> str:
    return "CPU" if accel == "cpu" else f"CUDA {contract.cuda_from_accel(accel)}"


def _family_label(family: str) -> str:
    return "CPU" if family == "cpu" else f"CUDA {family[2:]}.x"


def _newer_torch(per_minor: list[str], stable: list[contract.StableVariant]) -> str:
    """The first torch minor after every one the site knows: the chooser's "X.Y or newer" entry,
    served by the stable family pages (``whl/stable2.10-cu13/``)."""
    known = [contract.Variant.parse(n).torch_minor for n in per_minor]
    newest = max([(sv.target[0], sv.target[1]) for sv in stable] + known)
    return f"{newest[0]}.{newest[1] + 1}"


def _pytorch_accel(sv: contract.StableVariant, per_minor: list[str]) -> str:
    """PyTorch's index for a family's newest known build (``cu132`` for cu13): where the "X.Y or newer"
    entry's command takes torch from."""
    of_family = {contract.Variant.parse(n).accel for n in per_minor}
    of_family = {a for a in of_family if contract.accel_family(a) == sv.family}
    if not of_family:
        return "cpu" if sv.family == "cpu" else f"{sv.family}0"
    return max(of_family, key=lambda a: -1 if a == "cpu" else int(a[2:]))


def _default_selection(
    cells: dict[tuple[str, str], Cell], platforms: list[str], per_minor: list[str]
) -> dict[str, str]:
    """What the page opens on: the newest torch minor the site knows (newest torch, then newest CUDA,
    CPU last) that has a wheel -- its own or a stable-ABI one on its page -- on the first platform
    (Linux x86_64 first) that has it; with no wheel at all, the newest variant. Never the "X.Y or
    newer" entry: a torch the site does not know yet is a choice to make, not a default."""
    for name in per_minor:
        for p in platforms:
            if cells[(p, name)].wheel:
                v = contract.Variant.parse(name)
                return {"os": p, "torch": v.torch, "accel": v.accel}
    if not per_minor:
        return {"os": platforms[0] if platforms else "", "torch": "", "accel": ""}
    v = contract.Variant.parse(per_minor[0])
    return {"os": platforms[0], "torch": v.torch, "accel": v.accel}


def _reason_keys(cells: dict[tuple[str, str], Cell], platforms: list[str], variants: list[str]) -> dict[str, str]:
    """A short key (a, b, ...) per distinct reason, in table order: the compact grid shows the key, the
    legend and each cell's tooltip the reason."""
    keys: dict[str, str] = {}
    for name in variants:
        for p in platforms:
            reason = cells[(p, name)].reason
            if not cells[(p, name)].wheel and reason and reason not in keys:
                n = len(keys)
                keys[reason] = chr(ord("a") + n) if n < 26 else f"z{n - 25}"
    return keys


class VariantCommands(TypedDict):
    """What the landing page offers for one variant: the wheel's install commands, and from source."""

    wheel: dict[str, str]
    source: dict[str, str]


class AccelChoice(TypedDict):
    """One accelerator button of a torch row of the landing page."""

    id: str
    label: str
    variant: str
    pytorch: str
    stable: bool


def _variant_commands(site_url: str, variant_name: str) -> VariantCommands:
    """A torch minor's commands: torch ``==X.Y.*`` from PyTorch's index of the build and our wheel
    from the minor's page (for torch >= 2.10 that page links the family's stable-ABI wheel)."""
    v = contract.Variant.parse(variant_name)
    spec = f"=={v.torch}.*"
    return {
        "wheel": install_cmds.install_commands(site_url, v, spec),
        "source": install_cmds.source_commands(v.accel, spec, base=site_url),
    }


def _stable_commands(site_url: str, sv: contract.StableVariant, newer: str, torch_accel: str) -> VariantCommands:
    """The "X.Y or newer" entry's commands: torch ``>=X.Y`` from PyTorch's index of the family's newest
    build and our wheel from the family page, which serves every torch >= its target."""
    spec = f">={newer}"
    return {
        "wheel": install_cmds.install_commands(site_url, sv, spec, torch_accel=torch_accel),
        "source": install_cmds.source_commands(torch_accel, spec, base=site_url),
    }


def _landing(entries: list[Entry], rows: list[CoverageRow], site_url: str, sdists: tuple = ()) -> bytes:
    cells = coverage_cells(entries, rows)
    platforms = sorted({p for p, _ in cells}, key=platform_sort_key)
    variants = sorted({v for _, v in cells}, key=_variant_sort_key)  # the stable family pages first
    per_minor = [n for n in variants if not _is_stable(n)]
    stable = [contract.StableVariant.parse(n) for n in variants if _is_stable(n)]
    newer = _newer_torch(per_minor, stable) if stable else None
    torch_accels: dict[str, list[AccelChoice]] = {}
    commands: dict[str, VariantCommands] = {}
    if newer is not None:  # any torch newer than the site knows: the stable family pages
        torch_accels[newer] = []
        # every family the data has a torch >= the stable target of, with a wheel published or not: a
        # CUDA 12 torch is never offered the CUDA 13 family (the page then says there is no wheel)
        families = {sv.family for sv in stable}
        for name in per_minor:
            v = contract.Variant.parse(name)
            if v.torch_minor >= contract.STABLE_TARGET and contract.accel_family(v.accel) in contract.ACCEL_FAMILIES:
                families.add(contract.accel_family(v.accel))
        for sv in sorted((contract.StableVariant(f) for f in families), key=lambda sv: _variant_sort_key(sv.name)):
            pytorch = _pytorch_accel(sv, per_minor)
            torch_accels[newer].append(
                {
                    "id": sv.family,
                    "label": _family_label(sv.family) + " (stable ABI)",
                    "variant": sv.name,
                    "pytorch": pytorch,
                    "stable": True,
                }
            )
            commands[sv.name] = _stable_commands(site_url, sv, newer, pytorch)
    for name in per_minor:
        v = contract.Variant.parse(name)
        torch_accels.setdefault(v.torch, []).append(
            {"id": v.accel, "label": _accel_label(v.accel), "variant": name, "pytorch": v.accel, "stable": False}
        )
        commands[name] = _variant_commands(site_url, name)
    reasons = _reason_keys(cells, platforms, variants)
    table = []
    for name in variants:
        row = [{"cell": cells[(p, name)], "key": reasons.get(cells[(p, name)].reason or "")} for p in platforms]
        bv = contract.parse_build_variant(name)
        if isinstance(bv, contract.StableVariant):
            table.append(
                {
                    "variant": name,
                    "torch": f"\u2265 {bv.torch} (any)",
                    "accel": _family_label(bv.family) + " (stable ABI)",
                    "cells": row,
                }
            )
        else:
            table.append({"variant": name, "torch": bv.torch, "accel": _accel_label(bv.accel), "cells": row})
    notes: dict[str, str] = {}  # torch minor -> what its low-confidence build data assumes
    for r in rows:
        if r.confidence == "low":
            notes.setdefault(contract.Variant.parse(r.variant).torch, r.note or "the build data assumes it")
    data = {
        "site_url": site_url,
        "project": contract.PROJECT_NAME,
        "platforms": [{"id": p, "label": PLATFORMS.get(p, p)} for p in platforms],
        "torch": [
            {
                "version": t,
                "label": f"{t} or newer" if t == newer else t,
                "newer": t == newer,
                "accels": accels,
                "low_confidence": notes.get(t),
            }
            for t, accels in torch_accels.items()
        ],
        "cells": {
            f"{p} {v}": {"wheel": c.wheel, "version": c.version, "reason": c.reason, "stable": c.stable}
            for (p, v), c in sorted(cells.items())
        },
        "commands": commands,
        "version": contract.PACKAGE_VERSION,
        "sdists": [e.filename for e in sdists if e.yanked is None],
        "default": _default_selection(cells, platforms, per_minor),
    }
    example = contract.Variant.parse(per_minor[0]) if per_minor else contract.Variant((2, 13), "cpu")
    html = (
        _env()
        .get_template("landing.html")
        .render(
            project=contract.PROJECT_NAME,
            site_url=site_url,
            platforms=[{"id": p, "label": PLATFORMS.get(p, p)} for p in platforms],
            table=table,
            legend=[{"key": k, "reason": r} for r, k in reasons.items()],
            any_stable=any(c.wheel and c.stable for c in cells.values()),
            stable_pages=[contract.variant_index_url(site_url, sv) for sv in stable],
            # the layout (contract.variant_path), never rebuilt in the template
            variant_index_pattern=contract.variant_index_url(site_url, "torchX.Y-<cpu or cuXYZ>"),
            variants_path=f"{contract.WHEELS_DIR}/",
            data=data,
            noscript_command=install_cmds.install_commands(site_url, example, f"=={example.torch}.*")["pip"],
            noscript_variant=example.name,
            doctor_command=doctor_command(site_url),
        )
    )
    return html.encode("utf-8")


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
    if manifest.sdists:
        pages.update(_source_pages(list(manifest.sdists)))
    pages[f"{contract.WHEELS_DIR}/index.html"] = (
        _env().get_template("variants.html").render(project=contract.PROJECT_NAME, variants=listing).encode("utf-8")
    )
    public = contract.site_base(site_url or contract.DEFAULT_INDEX_URL)
    pages["index.html"] = _landing(list(manifest.entries), rows, public, manifest.sdists)
    pages[DOCTOR_APP_NAME] = doctor_app(public)  # doctor before install: python doctor.pyz
    return pages
