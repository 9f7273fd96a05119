"""The build plan: every user combination, the build jobs, and which job serves which combination.

A *combination* is what a user has: torch minor x accelerator build x CPython x C++ ABI x platform.
A *job* is what we build: one (variant, platform). The wheel is ``cp39-abi3``, so one job serves
every CPython >= 3.9 that its torch build ships for (free-threaded CPythons cannot load abi3
extensions: those combinations are unavailable, with that reason).

Stable API (``build_matrix.native`` codes against it)::

    make_plan(data=None, *, torch=None, accels=None, platforms=None, pythons=None,
              torch_index_base=None) -> Plan
    plan.jobs: list[Job]            # sorted by (torch minor, accel, platform)
    plan.job(job_id) -> Job         # raises build_matrix.errors.UnknownJob (with suggestions)
    plan.combinations: list[Combination]
    plan.to_dict()                  # the JSON of `python -m build_matrix plan --format json`

Filters: ``torch`` is a spec string or a list of them: ``"2.7"``, ``"2.6-2.9"`` (inclusive),
``"2.10-"`` (open), ``">=2.6,<2.10"`` (PEP 440); ``accels`` / ``platforms`` / ``pythons`` are lists
or comma-separated strings. Unknown values raise :class:`build_matrix.errors.UnknownValue`
naming the close valid ones.

Stable ABI (torch >= ``contract.STABLE_TARGET``, 2.10): the extension built on the LibTorch stable
ABI loads on every later torch, so those minors get no per-minor job. One *stable job* per
accelerator family (cpu, cu12, cu13) x platform builds ``stable2.10-<family>`` and covers every
(torch >= 2.10, accel of that family) combination on its platform. Its toolkit is the newest CUDA of
the family that a served torch ships; it builds against the newest served torch minor shipping that
CUDA on that platform (``confidence = "low"`` minors only when nothing else has it); its arch list is
the union of the served CUDA versions' lists, ``+PTX`` on the highest. ``make_plan(stable_abi=False)``
gives the per-minor plan (what the matrix was before the stable ABI; ``coverage`` prints both counts).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence
from typing import Optional, TypedDict, Union, cast

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

import causal_conv1d_contract as contract
from build_matrix import compat, repair
from build_matrix.errors import UnknownJob, UnknownValue

__all__ = [
    "SCHEMA_VERSION",
    "ABI_NAMES",
    "Combination",
    "Job",
    "Plan",
    "StableBuild",
    "stable_builds",
    "resolve_job",
    "make_plan",
    "python_tag",
    "wheel_platform_tag",
]

SCHEMA_VERSION = 1  #: bumped only on an incompatible change of Plan.to_dict()'s layout
ABI_NAMES = ("cxx11", "pre-cxx11", "msvc")  #: the "abi" of a combination (msvc: Windows, no choice)
ABI3_STATEMENT = (
    "Wheels are cp39-abi3: one build job per (variant, platform) serves every CPython >= 3.9 that "
    "its torch build ships for; free-threaded CPythons (3.13t, 3.14t, ...) cannot load abi3 "
    "extensions and build from source."
)

Filter = Union[str, Sequence[str], None]


class CombinationDict(TypedDict):
    """A combination in ``plan --format json``: :class:`Combination`'s fields."""

    torch: str
    accel: str
    python: str
    abi: str
    platform: str
    status: str
    job: Optional[str]
    reason: str


class JobDict(TypedDict):
    """A job in ``plan --format json`` (docs/build_matrix.md; :class:`Job`)."""

    id: str
    variant: str
    torch: str
    accel: str
    platform: str
    os: str
    arch: str
    runs_on: str
    python: str
    covers_pythons: list[str]
    torch_version: str
    torch_index_url: str
    cuda: Optional[str]
    cuda_archs: str
    cxx11_abi: bool
    manylinux: Optional[str]
    wheel_platform: str
    wheel_filename: str
    cpp_std: str
    environment: dict[str, str]
    stable_abi: bool
    family: str
    requires_torch: str
    serves: list[str]


class PlanFilters(TypedDict):
    """What the plan was narrowed to (None: everything)."""

    torch: Optional[list[str]]
    accels: Optional[list[str]]
    platforms: Optional[list[str]]
    pythons: Optional[list[str]]


class PlanSummary(TypedDict):
    combinations: int
    covered: int
    unavailable: int
    jobs: int
    per_python_jobs: int
    jobs_saved_ratio: Optional[float]
    abi3: str


class PlanData(TypedDict):
    path: str
    updated: str


class PlanDoc(TypedDict):
    """``plan --format json``: the whole plan (schema in docs/build_matrix.md)."""

    schema_version: int
    generator: str
    data: PlanData
    filters: PlanFilters
    abi3: str
    summary: PlanSummary
    jobs: list[JobDict]
    combinations: list[CombinationDict]


def python_tag(python: str) -> str:
    """``"3.10"`` -> ``"cp310"``, ``"3.13t"`` -> ``"cp313t"``."""
    major, minor, ft = compat.python_key(python)
    return f"cp{major}{minor}{'t' if ft else ''}"


def wheel_platform_tag(platform: str, manylinux: Optional[str]) -> str:
    """The platform tag our wheel gets: ``manylinux_2_28_x86_64``, ``manylinux2014_aarch64``, ``win_amd64``."""
    if platform == "windows-amd64":
        return "win_amd64"
    arch = platform.split("-", 1)[1]
    return f"{manylinux}_{arch}"


@dataclasses.dataclass(frozen=True)
class Combination:
    """One user combination and how (or why not) it is served."""

    torch: str  # "2.7"
    accel: str  # "cu128" | "cpu"
    python: str  # "3.12" | "3.13t"
    abi: str  # "cxx11" | "pre-cxx11" on Linux, "msvc" on Windows
    platform: str  # "linux-x86_64" | "linux-aarch64" | "windows-amd64"
    status: str  # "covered" | "unavailable"
    job: Optional[str]  # the covering job's id, or None
    reason: str  # why it is unavailable, or which wheel serves it

    def to_dict(self) -> CombinationDict:
        return cast(CombinationDict, dataclasses.asdict(self))


@dataclasses.dataclass(frozen=True)
class Job:
    """One build job: one wheel of one variant for one platform.

    Fields (all stable):

    - ``id``: ``f"{variant}-{platform}"``, e.g. ``"torch2.13-cpu-linux-x86_64"``
    - ``variant``: ``contract.Variant``; ``torch`` ("2.13") and ``accel`` ("cpu") are its parts
    - ``platform`` ("linux-x86_64" | "linux-aarch64" | "windows-amd64"), ``os`` ("linux" | "windows"),
      ``arch`` ("x86_64" | "aarch64" | "amd64"), ``runs_on`` (GitHub runner label)
    - ``torch_version``: the exact torch release to install (the minor's latest patch, "2.13.0")
    - ``torch_index_url``: PyTorch's index for the accel ("https://download.pytorch.org/whl/cpu")
    - ``cuda``: "13.0" or None; ``cuda_archs``: TORCH_CUDA_ARCH_LIST ("" for cpu)
    - ``cxx11_abi``: the C++ ABI of PyTorch's build of the variant (meaningful on Linux)
    - ``manylinux``: "manylinux2014" | "manylinux_2_28" (None on Windows);
      ``wheel_platform``: the platform tag the wheel gets ("manylinux_2_28_x86_64", "win_amd64")
    - ``wheel_filename``: the wheel file the job produces (contract.wheel_filename)
    - ``python``: the one CPython it builds with (lowest non-free-threaded >= 3.9 torch ships for)
    - ``cpp_std``: "17" | "20"; ``covers_pythons``: every CPython the abi3 wheel serves
    - ``environment``: the complete cibuildwheel configuration (CIBW_* variables)
    - ``stable_abi``: True for a stable-ABI job: ``variant`` is then a ``contract.StableVariant``
      (``stable2.10-cu13``), ``build_variant`` the torch it compiles against (``torch2.14-cu132``;
      ``torch`` / ``accel`` / ``torch_version`` / ``cuda`` describe that torch) and ``serves`` the
      variant names it covers (``torch2.10-cu130``, ..., every torch >= 2.10 of its family).
      For a per-minor job ``build_variant == variant`` and ``serves == (variant.name,)``.
    """

    id: str
    variant: contract.BuildVariant
    platform: str
    os: str
    arch: str
    runs_on: str
    torch_version: str
    torch_index_url: str
    cuda: Optional[str]
    cuda_archs: str
    cxx11_abi: bool
    manylinux: Optional[str]
    wheel_platform: str
    wheel_filename: str
    python: str
    cpp_std: str
    covers_pythons: tuple[str, ...]
    environment: dict[str, str]
    stable_abi: bool = False
    build_variant: Optional[contract.Variant] = None  # the torch compiled against (defaults to variant)
    serves: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.build_variant is None:
            object.__setattr__(self, "build_variant", self.variant)
        if not self.serves:
            object.__setattr__(self, "serves", (self.variant.name,))

    def __hash__(self) -> int:  # environment is a dict: hash by the (unique) id
        return hash(self.id)

    @property
    def compiled_against(self) -> contract.Variant:
        """The torch build compiled against: ``build_variant`` (a per-minor job's is its ``variant``)."""
        built = self.build_variant if self.build_variant is not None else self.variant
        if not isinstance(built, contract.Variant):
            raise TypeError(f"job {self.id}: build_variant must be a per-minor Variant, got {built!r}")
        return built

    @property
    def torch(self) -> str:
        """The torch minor compiled against (for a stable job: the build torch, not the target)."""
        return self.compiled_against.torch

    @property
    def accel(self) -> str:
        """The accelerator of the torch compiled against (``cu132`` for the stable cu13 job)."""
        return self.compiled_against.accel

    @property
    def family(self) -> str:
        """``cpu`` / ``cu12`` / ``cu13``: the accelerator family of the wheel."""
        return contract.accel_family(self.accel)

    @property
    def cibw_identifier(self) -> str:
        """The one identifier ``cibuildwheel --print-build-identifiers`` must print for this job."""
        return self.environment["CIBW_BUILD"]

    def to_dict(self) -> JobDict:
        return {
            "id": self.id,
            "variant": self.variant.name,
            "torch": self.torch,
            "accel": self.accel,
            "platform": self.platform,
            "os": self.os,
            "arch": self.arch,
            "runs_on": self.runs_on,
            "python": self.python,
            "covers_pythons": list(self.covers_pythons),
            "torch_version": self.torch_version,
            "torch_index_url": self.torch_index_url,
            "cuda": self.cuda,
            "cuda_archs": self.cuda_archs,
            "cxx11_abi": self.cxx11_abi,
            "manylinux": self.manylinux,
            "wheel_platform": self.wheel_platform,
            "wheel_filename": self.wheel_filename,
            "cpp_std": self.cpp_std,
            "environment": dict(self.environment),
            "stable_abi": self.stable_abi,
            "family": self.family,
            "requires_torch": _requires_torch(self.variant),
            "serves": list(self.serves),
        }


@dataclasses.dataclass(frozen=True)
class Plan:
    """The result of :func:`make_plan`."""

    data: compat.CompatData
    filters: PlanFilters
    combinations: list[Combination]
    jobs: list[Job]

    def job(self, job_id: str) -> Job:
        """The job with that id; raises UnknownJob (with close ids) when there is none."""
        for job in self.jobs:
            if job.id == job_id:
                return job
        hint, meant = self._stable_hint(job_id)
        raise UnknownJob(job_id, [j.id for j in self.jobs], hint=hint, suggestions=meant)

    def _stable_hint(self, job_id: str) -> tuple[str, Optional[list[str]]]:
        """For a per-minor id of a torch >= 2.10 (``torch2.13-cpu-linux-x86_64``): (why there is no such
        job, [its stable job] -- the only suggestion: older torch minors' jobs would build another
        torch's wheel). ("", None) for any other id: difflib's close ids are the suggestions."""
        m = re.match(r"^(torch\d+\.\d+-(?:cpu|cu\d+))-(.+)$", job_id)
        if not m:
            return "", None
        try:
            stable = contract.stable_variant_for(contract.Variant.parse(m.group(1)))
        except contract.InvalidVariant:
            return "", None
        if stable is None:
            return "", None
        for job in self.jobs:
            if job.variant == stable and job.id.endswith("-" + m.group(2)):
                return (
                    f"{m.group(1)} has no per-minor job: the stable-ABI job {job.id} builds the wheel that "
                    f"serves every torch >= {stable.torch} of the {stable.family} family.",
                    [job.id],
                )
        return (
            f"{m.group(1)} has no per-minor job: torch >= {stable.torch} is served by the stable-ABI jobs "
            f"({stable.name}-*)."
        ), None

    def summary(self) -> PlanSummary:
        covered = sum(1 for c in self.combinations if c.status == "covered")
        # Non-abi3 wheels would need one job per (variant, platform, CPython) for the same coverage.
        per_python = len({(c.torch, c.accel, c.platform, c.python) for c in self.combinations if c.status == "covered"})
        return {
            "combinations": len(self.combinations),
            "covered": covered,
            "unavailable": len(self.combinations) - covered,
            "jobs": len(self.jobs),
            "per_python_jobs": per_python,
            "jobs_saved_ratio": round(per_python / len(self.jobs), 2) if self.jobs else None,
            "abi3": ABI3_STATEMENT,
        }

    def to_dict(self) -> PlanDoc:
        """The JSON document of ``plan --format json`` (schema in docs/build_matrix.md)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "generator": "python -m build_matrix plan",
            "data": {"path": self.data.path, "updated": self.data.meta.get("updated", "")},
            "filters": self.filters,
            "abi3": ABI3_STATEMENT,
            "summary": self.summary(),
            "jobs": [j.to_dict() for j in self.jobs],
            "combinations": [c.to_dict() for c in self.combinations],
        }


def _as_list(value: Filter) -> Optional[list[str]]:
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    out: list[str] = []
    for item in items:
        out.extend(part.strip() for part in str(item).split(",") if part.strip())
    return out


def _select(kind: str, wanted: Filter, valid: list[str]) -> list[str]:
    items = _as_list(wanted)
    if items is None:
        return list(valid)
    for item in items:
        if item not in valid:
            raise UnknownValue(kind, item, valid)
    return [v for v in valid if v in items]


_RANGE_RE = re.compile(r"^(\d+\.\d+)?\s*(?:-|\.\.)\s*(\d+\.\d+)?$")


def _select_torch(wanted: Filter, minors: list[str]) -> list[str]:
    if isinstance(wanted, str) and wanted.strip()[:1] in "<>=!~":
        items: Optional[list[str]] = [wanted.replace(" ", "")]  # one PEP 440 specifier set
    else:
        items = _as_list(wanted)
    if items is None:
        return list(minors)
    chosen: set[str] = set()
    for item in items:
        if item in minors:
            chosen.add(item)
            continue
        if item[:1] in "<>=!~":
            try:
                spec = SpecifierSet(item)
            except InvalidSpecifier:
                raise UnknownValue(
                    "torch", item, minors, hint="Use 'X.Y', 'X.Y-X.Z' or a PEP 440 specifier such as '>=2.6,<2.10'."
                ) from None
            picked = [m for m in minors if Version(m) in spec]
        else:
            m = _RANGE_RE.match(item)
            if not m or not (m.group(1) or m.group(2)):
                raise UnknownValue("torch", item, minors, hint="Use 'X.Y', 'X.Y-X.Z', 'X.Y-' or '>=X.Y,<X.Z'.")
            for end in (m.group(1), m.group(2)):
                if end and end not in minors:
                    raise UnknownValue("torch", end, minors)
            low = compat.minor_key(m.group(1)) if m.group(1) else (0, 0)
            high = compat.minor_key(m.group(2)) if m.group(2) else (999, 999)
            picked = [v for v in minors if low <= compat.minor_key(v) <= high]
        if not picked:
            raise UnknownValue("torch", item, minors, hint="It selects no torch release.")
        chosen.update(picked)
    return [m for m in minors if m in chosen]


def _index_base(data: compat.CompatData, override: Optional[str]) -> str:
    base = override or os.environ.get(compat.INDEX_ENV) or data.torch_index_base
    return base.rstrip("/")


def _environment(data: compat.CompatData, job: Job) -> dict[str, str]:
    """The complete cibuildwheel configuration of one job (every CIBW_* it depends on), from the job's
    other fields."""
    b = data.build
    platform = data.platforms[job.platform]
    cuda = job.cuda
    linux = platform.os == "linux"
    ident = f"{python_tag(job.python)}-{'manylinux_' + platform.arch if linux else 'win_amd64'}"
    deps = " ".join(f'"{r}"' for r in b.build_requires)
    torch_req = f'"torch=={job.torch_version}"'
    env: dict[str, str] = {
        "CIBW_PLATFORM": platform.os,
        "CIBW_BUILD": ident,
        "CIBW_ARCHS": platform.cibw_arch,
        "CIBW_BUILD_VERBOSITY": "1",
        "CIBW_BUILD_FRONTEND": "build; args: --no-isolation",
        "CIBW_BEFORE_ALL": (f"bash scripts/install-cuda-manylinux.sh {cuda}" if (linux and cuda) else ""),
        "CIBW_BEFORE_BUILD": (
            f"python -m pip install {torch_req} --index-url {job.torch_index_url} && python -m pip install {deps}"
        ),
        "CIBW_BEFORE_TEST": f"python -m pip install {torch_req} --index-url {job.torch_index_url}",
    }
    if linux:
        env[f"CIBW_MANYLINUX_{platform.arch.upper()}_IMAGE"] = job.manylinux or ""
    cenv = {"TORCH_CUDA_ARCH_LIST": job.cuda_archs} if cuda else {}
    cenv.update(
        {
            contract.ENV_LOCAL_VERSION: contract.local_version(job.variant),
            # Explicit both ways: the job, not the torch it happens to install, decides the op layer.
            contract.ENV_STABLE_ABI: "TRUE" if job.stable_abi else "FALSE",
            contract.ENV_FORCE_BUILD: "TRUE",
            "MAX_JOBS": str(b.max_jobs_cuda if cuda else b.max_jobs_cpu),
            "NVCC_THREADS": str(b.nvcc_threads),
        }
    )
    if cuda is None:
        cenv[contract.ENV_SKIP_CUDA_BUILD] = "TRUE"
    elif linux:
        cenv["CUDA_HOME"] = f"/usr/local/cuda-{cuda}"
        cenv["PATH"] = f"/usr/local/cuda-{cuda}/bin:$PATH"
    env["CIBW_ENVIRONMENT"] = " ".join(f'{k}="{v}"' for k, v in cenv.items())
    # Repair with build_matrix.repair's exclude lists, then run `check` on the repaired wheel.
    # Linux runs the command in bash ({dest_dir} is a fresh folder per wheel, so the glob is that
    # wheel); Windows runs it in cmd (no globbing), so the wheel is named: delvewheel keeps names.
    check_tools = "python -m pip install abi3audit check-wheel-contents pyelftools"
    if linux:
        check = f"{check_tools} && python -m build_matrix check --job {job.id} {{dest_dir}}/*.whl"
        env["CIBW_REPAIR_WHEEL_COMMAND"] = f"{repair.auditwheel_command()} && {check}"
    else:
        check = f"{check_tools} && python -m build_matrix check --job {job.id} {{dest_dir}}\\{job.wheel_filename}"
        env["CIBW_REPAIR_WHEEL_COMMAND"] = (
            f"python -m pip install delvewheel && {repair.delvewheel_command()} && {check}"
        )
    env["CIBW_TEST_COMMAND"] = (
        'python -c "import torch, causal_conv1d; from causal_conv1d import causal_conv1d_fn; '
        "x = torch.randn(2, 8, 16); w = torch.randn(8, 4); "
        'print(causal_conv1d.__version__, causal_conv1d_fn(x, w, activation=None).shape)"'
    )
    return env


@dataclasses.dataclass(frozen=True)
class StableBuild:
    """How one stable-ABI wheel (family x platform) is built and what it serves."""

    variant: contract.StableVariant
    platform: str
    build_minor: str  # the torch minor compiled against, "2.14"
    build_accel: str  # its accelerator, "cu132" | "cpu"
    cuda: Optional[str]  # the toolkit, "13.2" (None for cpu)
    archs: str  # TORCH_CUDA_ARCH_LIST ("" for cpu)
    serves: tuple[str, ...]  # variant names served, "torch2.10-cu130", ...


def _merge_archs(lists: Sequence[str], cuda: str, platform: str) -> str:
    """The union of arch lists, ascending, ``+PTX`` on the highest only; validated for ``cuda``."""
    found: dict[str, tuple[int, int]] = {}
    for value in lists:
        for item in value.split(";"):
            name = item.replace("+PTX", "")
            found[name] = compat.minor_key(name.rstrip("af"))
    ordered = sorted(found, key=lambda n: (found[n], n))
    merged = ";".join(ordered) + "+PTX"
    compat.validate_archs(merged, cuda, key=f"stable {platform} archs for CUDA {cuda}", path="<merged arch lists>")
    return merged


def stable_builds(data: compat.CompatData) -> dict[tuple[str, str], StableBuild]:
    """``(family, platform) -> StableBuild`` for every family x platform some torch >= the stable
    target ships on. Independent of plan filters: a job's build never depends on what was selected."""
    target = contract.STABLE_TARGET
    served: dict[tuple[str, str], list[tuple[compat.TorchRelease, str]]] = {}
    for rel in data.torch.values():
        if rel.key < target:
            continue
        for accel, plats in rel.builds.items():
            for plat in plats:
                served.setdefault((contract.accel_family(accel), plat), []).append((rel, accel))
    out: dict[tuple[str, str], StableBuild] = {}
    for (family, plat), pairs in served.items():
        cudas = sorted({c for _, a in pairs if (c := contract.cuda_from_accel(a)) is not None}, key=compat.minor_key)
        cuda = cudas[-1] if cudas else None
        build_accel = contract.accel_from_cuda(cuda)
        # The newest torch minor that ships the chosen toolkit on this platform; a low-confidence
        # (inferred) minor only when no better-known one has it: the job must be able to install it.
        candidates = sorted((rel for rel, a in pairs if a == build_accel), key=lambda r: (r.confidence != "low", r.key))
        rel = candidates[-1]
        arch = data.platforms[plat].arch
        archs = _merge_archs([data.cuda[c].archs_for(arch) for c in cudas], cuda, plat) if cuda else ""
        ordered = sorted(pairs, key=lambda p: (p[0].key, compat.minor_key(contract.cuda_from_accel(p[1]) or "0.0")))
        names = tuple(contract.Variant(r.key, a).name for r, a in ordered)
        out[(family, plat)] = StableBuild(
            contract.StableVariant(family), plat, rel.minor, build_accel, cuda, archs, names
        )
    return out


def _classify(
    data: compat.CompatData,
    rel: compat.TorchRelease,
    accel: str,
    python: str,
    abi: str,
    platform: str,
    min_python: SpecifierSet,
) -> Optional[str]:
    """Why the combination is unavailable, or None when a job of ours serves it."""
    cuda = contract.cuda_from_accel(accel)
    label = f"torch {rel.minor}"
    if accel not in rel.builds:
        have = ", ".join(rel.builds)
        return f"{label} has no {accel} build (it has {have})"
    if not rel.has_build(accel, platform):
        return f"{label} has no {accel} build for {platform} (only {', '.join(rel.builds[accel])})"
    if python not in rel.pythons_for(accel, platform):
        return f"{label} {accel} does not ship for CPython {python} on {platform}"
    if python.endswith("t"):
        return f"free-threaded CPython {python} cannot load abi3 wheels; build from source"
    if Version(python) not in min_python:
        return f"causal-conv1d needs CPython {min_python}"
    if platform.startswith("linux"):
        official = contract.official_cxx11_abi(rel.key, accel)
        if (abi == "cxx11") != official:
            variant = contract.Variant(rel.key, accel, abi == "cxx11")
            return (
                f"PyTorch's {label} {accel} build uses the {'cxx11' if official else 'pre-cxx11'} ABI; "
                f"a {abi} torch builds locally as variant {variant.name}"
            )
    if cuda is not None and cuda not in data.cuda:  # parse() guarantees it; kept for direct callers
        return f"no arch list for CUDA {cuda}"
    return None


def _served_by(job: Job) -> str:
    """The reason text of a combination that ``job`` covers: its wheel (and, for a stable-ABI job, what
    else that wheel serves)."""
    how = ""
    if job.stable_abi:
        accel = "CPU" if job.family == "cpu" else "CUDA " + job.family[2:]
        how = f" (stable ABI: every torch >= {job.variant.torch} with {accel})"
    return f"served by {job.wheel_filename}{how}"


def _requires_torch(variant: contract.BuildVariant) -> str:
    """The wheel's torch pin: ``torch>=2.10`` for a stable-ABI job, ``torch>=X.Y,<X.(Y+1)`` otherwise."""
    if isinstance(variant, contract.StableVariant):
        return contract.torch_requirement(variant.target, stable=True)
    return contract.torch_requirement(variant.torch_minor)


def _target(variant: contract.BuildVariant) -> tuple[int, int]:
    """The lowest torch a job's wheel serves: a stable job's target, a per-minor job's torch."""
    return variant.target if isinstance(variant, contract.StableVariant) else variant.torch_minor


def _job(
    data: compat.CompatData,
    *,
    variant: contract.BuildVariant,
    build_variant: contract.Variant,
    rel: compat.TorchRelease,
    plat_name: str,
    base: str,
    archs: str,
    serves_pythons: tuple[str, ...],
    stable: bool,
    serves: tuple[str, ...],
) -> Job:
    plat = data.platforms[plat_name]
    accel = build_variant.accel
    cuda = contract.cuda_from_accel(accel)
    job_id = f"{variant.name}-{plat_name}"
    cxx11 = build_variant.abi
    manylinux = data.abi_policy(cxx11).manylinux if plat.os == "linux" else None
    index_url = f"{base}/{accel}"
    wplat = wheel_platform_tag(plat_name, manylinux)
    wheel_filename = contract.wheel_filename(contract.PACKAGE_VERSION, variant, wplat)
    job = Job(
        id=job_id,
        variant=variant,
        platform=plat_name,
        os=plat.os,
        arch=plat.arch,
        runs_on=plat.runs_on,
        torch_version=rel.latest,
        torch_index_url=index_url,
        cuda=cuda,
        cuda_archs=archs,
        cxx11_abi=cxx11,
        manylinux=manylinux,
        wheel_platform=wplat,
        wheel_filename=wheel_filename,
        python=serves_pythons[0],
        cpp_std=rel.cpp_std,
        covers_pythons=serves_pythons,
        environment={},
        stable_abi=stable,
        build_variant=build_variant,
        serves=serves,
    )
    return dataclasses.replace(job, environment=_environment(data, job))


def _abi3_pythons(rel: compat.TorchRelease, accel: str, plat_name: str, min_python: SpecifierSet) -> tuple[str, ...]:
    return tuple(p for p in rel.pythons_for(accel, plat_name) if not p.endswith("t") and Version(p) in min_python)


def _stable_jobs(data: compat.CompatData, base: str, min_python: SpecifierSet) -> dict[tuple[str, str], Job]:
    jobs: dict[tuple[str, str], Job] = {}
    for (family, plat_name), sb in stable_builds(data).items():
        rel = data.torch[sb.build_minor]
        build_pythons = _abi3_pythons(rel, sb.build_accel, plat_name, min_python)
        if not build_pythons:
            continue
        covered: set[str] = set()
        for name in sb.serves:
            v = contract.Variant.parse(name)
            covered.update(_abi3_pythons(data.torch[f"{v.torch}"], v.accel, plat_name, min_python))
        # Build with the lowest CPython the build torch ships; serve every CPython a served torch ships.
        pythons = (build_pythons[0],) + tuple(sorted(covered - {build_pythons[0]}, key=compat.python_key))
        jobs[(family, plat_name)] = _job(
            data,
            variant=sb.variant,
            build_variant=contract.Variant(rel.key, sb.build_accel),
            rel=rel,
            plat_name=plat_name,
            base=base,
            archs=sb.archs,
            serves_pythons=pythons,
            stable=True,
            serves=sb.serves,
        )
    return jobs


def make_plan(
    data: Optional[compat.CompatData] = None,
    *,
    torch: Filter = None,
    accels: Filter = None,
    platforms: Filter = None,
    pythons: Filter = None,
    torch_index_base: Optional[str] = None,
    stable_abi: bool = True,
) -> Plan:
    """Enumerate combinations and jobs (see module docstring). ``data`` defaults to ``compat.load()``.

    ``stable_abi=False``: every torch minor gets per-minor jobs (the matrix before the stable ABI)."""
    if data is None:
        data = compat.load()
    minors = _select_torch(torch, data.minors())
    accel_list = _select("accel", accels, data.accels())
    platform_list = _select("platform", platforms, list(data.platforms))
    python_list = _select("python", pythons, data.pythons())
    base = _index_base(data, torch_index_base)
    min_python = SpecifierSet(contract.REQUIRES_PYTHON)
    stable_jobs = _stable_jobs(data, base, min_python) if stable_abi else {}

    legacy: dict[str, Job] = {}
    stable_used: dict[str, Job] = {}
    combinations: list[Combination] = []
    for minor in minors:
        rel = data.torch[minor]
        for accel in accel_list:
            variant = contract.Variant(rel.key, accel)
            stable = stable_abi and rel.key >= contract.STABLE_TARGET
            for plat_name in platform_list:
                job: Optional[Job] = None
                if stable:
                    family = contract.accel_family(accel)
                    job = stable_jobs.get((family, plat_name)) if family in contract.ACCEL_FAMILIES else None
                    if job is not None and variant.name not in job.serves:
                        job = None
                elif rel.has_build(accel, plat_name):
                    serves = _abi3_pythons(rel, accel, plat_name, min_python)
                    if serves:
                        cuda = contract.cuda_from_accel(accel)
                        archs = data.cuda[cuda].archs_for(data.platforms[plat_name].arch) if cuda else ""
                        job = _job(
                            data,
                            variant=variant,
                            build_variant=variant,
                            rel=rel,
                            plat_name=plat_name,
                            base=base,
                            archs=archs,
                            serves_pythons=serves,
                            stable=False,
                            serves=(variant.name,),
                        )
                abis = ("cxx11", "pre-cxx11") if data.platforms[plat_name].os == "linux" else ("msvc",)
                for python in python_list:
                    for abi in abis:
                        reason = _classify(data, rel, accel, python, abi, plat_name, min_python)
                        combo = (minor, accel, python, abi, plat_name)
                        if reason is None and job is not None:
                            (stable_used if job.stable_abi else legacy)[job.id] = job
                            combinations.append(Combination(*combo, "covered", job.id, _served_by(job)))
                        else:
                            reason = reason or "no CPython this job could build with"
                            combinations.append(Combination(*combo, "unavailable", None, reason))
    filters: PlanFilters = {
        "torch": minors if torch is not None else None,
        "accels": accel_list if accels is not None else None,
        "platforms": platform_list if platforms is not None else None,
        "pythons": python_list if pythons is not None else None,
    }
    # Per-minor jobs by (torch minor, accel, platform), then the stable jobs by (target, family, platform).
    order = {"cpu": 0, "cu12": 1, "cu13": 2}
    stable_sorted = sorted(
        stable_used.values(),
        key=lambda j: (_target(j.variant), order.get(j.family, 9), j.family, list(data.platforms).index(j.platform)),
    )
    return Plan(data=data, filters=filters, combinations=combinations, jobs=list(legacy.values()) + stable_sorted)


def resolve_job(data: compat.CompatData, job_id: str, *, torch_index_base: Optional[str] = None) -> Job:
    """The job ``build`` and ``check`` act on: a job of the plan, or (asked for by id) the per-minor job
    of a torch >= 2.10 that the release plan serves with a stable-ABI wheel instead, e.g.
    ``torch2.13-cpu-linux-x86_64`` for a legacy build to compare with. Unknown ids raise UnknownJob."""
    plan = make_plan(data, torch_index_base=torch_index_base)
    try:
        return plan.job(job_id)
    except UnknownJob:
        per_minor = make_plan(data, torch_index_base=torch_index_base, stable_abi=False)
        for job in per_minor.jobs:
            if job.id == job_id:
                return job
        raise
