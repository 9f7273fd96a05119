"""``diff``: what changes between two plans (e.g. what a new torch release adds).

Each side is a plan JSON file (``plan --format json`` output), a compatibility data file
(``*.toml``: planned now), or ``current`` (the data in use). The result lists jobs added,
removed and changed (field by field, environment variables included) and combinations whose
status changed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Optional, TypedDict, Union, cast

from build_matrix import compat
from build_matrix.errors import PlanFileError
from build_matrix.plan import CombinationDict, JobDict, PlanDoc, make_plan

__all__ = ["load_side", "diff_plans", "format_text"]

_COMBO_KEY = ("torch", "accel", "python", "abi", "platform")


class Change(TypedDict):
    old: object
    new: object


#: A job's changes, field by field; ``environment``: by variable (a dict of Change).
JobChanges = dict[str, Union[Change, dict[str, Change]]]


class JobsDiff(TypedDict):
    added: list[str]
    removed: list[str]
    changed: dict[str, JobChanges]


class CombinationsDiff(TypedDict):
    added: list[CombinationDict]
    removed: list[CombinationDict]
    newly_covered: list[CombinationDict]
    no_longer_covered: list[CombinationDict]


class _PlanDiff(TypedDict):
    jobs: JobsDiff
    combinations: CombinationsDiff


class PlanDiff(_PlanDiff, total=False):
    identical: bool  # set once both parts are known


def load_side(spec: str, *, data_path: Optional[str] = None) -> PlanDoc:
    """A plan document from a plan JSON file, a data TOML file or ``current``."""
    if spec == "current":
        return make_plan(compat.load(data_path)).to_dict()
    path = Path(spec)
    if path.suffix == ".toml":
        return make_plan(compat.load(path)).to_dict()
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PlanFileError(f"Plan file not found: {spec!r} (give a plan JSON, a data .toml or 'current')") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanFileError(f"Cannot read plan file {spec!r}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise PlanFileError(f"Invalid plan file (not JSON: {exc.msg} at line {exc.lineno}): {spec!r}") from None
    if (
        not isinstance(doc, dict)
        or not isinstance(doc.get("jobs"), list)
        or not isinstance(doc.get("combinations"), list)
    ):
        raise PlanFileError(
            f"Invalid plan file (no 'jobs' and 'combinations' lists; is it `plan --format json` output?): {spec!r}"
        )
    for i, job in enumerate(doc["jobs"]):
        if not isinstance(job, dict) or not isinstance(job.get("id"), str):
            raise PlanFileError(f"Invalid plan file (jobs[{i}] has no string 'id'): {spec!r}")
    for i, combo in enumerate(doc["combinations"]):
        if not isinstance(combo, dict) or any(k not in combo for k in (*_COMBO_KEY, "status")):
            raise PlanFileError(
                f"Invalid plan file (combinations[{i}] lacks one of {', '.join(_COMBO_KEY)}, status): {spec!r}"
            )
    return cast(PlanDoc, doc)  # the fields the diff reads were checked above


def _changes(old: Mapping[str, object], new: Mapping[str, object]) -> JobChanges:
    out: JobChanges = {}
    for key in sorted(set(old) | set(new)):
        if key == "environment":
            eo = cast(Mapping[str, object], old.get(key) or {})
            en = cast(Mapping[str, object], new.get(key) or {})
            env: dict[str, Change] = {
                k: {"old": eo.get(k), "new": en.get(k)} for k in sorted(set(eo) | set(en)) if eo.get(k) != en.get(k)
            }
            if env:
                out["environment"] = env
        elif old.get(key) != new.get(key):
            out[key] = {"old": old.get(key), "new": new.get(key)}
    return out


def diff_plans(old: PlanDoc, new: PlanDoc) -> PlanDiff:
    """``{"jobs": {"added", "removed", "changed"}, "combinations": {...}, "summary": {...}}``."""
    old_jobs: dict[str, JobDict] = {j["id"]: j for j in old["jobs"]}
    new_jobs: dict[str, JobDict] = {j["id"]: j for j in new["jobs"]}
    changed: dict[str, JobChanges] = {}
    for jid in sorted(set(old_jobs) & set(new_jobs)):
        delta = _changes(old_jobs[jid], new_jobs[jid])
        if delta:
            changed[jid] = delta
    old_c = {_combo_key(c): c for c in old["combinations"]}
    new_c = {_combo_key(c): c for c in new["combinations"]}
    newly_covered: list[CombinationDict] = []
    no_longer_covered: list[CombinationDict] = []
    added: list[CombinationDict] = []
    removed: list[CombinationDict] = []
    for key in new_c.keys() - old_c.keys():
        added.append(new_c[key])
    for key in old_c.keys() - new_c.keys():
        removed.append(old_c[key])
    for key in new_c.keys() & old_c.keys():
        o, n = old_c[key], new_c[key]
        if o["status"] != "covered" and n["status"] == "covered":
            newly_covered.append(n)
        elif o["status"] == "covered" and n["status"] != "covered":
            no_longer_covered.append(n)

    def order(items: list[CombinationDict]) -> list[CombinationDict]:
        return sorted(items, key=lambda c: tuple(str(v) for v in _combo_key(c)))

    result: PlanDiff = {
        "jobs": {
            "added": sorted(set(new_jobs) - set(old_jobs)),
            "removed": sorted(set(old_jobs) - set(new_jobs)),
            "changed": changed,
        },
        "combinations": {
            "added": order(added),
            "removed": order(removed),
            "newly_covered": order(newly_covered),
            "no_longer_covered": order(no_longer_covered),
        },
    }
    result["identical"] = not any(result["jobs"].values()) and not any(result["combinations"].values())
    return result


def _combo_key(c: CombinationDict) -> tuple[str, str, str, str, str]:
    return c["torch"], c["accel"], c["python"], c["abi"], c["platform"]


def _combo_line(c: CombinationDict) -> str:
    return f"torch {c['torch']} {c['accel']} py{c['python']} {c['abi']} {c['platform']}: {c['status']}"


def format_text(d: PlanDiff) -> str:
    """A human-readable summary of :func:`diff_plans`."""
    if d["identical"]:
        return "plans are identical\n"
    lines: list[str] = []
    j = d["jobs"]
    lines.append(f"jobs: +{len(j['added'])} -{len(j['removed'])} ~{len(j['changed'])}")
    lines += [f"  + {jid}" for jid in j["added"]]
    lines += [f"  - {jid}" for jid in j["removed"]]
    for jid, delta in j["changed"].items():
        lines.append(f"  ~ {jid}")
        for key, value in delta.items():
            if key == "environment":
                for var, ch in cast(dict[str, Change], value).items():
                    lines.append(f"      {var}: {ch['old']!r} -> {ch['new']!r}")
            else:
                field = cast(Change, value)
                lines.append(f"      {key}: {field['old']!r} -> {field['new']!r}")
    c = d["combinations"]
    lines.append(
        f"combinations: +{len(c['added'])} -{len(c['removed'])}, newly covered {len(c['newly_covered'])}, "
        f"no longer covered {len(c['no_longer_covered'])}"
    )
    for sign, rows in (("+", c["newly_covered"]), ("-", c["no_longer_covered"])):
        lines += [f"  {sign} {_combo_line(x)}" for x in rows[:50]]
        if len(rows) > 50:
            lines.append(f"  ... {len(rows) - 50} more (use --format json)")
    covered_added = [x for x in c["added"] if x["status"] == "covered"]
    lines += [f"  + {_combo_line(x)}" for x in covered_added[:50]]
    if len(covered_added) > 50:
        lines.append(f"  ... {len(covered_added) - 50} more covered (use --format json)")
    return "\n".join(lines) + "\n"
