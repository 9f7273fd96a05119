"""The coverage table: rows torch x accel, columns platforms; each cell a wheel or why there is none.

``table(plan)`` gives the JSON form (for the landing page), ``markdown(plan)`` the README form.
A cell is "covered" when a build job exists for that (variant, platform); it then names the wheel
and the CPythons it serves. Rows list only the accelerator builds a torch release has.
"""

from __future__ import annotations

from typing import Any

from build_matrix.plan import Plan

__all__ = ["table", "markdown"]


def table(plan: Plan) -> dict[str, Any]:
    """``{"platforms": [...], "rows": [{"torch", "accel", "variant", "cells": {platform: cell}}]}``."""
    platforms = list(dict.fromkeys(c.platform for c in plan.combinations))
    jobs = {(j.torch, j.accel, j.platform): j for j in plan.jobs}
    reasons: dict[tuple[str, str, str], str] = {}
    for c in plan.combinations:
        reasons.setdefault((c.torch, c.accel, c.platform), c.reason)
    rows = []
    seen: set[tuple[str, str]] = set()
    for c in plan.combinations:
        key = (c.torch, c.accel)
        if key in seen:
            continue
        seen.add(key)
        rel = plan.data.torch[c.torch]
        if c.accel not in rel.builds:
            continue
        cells: dict[str, Any] = {}
        for plat in platforms:
            job = jobs.get((c.torch, c.accel, plat))
            if job is not None:
                cells[plat] = {
                    "status": "covered",
                    "job": job.id,
                    "wheel": job.wheel_filename,
                    "pythons": list(job.covers_pythons),
                    "torch_version": job.torch_version,
                }
            else:
                reason = reasons.get((c.torch, c.accel, plat), "not planned")
                if rel.has_build(c.accel, plat):
                    reason = f"torch {c.torch} {c.accel} on {plat} ships for no CPython this wheel can serve"
                cells[plat] = {"status": "unavailable", "job": None, "reason": reason}
        rows.append({"torch": c.torch, "accel": c.accel, "variant": f"torch{c.torch}-{c.accel}", "cells": cells})
    return {"platforms": platforms, "abi3": True, "rows": rows}


def _short_reason(reason: str) -> str:
    if "has no" in reason:
        return "no torch build"
    return reason


def markdown(plan: Plan) -> str:
    """A Markdown table for the README: one row per torch x accel, one column per platform."""
    t = table(plan)
    head = "| torch | accel | " + " | ".join(t["platforms"]) + " |"
    sep = "|---|---|" + "---|" * len(t["platforms"])
    lines = [head, sep]
    for row in t["rows"]:
        cells = []
        for plat in t["platforms"]:
            cell = row["cells"][plat]
            if cell["status"] == "covered":
                pys = cell["pythons"]
                span = pys[0] if len(pys) == 1 else f"{pys[0]}–{pys[-1]}"
                cells.append(f"✅ cp39-abi3 (Python {span})")
            else:
                cells.append(f"— {_short_reason(cell['reason'])}")
        lines.append(f"| {row['torch']} | {row['accel']} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("✅: a wheel (`pip install causal-conv1d --extra-index-url <site>/whl/torchX.Y-ACCEL/`); "
                 "—: PyTorch publishes no such torch build. Free-threaded CPythons build from source.")
    return "\n".join(lines) + "\n"
