"""Which build jobs of the plan a local release builds on this machine."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping, Sequence
from typing import Optional, cast

import causal_conv1d_contract as contract
from release.errors import UsageError
from release.machine import Machine

__all__ = [
    "DEFAULT_CPU_VARIANT",
    "DEFAULT_CUDA_VARIANT",
    "Selection",
    "plan_jobs",
    "plan_summary",
    "select_jobs",
]

#: The stable-ABI CPU wheel (every torch >= 2.10), built against the CPU torch on this machine (2.13).
DEFAULT_CPU_VARIANT = "stable2.10-cpu"
#: The stable-ABI CUDA 13 wheel, built when an nvcc of the same CUDA major is present.
DEFAULT_CUDA_VARIANT = "stable2.10-cu13"


#: ``build_matrix plan --format json`` as this package reads it (another process's output: values
#: are checked where they are used), and one of its jobs.
PlanJSON = Mapping[str, object]
PlanJob = Mapping[str, object]


@dataclasses.dataclass(frozen=True)
class Selection:
    jobs: tuple[PlanJob, ...]  # the plan's job objects, in build order (CPU first)
    notes: tuple[str, ...]  # why a default variant was left out, for the console

    @property
    def ids(self) -> list[str]:
        return [str(j["id"]) for j in self.jobs]


def plan_jobs(plan: PlanJSON) -> list[PlanJob]:
    """The plan's ``jobs`` list, validated enough for selection (id, variant, platform)."""
    jobs = plan.get("jobs")
    if not isinstance(jobs, list):
        raise UsageError("Invalid plan (no 'jobs' list): is build_matrix's `plan --format json` output changed?")
    for job in jobs:
        if not isinstance(job, Mapping) or not all(k in job for k in ("id", "variant", "platform")):
            raise UsageError(f"Invalid plan job (needs 'id', 'variant', 'platform'): {job!r}")
    return jobs


def plan_summary(plan: PlanJSON) -> str:
    """One line: how many combinations, covered, unavailable, build jobs."""
    combos = cast(list[object], plan.get("combinations") or [])
    covered = sum(1 for c in combos if isinstance(c, Mapping) and c.get("status") == "covered")
    unavailable = sum(1 for c in combos if isinstance(c, Mapping) and c.get("status") == "unavailable")
    jobs = plan_jobs(plan)
    variants = {j["variant"] for j in jobs}
    platforms = {j["platform"] for j in jobs}
    return (
        f"{len(combos)} combinations ({covered} covered, {unavailable} unavailable) -> "
        f"{len(jobs)} build jobs ({len(variants)} variants x {len(platforms)} platforms)"
    )


def _cuda_major(variant: str) -> int | None:
    """The CUDA major of a variant name (``torch2.14-cu130`` -> 13, ``stable2.10-cu13`` -> 13), None for CPU."""
    v = contract.parse_build_variant(variant)
    if isinstance(v, contract.StableVariant):
        return v.cuda_major
    return None if v.cuda is None else int(v.cuda.split(".")[0])


def _is_cuda(variant: str) -> bool:
    return _cuda_major(variant) is not None


def select_jobs(
    plan: PlanJSON,
    machine: Machine,
    *,
    variants: Optional[Sequence[str]] = None,
    cuda: bool = True,
) -> Selection:
    """Pick this machine's jobs.

    ``variants`` None: the defaults (the CPU variant; the CUDA 13 variant when nvcc 13 is here and
    ``cuda`` is on). Explicit variants must each have a job for this machine's platform; a CUDA
    variant also needs an nvcc of its CUDA major.
    """
    jobs = [j for j in plan_jobs(plan) if j["platform"] == machine.platform]
    by_variant = {str(j["variant"]): j for j in jobs}
    notes: list[str] = []
    if variants is None:
        wanted = [DEFAULT_CPU_VARIANT]
        major = _cuda_major(DEFAULT_CUDA_VARIANT)
        if not cuda:
            notes.append(f"{DEFAULT_CUDA_VARIANT} left out: --no-cuda")
        elif machine.nvcc is None:
            notes.append(f"{DEFAULT_CUDA_VARIANT} left out: no nvcc found (CUDA_HOME, PATH, /usr/local/cuda)")
        elif machine.cuda_major != major:
            notes.append(
                f"{DEFAULT_CUDA_VARIANT} left out: it needs CUDA {major}.x, "
                f"this nvcc is {machine.cuda_version} ({machine.nvcc})"
            )
        else:
            wanted.append(DEFAULT_CUDA_VARIANT)
    else:
        wanted = list(dict.fromkeys(variants))
        if not wanted:
            raise UsageError("Invalid --variants (empty): name at least one variant, e.g. stable2.10-cpu")
    selected = []
    for name in wanted:
        try:
            contract.parse_build_variant(name)
        except contract.InvalidVariant as exc:
            raise UsageError(str(exc)) from None
        job = by_variant.get(name)
        if job is None:
            close = difflib.get_close_matches(name, sorted(by_variant), n=3)
            hint = f" Perhaps you meant {' or '.join(close)}?" if close else ""
            raise UsageError(f"Invalid variant {name!r}: the plan has no {machine.platform} build job for it.{hint}")
        if _is_cuda(name) and variants is not None:
            if not cuda:
                raise UsageError(f"Invalid options: --variants names CUDA variant {name!r} but --no-cuda is set")
            if machine.nvcc is None:
                raise UsageError(f"Cannot build {name!r}: no nvcc found. Install the CUDA toolkit or set CUDA_HOME.")
        selected.append(job)
    selected.sort(key=lambda j: _is_cuda(str(j["variant"])))  # CPU first: it is the quick one
    return Selection(tuple(selected), tuple(notes))
