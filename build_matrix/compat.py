"""Load and validate the compatibility data (``build_matrix/data/compat.toml``).

The data says, per torch minor: the latest patch, the C++ standard its headers need, the CPython
versions it ships for, which accelerator builds exist on which platform, and where each fact
comes from. Per CUDA version: the arch list we compile for. Per C++ ABI: the manylinux policy.

Every malformed value raises :class:`build_matrix.errors.DataError` naming the file, the key
(``torch."2.7".builds.cu128[1]``) and the value. ``build_matrix.compat_write.dumps``
writes the same format back (``refresh`` uses it), so a load/dump round trip is stable.

Which file: ``load(path)``; else ``$BUILD_MATRIX_DATA``; else the packaged ``data/compat.toml``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Optional

from build_matrix.errors import DataError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.9/3.10
    import tomli as tomllib
import causal_conv1d_contract as contract

__all__ = [
    "DATA_ENV",
    "INDEX_ENV",
    "DEFAULT_DATA_PATH",
    "SCHEMA",
    "PLATFORMS",
    "CONFIDENCE",
    "Platform",
    "AbiPolicy",
    "CudaInfo",
    "BuildSettings",
    "TorchRelease",
    "CompatData",
    "default_path",
    "load",
    "parse",
    "toml_key",
    "validate_archs",
    "python_key",
    "minor_key",
]

DATA_ENV = "BUILD_MATRIX_DATA"  #: path of the compatibility data file to use instead of the packaged one
INDEX_ENV = "BUILD_MATRIX_TORCH_INDEX"  #: base URL of PyTorch's wheel index (overrides the data file)
DEFAULT_DATA_PATH = Path(__file__).resolve().parent / "data" / "compat.toml"
SCHEMA = 1
PLATFORMS = ("linux-x86_64", "linux-aarch64", "windows-amd64")
CONFIDENCE = ("high", "medium", "low")

_MINOR_RE = re.compile(r"^(\d+)\.(\d+)$")
_PYTHON_RE = re.compile(r"^3\.(\d+)(t?)$")
_PATCH_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
_ARCH_RE = re.compile(r"^(\d+)\.(\d+)(a|f)?(\+PTX)?$")
_CUDA_RE = re.compile(r"^(\d+)\.(\d+)$")


def minor_key(minor: str) -> tuple[int, int]:
    """``"2.10"`` -> ``(2, 10)`` (sorts numerically, unlike the string)."""
    m = _MINOR_RE.match(minor)
    if not m:
        raise ValueError(f"Invalid torch minor (expected 'X.Y'): {minor!r}")
    return int(m.group(1)), int(m.group(2))


def python_key(python: str) -> tuple[int, int, int]:
    """``"3.13t"`` -> ``(3, 13, 1)``: numeric order, the free-threaded build after the default one."""
    m = _PYTHON_RE.match(python)
    if not m:
        raise ValueError(f"Invalid Python version (expected '3.Y' or '3.Yt'): {python!r}")
    return 3, int(m.group(1)), 1 if m.group(2) else 0


def _cuda_key(cuda: str) -> tuple[int, int]:
    m = _CUDA_RE.match(cuda)
    if not m:
        raise ValueError(cuda)
    return int(m.group(1)), int(m.group(2))


def _arch_key(arch: str) -> tuple[int, int]:
    m = _ARCH_RE.match(arch)
    assert m, arch
    return int(m.group(1)), int(m.group(2))


@dataclasses.dataclass(frozen=True)
class Platform:
    """A build platform: ``linux-x86_64``, ``linux-aarch64`` or ``windows-amd64``."""

    name: str
    os: str  # "linux" | "windows"
    arch: str  # "x86_64" | "aarch64" | "amd64"
    cibw_arch: str  # what CIBW_ARCHS takes: "x86_64" | "aarch64" | "AMD64"
    runs_on: str  # GitHub Actions runner label


@dataclasses.dataclass(frozen=True)
class AbiPolicy:
    """The manylinux policy of torch's Linux wheels of one C++ ABI."""

    name: str  # "cxx11" | "pre-cxx11"
    manylinux: str  # cibuildwheel image name: "manylinux_2_28" | "manylinux2014"
    glibc: str
    source: str


@dataclasses.dataclass(frozen=True)
class CudaInfo:
    """What we compile for with one CUDA major.minor."""

    version: str
    archs: str  # TORCH_CUDA_ARCH_LIST for linux-x86_64 and windows-amd64
    archs_aarch64: str  # TORCH_CUDA_ARCH_LIST for linux-aarch64 (SBSA)
    source: str
    confidence: str
    note: str

    def archs_for(self, arch: str) -> str:
        return self.archs_aarch64 if arch == "aarch64" else self.archs


@dataclasses.dataclass(frozen=True)
class BuildSettings:
    """Build-job settings that are ours, not PyTorch's."""

    max_jobs_cpu: int
    max_jobs_cuda: int
    nvcc_threads: int
    build_requires: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class TorchRelease:
    """One torch minor release line."""

    minor: str  # "2.7"
    latest: str  # "2.7.1": the patch release a job installs
    cpp_std: str  # "17" | "20"
    pythons: tuple[str, ...]  # default CPython set of every build
    builds: Mapping[str, tuple[str, ...]]  # accel -> platforms it exists on
    python_overrides: Mapping[str, tuple[str, ...]]  # "accel/platform" or "*/platform" -> pythons
    source: str
    availability_source: str
    confidence: str
    note: str

    @property
    def key(self) -> tuple[int, int]:
        return minor_key(self.minor)

    def has_build(self, accel: str, platform: str) -> bool:
        return platform in self.builds.get(accel, ())

    def pythons_for(self, accel: str, platform: str) -> tuple[str, ...]:
        """The CPythons torch ships for on one (accel, platform) build; () if there is no build."""
        if not self.has_build(accel, platform):
            return ()
        for key in (f"{accel}/{platform}", f"*/{platform}", f"{accel}/*"):
            if key in self.python_overrides:
                return self.python_overrides[key]
        return self.pythons

    def all_pythons(self) -> tuple[str, ...]:
        found = set(self.pythons)
        for values in self.python_overrides.values():
            found.update(values)
        return tuple(sorted(found, key=python_key))


@dataclasses.dataclass(frozen=True)
class CompatData:
    """The whole compatibility table (see module docstring)."""

    path: str
    meta: Mapping[str, str]
    torch_index_base: str
    build: BuildSettings
    platforms: Mapping[str, Platform]
    abi: Mapping[str, AbiPolicy]
    cuda: Mapping[str, CudaInfo]
    torch: Mapping[str, TorchRelease]  # ordered by minor

    def minors(self) -> list[str]:
        return list(self.torch)

    def accels(self) -> list[str]:
        """Every accelerator seen in any release: cpu first, then CUDA versions ascending."""
        found = {a for rel in self.torch.values() for a in rel.builds}
        return sorted(found, key=lambda a: (a != "cpu", _cuda_key(contract.cuda_from_accel(a) or "0.0")))

    def pythons(self) -> list[str]:
        found = {p for rel in self.torch.values() for p in rel.all_pythons()}
        return sorted(found, key=python_key)

    def abi_policy(self, cxx11: bool) -> AbiPolicy:
        return self.abi["cxx11" if cxx11 else "pre-cxx11"]


def default_path() -> Path:
    """``$BUILD_MATRIX_DATA`` when set, else the packaged data file."""
    env = os.environ.get(DATA_ENV)
    return Path(env) if env else DEFAULT_DATA_PATH


def load(path: Optional[os.PathLike[str] | str] = None) -> CompatData:
    """Read and validate the data file (see :func:`default_path`)."""
    p = Path(path) if path is not None else default_path()
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(p, "", str(p), "file not found; pass --data FILE or unset $" + DATA_ENV) from None
    except OSError as exc:
        raise DataError(p, "", str(p), f"cannot read: {exc.strerror}") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        lineno = getattr(exc, "lineno", 0)  # Python >= 3.14 (tomllib); tomli has it too
        raise DataError(p, "", text.splitlines()[lineno - 1] if lineno else "", f"not valid TOML: {exc}") from None
    return parse(raw, p)


class _V:
    """Validation helpers bound to one file, producing DataErrors with the key path."""

    def __init__(self, path: object) -> None:
        self.path = path

    def fail(self, key: str, value: object, reason: str) -> DataError:
        return DataError(self.path, key, value, reason)

    def table(self, raw: Mapping[str, Any], key: str, name: str, *, required: bool = True) -> Mapping[str, Any]:
        full = f"{key}.{name}" if key else name
        if name not in raw:
            if required:
                raise self.fail(full, None, "missing table")
            return {}
        value = raw[name]
        if not isinstance(value, dict):
            raise self.fail(full, value, "expected a table")
        return value

    def entries(
        self, section: str, raw: Mapping[str, Any], valid: Any, expected: str
    ) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
        """(name, key, table) of each entry of a section: a name ``valid`` refuses or a value that
        is not a table fails (naming ``expected``)."""
        for name, value in raw.items():
            key = f"{section}.{toml_key(name)}"
            if not valid(name):
                raise self.fail(key, name, expected)
            if not isinstance(value, dict):
                raise self.fail(key, value, "expected a table")
            yield name, key, value

    def string(
        self,
        raw: Mapping[str, Any],
        key: str,
        name: str,
        *,
        default: Optional[str] = None,
        pattern: Optional[re.Pattern[str]] = None,
        choices: Optional[tuple[str, ...]] = None,
    ) -> str:
        full = f"{key}.{name}" if key else name
        if name not in raw:
            if default is None:
                raise self.fail(full, None, "missing value")
            return default
        value = raw[name]
        if not isinstance(value, str):
            raise self.fail(full, value, "expected a string")
        if pattern is not None and not pattern.match(value):
            raise self.fail(full, value, f"does not match {pattern.pattern}")
        if choices is not None and value not in choices:
            raise self.fail(full, value, f"expected one of {', '.join(choices)}")
        return value

    def integer(self, raw: Mapping[str, Any], key: str, name: str, *, minimum: int = 1) -> int:
        full = f"{key}.{name}"
        value = raw.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise self.fail(full, value, f"expected an integer >= {minimum}")
        return value

    def strings(self, raw: Mapping[str, Any], key: str, name: str, *, allow_empty: bool = False) -> tuple[str, ...]:
        full = f"{key}.{name}"
        value = raw.get(name)
        if not isinstance(value, list):
            raise self.fail(full, value, "expected a list of strings")
        for i, item in enumerate(value):
            if not isinstance(item, str) or not item:
                raise self.fail(f"{full}[{i}]", item, "expected a non-empty string")
        if len(set(value)) != len(value):
            dup = next(v for v in value if value.count(v) > 1)
            raise self.fail(full, dup, "duplicate entry")
        if not value and not allow_empty:
            raise self.fail(full, value, "empty list")
        return tuple(value)


def toml_key(name: str) -> str:
    """A TOML key as written: bare when it can be, else quoted."""
    return name if re.match(r"^[A-Za-z0-9_-]+$", name) else json.dumps(name)


def _validate_archs(v: _V, key: str, value: str, cuda: tuple[int, int]) -> None:
    if not value:
        raise v.fail(key, value, "empty arch list")
    seen: list[tuple[int, int]] = []
    for item in value.split(";"):
        m = _ARCH_RE.match(item)
        if not m:
            raise v.fail(key, value, f"bad arch {item!r} (expected 'X.Y', 'X.Ya' or 'X.Y+PTX')")
        arch = _arch_key(item)
        if arch in seen:
            raise v.fail(key, value, f"arch {item!r} listed twice")
        if seen and arch < seen[-1]:
            raise v.fail(key, value, "archs must be in ascending order")
        seen.append(arch)
        if cuda >= (13, 0) and arch < (7, 5):
            raise v.fail(
                key,
                value,
                f"CUDA {cuda[0]}.{cuda[1]} cannot compile for sm_{arch[0]}{arch[1]} (CUDA 13 dropped sm < 7.5)",
            )
        if cuda < (12, 8) and arch[0] >= 10:
            raise v.fail(key, value, f"sm_{arch[0]}{arch[1]} needs CUDA >= 12.8")
        if arch == (11, 0) and cuda < (13, 0):
            raise v.fail(key, value, "sm_110 needs CUDA >= 13.0 (it was sm_101 before)")
        if arch < (3, 5):
            raise v.fail(key, value, f"sm_{arch[0]}{arch[1]} is older than any CUDA 11+ supports")
    if "+PTX" in value and not value.endswith("+PTX"):
        raise v.fail(key, value, "+PTX belongs on the last (highest) arch only")


def validate_archs(value: str, cuda: str, *, key: str = "archs", path: object = "<arch list>") -> None:
    """Apply the data file's arch-list rules to ``value`` compiled with CUDA ``cuda`` ("13.2");
    raises DataError naming ``key`` (used for the merged lists of stable-ABI jobs)."""
    _validate_archs(_V(path), key, value, _cuda_key(cuda))


def parse(raw: Mapping[str, Any], path: object = "<data>") -> CompatData:
    """Validate a decoded data document; raises DataError naming file, key and value."""
    v = _V(path)
    schema = raw.get("schema")
    if schema != SCHEMA:
        raise v.fail("schema", schema, f"expected schema = {SCHEMA}")
    known_top = {"schema", "meta", "defaults", "build", "platforms", "abi", "cuda", "torch"}
    for name in raw:
        if name not in known_top:
            raise v.fail(name, raw[name], f"unknown top-level key (expected one of {', '.join(sorted(known_top))})")

    meta_raw = v.table(raw, "", "meta", required=False)
    meta = {str(k): str(val) for k, val in meta_raw.items()}
    defaults = v.table(raw, "", "defaults")
    index_base = v.string(defaults, "defaults", "torch_index_base", pattern=re.compile(r"^(https?|file)://\S+$"))

    b = v.table(raw, "", "build")
    build = BuildSettings(
        max_jobs_cpu=v.integer(b, "build", "max_jobs_cpu"),
        max_jobs_cuda=v.integer(b, "build", "max_jobs_cuda"),
        nvcc_threads=v.integer(b, "build", "nvcc_threads"),
        build_requires=v.strings(b, "build", "build_requires"),
    )

    plats_raw = v.table(raw, "", "platforms")
    platforms: dict[str, Platform] = {}
    for name in PLATFORMS:
        if name not in plats_raw:
            raise v.fail(f"platforms.{name}", None, "missing platform table")
    for name, key, p in v.entries(
        "platforms", plats_raw, PLATFORMS.__contains__, f"unknown platform (expected one of {', '.join(PLATFORMS)})"
    ):
        platforms[name] = Platform(
            name=name,
            os=v.string(p, key, "os", choices=("linux", "windows")),
            arch=v.string(p, key, "arch", choices=("x86_64", "aarch64", "amd64")),
            cibw_arch=v.string(p, key, "cibw_arch", choices=("x86_64", "aarch64", "AMD64")),
            runs_on=v.string(p, key, "runs_on"),
        )
        if not name.startswith(platforms[name].os + "-") or not name.endswith(platforms[name].arch):
            raise v.fail(
                key, name, f"os/arch ({platforms[name].os}/{platforms[name].arch}) do not match the platform name"
            )

    abi_raw = v.table(raw, "", "abi")
    abi: dict[str, AbiPolicy] = {}
    for name in ("cxx11", "pre-cxx11"):
        key = f"abi.{name}"
        a = v.table(abi_raw, "abi", name)
        abi[name] = AbiPolicy(
            name=name,
            manylinux=v.string(a, key, "manylinux", choices=("manylinux2014", "manylinux_2_28", "manylinux_2_34")),
            glibc=v.string(a, key, "glibc", pattern=re.compile(r"^2\.\d+$")),
            source=v.string(a, key, "source"),
        )

    cuda_raw = v.table(raw, "", "cuda")
    cuda: dict[str, CudaInfo] = {}
    for version, key, c in v.entries("cuda", cuda_raw, _CUDA_RE.match, "expected a CUDA 'MAJOR.MINOR' key"):
        info = CudaInfo(
            version=version,
            archs=v.string(c, key, "archs"),
            archs_aarch64=v.string(c, key, "archs_aarch64"),
            source=v.string(c, key, "source"),
            confidence=v.string(c, key, "confidence", choices=CONFIDENCE),
            note=v.string(c, key, "note", default=""),
        )
        _validate_archs(v, f"{key}.archs", info.archs, _cuda_key(version))
        _validate_archs(v, f"{key}.archs_aarch64", info.archs_aarch64, _cuda_key(version))
        cuda[version] = info

    torch_raw = v.table(raw, "", "torch")
    if not torch_raw:
        raise v.fail("torch", {}, "no torch releases")
    releases: list[TorchRelease] = []
    for minor, key, t in v.entries("torch", torch_raw, _MINOR_RE.match, "expected a torch 'X.Y' key"):
        known = {
            "latest",
            "cpp_std",
            "pythons",
            "builds",
            "python_overrides",
            "source",
            "availability_source",
            "confidence",
            "note",
        }
        for name in t:
            if name not in known:
                raise v.fail(
                    f"{key}.{toml_key(name)}", t[name], f"unknown key (expected one of {', '.join(sorted(known))})"
                )
        latest = v.string(t, key, "latest", pattern=_PATCH_RE)
        if minor_key(".".join(latest.split(".")[:2])) != minor_key(minor):
            raise v.fail(f"{key}.latest", latest, f"not a {minor}.x release")
        pythons = v.strings(t, key, "pythons")
        for i, py in enumerate(pythons):
            if not _PYTHON_RE.match(py):
                raise v.fail(f"{key}.pythons[{i}]", py, "expected '3.Y' or '3.Yt'")
        builds_raw = v.table(t, key, "builds")
        if not builds_raw:
            raise v.fail(f"{key}.builds", {}, "no accelerator builds")
        builds: dict[str, tuple[str, ...]] = {}
        for accel, _plats in builds_raw.items():
            bkey = f"{key}.builds.{toml_key(accel)}"
            try:
                cuda_version = contract.cuda_from_accel(accel)
            except contract.InvalidVariant as exc:
                raise v.fail(bkey, accel, str(exc)) from None
            if cuda_version is not None and cuda_version not in cuda:
                raise v.fail(bkey, accel, f'no [cuda."{cuda_version}"] table with its arch list')
            plist = v.strings(builds_raw, f"{key}.builds", accel)
            for i, plat in enumerate(plist):
                if plat not in PLATFORMS:
                    raise v.fail(f"{bkey}[{i}]", plat, f"unknown platform (expected one of {', '.join(PLATFORMS)})")
            builds[accel] = tuple(sorted(plist, key=PLATFORMS.index))
        overrides_raw = v.table(t, key, "python_overrides", required=False)
        overrides: dict[str, tuple[str, ...]] = {}
        for okey, _pys in overrides_raw.items():
            full = f"{key}.python_overrides.{toml_key(okey)}"
            accel, _, plat = okey.partition("/")
            if plat not in PLATFORMS and plat != "*":
                raise v.fail(full, okey, "expected 'ACCEL/PLATFORM' with a known platform (or '*')")
            if accel != "*" and accel not in builds:
                raise v.fail(full, okey, f"no {accel} build in {key}.builds")
            if accel != "*" and plat != "*" and plat not in builds[accel]:
                raise v.fail(full, okey, f"{accel} has no {plat} build in {key}.builds")
            values = v.strings(overrides_raw, f"{key}.python_overrides", okey, allow_empty=True)
            for i, py in enumerate(values):
                if not _PYTHON_RE.match(py):
                    raise v.fail(f"{full}[{i}]", py, "expected '3.Y' or '3.Yt'")
            overrides[okey] = tuple(sorted(values, key=python_key))
        releases.append(
            TorchRelease(
                minor=minor,
                latest=latest,
                cpp_std=v.string(t, key, "cpp_std", choices=("17", "20")),
                pythons=tuple(sorted(pythons, key=python_key)),
                builds=builds,
                python_overrides=overrides,
                source=v.string(t, key, "source"),
                availability_source=v.string(t, key, "availability_source", default=""),
                confidence=v.string(t, key, "confidence", choices=CONFIDENCE),
                note=v.string(t, key, "note", default=""),
            )
        )
    releases.sort(key=lambda r: r.key)
    return CompatData(
        path=str(path),
        meta=meta,
        torch_index_base=index_base.rstrip("/"),
        build=build,
        platforms={name: platforms[name] for name in PLATFORMS},
        abi=abi,
        cuda=dict(sorted(cuda.items(), key=lambda kv: _cuda_key(kv[0]))),
        torch={r.minor: r for r in releases},
    )
