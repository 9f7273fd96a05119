"""The contracts every part of the project shares (see docs/ARCHITECTURE.md).

Variant names, wheel file names, the local version label, the torch pin, index layout,
environment variable names and the build-record schema are defined here once.

A top-level package of its own, shipped in the wheel and the sdist next to ``causal_conv1d``:
importing it runs no ``causal_conv1d/__init__.py`` (which imports torch and the compiled
extension), so setup.py and ``build_support`` (inside pip's isolated build environment, maybe
without torch), ``build_matrix``, ``index_site`` and the release rehearsal import it as they import
anything else, and so do the import guard and doctor. It must stay stdlib-only and importable on
Python 3.9: no torch, no compiled code, and no ``packaging`` at import (not a runtime requirement;
only :func:`parse_wheel_name` imports it).
"""

from __future__ import annotations

import dataclasses
import os
import re
import urllib.parse
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Optional, Union

if TYPE_CHECKING:  # packaging is a build-time tool, not a runtime requirement: imported lazily
    from packaging.version import Version

__all__ = [
    "PROJECT_NAME",
    "DIST_NAME",
    "TOPLEVEL_ENTRIES",
    "PACKAGE_VERSION",
    "PYTHON_TAG",
    "ABI_TAG",
    "REQUIRES_PYTHON",
    "DEFAULT_INDEX_URL",
    "ENV_FORCE_BUILD",
    "ENV_SKIP_CUDA_BUILD",
    "ENV_FORCE_CXX11_ABI",
    "ENV_INDEX_URL",
    "ENV_LOCAL_VERSION",
    "ENV_PREBUILT_ONLY",
    "ENV_INDEX_TIMEOUT",
    "ENV_STABLE_ABI",
    "ENV_DETERMINISTIC",
    "KERNEL_SWITCHES",
    "ENVIRONMENT",
    "DEV_ENVIRONMENT",
    "STABLE_ABI_MIN_TORCH",
    "STABLE_TARGET",
    "ACCEL_FAMILIES",
    "BUILD_INFO_FILENAME",
    "BUILD_INFO_KEYS",
    "InvalidVariant",
    "InvalidWheelName",
    "InvalidSetting",
    "env_flag",
    "Variant",
    "StableVariant",
    "BuildVariant",
    "accel_family",
    "stable_target_macro",
    "stable_variant_for",
    "build_variant_from_local_version",
    "parse_build_variant",
    "WheelName",
    "accel_from_cuda",
    "cuda_from_accel",
    "official_cxx11_abi",
    "torch_requirement",
    "local_version",
    "wheel_filename",
    "parse_wheel_name",
    "variant_from_local_version",
    "WHEELS_DIR",
    "site_base",
    "index_base",
    "variant_path",
    "project_path",
    "variant_index_url",
    "project_page_url",
    "uv_index_name",
    "quote_path",
]

PROJECT_NAME = "causal-conv1d"  #: the distribution name as pip sees it (PEP 503 normalised)
DIST_NAME = "causal_conv1d"  #: the name in wheel files and the import name
#: What a wheel installs at the top of site-packages: the package, these contracts (torch-free, so the
#: build and the tools import them without importing the package) and upstream's module name.
TOPLEVEL_ENTRIES = ("causal_conv1d", "causal_conv1d_contract", "causal_conv1d_cuda.py")
PACKAGE_VERSION = "1.7.0"  #: follows upstream causal-conv1d: drop-in for code that pins it
PYTHON_TAG = "cp39"  #: one abi3 wheel serves every CPython >= 3.9 (torch narrows it further)
ABI_TAG = "abi3"
REQUIRES_PYTHON = ">=3.9"

#: The project's published site. Stamped at release time; always overridable by ENV_INDEX_URL.
DEFAULT_INDEX_URL = "https://causal-conv1d.github.io/causal-conv1d/"

ENV_FORCE_BUILD = "CAUSAL_CONV1D_FORCE_BUILD"  #: TRUE: skip the index, compile locally
ENV_SKIP_CUDA_BUILD = "CAUSAL_CONV1D_SKIP_CUDA_BUILD"  #: TRUE: build no CUDA extension
ENV_FORCE_CXX11_ABI = "CAUSAL_CONV1D_FORCE_CXX11_ABI"  #: TRUE/FALSE: override the C++ ABI
ENV_INDEX_URL = "CAUSAL_CONV1D_INDEX_URL"  #: base URL (or file://) of the site
ENV_LOCAL_VERSION = "CAUSAL_CONV1D_LOCAL_VERSION"  #: local version label to stamp
ENV_PREBUILT_ONLY = "CAUSAL_CONV1D_PREBUILT_ONLY"  #: TRUE: use a prebuilt wheel or stop; never compile
ENV_INDEX_TIMEOUT = "CAUSAL_CONV1D_INDEX_TIMEOUT"  #: seconds per socket operation talking to the index
#: TRUE: build the op layer on the LibTorch stable ABI; FALSE: the legacy (per-torch-minor) op layer.
#: Unset: stable when the torch built against is >= STABLE_ABI_MIN_TORCH, legacy otherwise.
ENV_STABLE_ABI = "CAUSAL_CONV1D_STABLE_ABI"
#: Accepted for upstream compatibility and not read: both backends' backward is deterministic.
ENV_DETERMINISTIC = "CAUSAL_CONV1D_DETERMINISTIC"

#: The run-time switches of the kernel paths, read once per process by the compiled extension
#: (csrc/switch_on.h, the same rules as :func:`env_flag`); each is on when unset, FALSE turns it off.
KERNEL_SWITCHES = {
    "CAUSAL_CONV1D_FWD_FAST": "CUDA: the channel-first forward fast path (csrc/cuda/fwd_cf_fast.cu; kernel path fwd_cf_fast, csrc/kernel_paths.h)",
    "CAUSAL_CONV1D_BWD_FAST": "CUDA: the channel-first backward fast path (csrc/cuda/bwd_cf_fast.cu; kernel path bwd_cf_fast)",
    "CAUSAL_CONV1D_FWD_CL_FAST": "CUDA: the channel-last forward fast path (csrc/cuda/fwd_cl_fast.cu; kernel path fwd_cl_fast)",
    "CAUSAL_CONV1D_BWD_CL_FAST": "CUDA: the channel-last backward fast path (csrc/cuda/bwd_cl_fast.cu; kernel path bwd_cl_fast)",
    "CAUSAL_CONV1D_UPDATE_FAST": "CUDA: the decode (update) fast path (csrc/cuda/update_fast.cu; kernel path update_fast)",
    "CAUSAL_CONV1D_CPU_HUGE_PAGES": "CPU: the transparent-huge-page hint for large buffers (csrc/cpu/causal_conv1d_cpu.cpp)",
}

#: Every environment variable a user or a build may set, and what it does (README.md's table).
#: ``TORCH_CUDA_ARCH_LIST``, ``MAX_JOBS`` and ``NVCC_THREADS`` keep their usual meanings (not ours).
ENVIRONMENT = {
    ENV_FORCE_BUILD: "TRUE: the sdist skips the index and compiles locally",
    ENV_SKIP_CUDA_BUILD: "TRUE: compile the CPU kernels only (no prebuilt CUDA wheel is taken)",
    ENV_FORCE_CXX11_ABI: "TRUE/FALSE: the C++ ABI of a local build (and of the variant looked up)",
    ENV_INDEX_URL: "base URL (or file:// path) of the site; default DEFAULT_INDEX_URL",
    ENV_LOCAL_VERSION: "local version label a release build stamps (always compiles)",
    ENV_PREBUILT_ONLY: "TRUE: never compile; stop when no verified prebuilt wheel is available",
    ENV_INDEX_TIMEOUT: "seconds per socket operation talking to the index (default 15)",
    ENV_STABLE_ABI: "TRUE/FALSE: build the op layer on the LibTorch stable ABI / the legacy one",
    ENV_DETERMINISTIC: "accepted for upstream compatibility and not read (backward is deterministic)",
    **KERNEL_SWITCHES,
}

#: Variables only the tests, CI and the scripts read (scripts/run-tests.sh, scripts/local-release.sh).
DEV_ENVIRONMENT = {
    "CAUSAL_CONV1D_TEST_TORCH": "the torch requirement the tests install (default torch==2.13.0)",
    "CAUSAL_CONV1D_TEST_CPU_WHEEL": "a CPU wheel the tests use instead of building one",
    "CAUSAL_CONV1D_EXPECT_OP_LAYER": "stable|legacy: the op layer tests/causal_conv1d must find loaded",
    "CAUSAL_CONV1D_REQUIRE_LINTERS": "1: a missing workflow linter fails the tests (ci.yml)",
    "CAUSAL_CONV1D_RELEASE_VENV": "the tools venv of scripts/local-release.sh (default .venv-release)",
}

#: The first torch whose LibTorch stable ABI (torch/csrc/stable, torch/headeronly, the C shims) the
#: op layer can be built on; a stable build refuses an older torch at build time.
STABLE_ABI_MIN_TORCH = (2, 10)
#: The TORCH_TARGET_VERSION a stable build pins (-DTORCH_TARGET_VERSION=stable_target_macro()): it
#: uses no shim newer than this, so it loads on this torch and every later one.
STABLE_TARGET = (2, 10)
#: Accelerator families of stable wheels: one wheel per family and platform serves every torch
#: >= STABLE_TARGET of that family (CUDA minor versions of one major share a runtime ABI).
ACCEL_FAMILIES = ("cpu", "cu12", "cu13")

#: The build record inside every wheel, next to the package's __init__.py.
BUILD_INFO_FILENAME = "_build_info.json"
#: Keys of the build record, each always present (null where it does not apply).
BUILD_INFO_KEYS = (
    "version",  # full package version, local label included, e.g. "1.7.0+cu128.torch2.7"
    "variant",  # variant name, e.g. "torch2.7-cu128"
    "torch_version",  # torch.__version__ built against, e.g. "2.7.1+cu128"
    "cuda_version",  # torch.version.cuda built against, or null for a CPU build
    "cxx11_abi",  # bool: torch._C._GLIBCXX_USE_CXX11_ABI of the torch built against
    "cuda_archs",  # list of "X.Y" compute capabilities compiled for; [] for a CPU build
    "with_cuda",  # bool: whether the CUDA kernels were compiled in
    "platform",  # the platform tag the wheel was built for, e.g. "linux_x86_64"
    "source_commit",  # git commit of the source tree, or null
    "stable_abi_target",  # "2.10": built on the LibTorch stable ABI with that TORCH_TARGET_VERSION; null: legacy
    "cuda_major",  # int: the CUDA major of the toolkit built with (13 for "13.0"), or null for a CPU build
)

_VARIANT_RE = re.compile(
    r"^torch(?P<major>\d+)\.(?P<minor>\d+)-(?P<accel>cpu|cu\d{3,4})(?:-cxx11abi(?P<abi>[01]))?$"
)
_LOCAL_RE = re.compile(r"^(?P<accel>cpu|cu\d{3,4})\.torch(?P<major>\d+)\.(?P<minor>\d+)(?:\.cxx11abi(?P<abi>[01]))?$")
_STABLE_NAME_RE = re.compile(r"^stable(?P<major>\d+)\.(?P<minor>\d+)-(?P<family>cpu|cu\d{2})$")
_STABLE_LOCAL_RE = re.compile(r"^(?P<family>cpu|cu\d{2})\.stable(?P<major>\d+)\.(?P<minor>\d+)$")


class InvalidVariant(ValueError):
    """A variant name, accelerator or torch version that breaks the variant contract."""


class InvalidWheelName(ValueError):
    """A wheel file name that breaks the wheel contract."""


class InvalidSetting(ValueError):
    """An environment variable of this project set to a value it does not take."""


_ENV_TRUE = ("1", "TRUE", "ON", "YES")
_ENV_FALSE = ("0", "FALSE", "OFF", "NO")


def env_flag(name: str, environ: Optional[Mapping[str, str]] = None) -> Optional[bool]:
    """A TRUE/FALSE setting (case-insensitive; also 1/0, ON/OFF, YES/NO); unset or empty -> None."""
    raw = (os.environ if environ is None else environ).get(name, "").strip()
    if not raw:
        return None
    if raw.upper() in _ENV_TRUE:
        return True
    if raw.upper() in _ENV_FALSE:
        return False
    raise InvalidSetting(f"Invalid value for {name} (expected TRUE or FALSE): {raw!r}")


def accel_from_cuda(cuda_version: Optional[str]) -> str:
    """``"12.8"`` -> ``"cu128"``; ``None`` (a CPU torch) -> ``"cpu"``."""
    if cuda_version is None:
        return "cpu"
    m = re.match(r"^(\d+)\.(\d+)", str(cuda_version))
    if not m:
        raise InvalidVariant(f"Invalid CUDA version (expected 'MAJOR.MINOR'): {cuda_version!r}")
    return f"cu{int(m.group(1))}{int(m.group(2))}"


def cuda_from_accel(accel: str) -> Optional[str]:
    """``"cu128"`` -> ``"12.8"``; ``"cu130"`` -> ``"13.0"``; ``"cpu"`` -> ``None``."""
    if accel == "cpu":
        return None
    m = re.match(r"^cu(\d+)$", accel)
    if not m or len(m.group(1)) < 3:
        raise InvalidVariant(f"Invalid accelerator (expected 'cpu' or 'cuXYZ'): {accel!r}")
    digits = m.group(1)
    # CUDA majors 10..99 take two digits; the minor is always the last digit.
    return f"{int(digits[:-1])}.{int(digits[-1])}"


def official_cxx11_abi(torch_minor: tuple[int, int], accel: str) -> bool:
    """The C++ ABI (``_GLIBCXX_USE_CXX11_ABI``) of PyTorch's official Linux build of a variant.

    torch <= 2.5: pre-cxx11; 2.6: cu118/cu124 pre-cxx11, cu126 (and cpu) cxx11; >= 2.7: cxx11.
    """
    if torch_minor <= (2, 5):
        return False
    if torch_minor == (2, 6):
        return accel not in ("cu118", "cu124")
    return True


@dataclasses.dataclass(frozen=True, order=True)
class Variant:
    """The unit of binary compatibility: torch minor, accelerator and (when unofficial) C++ ABI.

    ``cxx11_abi`` is None when the ABI is the official one for that torch build; a variant with
    an explicit ABI that differs from the official one gets a ``-cxx11abi0/1`` suffix.
    """

    torch_minor: tuple[int, int]
    accel: str
    cxx11_abi: Optional[bool] = None

    def __post_init__(self) -> None:
        cuda_from_accel(self.accel)  # validates
        if self.cxx11_abi is not None and self.cxx11_abi == official_cxx11_abi(self.torch_minor, self.accel):
            object.__setattr__(self, "cxx11_abi", None)  # normalise: official ABI has no suffix

    @classmethod
    def from_torch(cls, torch_version: str, cuda_version: Optional[str], cxx11_abi: Optional[bool] = None) -> Variant:
        """The variant of a torch build, e.g. ``("2.7.1+cu128", "12.8", True)``."""
        m = re.match(r"^(\d+)\.(\d+)(?:\.\d+)*(?:(?:a|b|rc|\.dev|\.post)\d+)*(?:\+[A-Za-z0-9.]+)?$", torch_version.strip())
        if not m:
            raise InvalidVariant(f"Invalid torch version (expected 'X.Y.Z[+local]'): {torch_version!r}")
        return cls((int(m.group(1)), int(m.group(2))), accel_from_cuda(cuda_version), cxx11_abi)

    @classmethod
    def parse(cls, name: str) -> Variant:
        """Parse ``torch2.7-cu128`` / ``torch2.5-cpu-cxx11abi1``."""
        m = _VARIANT_RE.match(name)
        if not m:
            raise InvalidVariant(
                f"Invalid variant name (expected 'torchX.Y-cuXYZ' or 'torchX.Y-cpu'): {name!r}"
            )
        abi = None if m.group("abi") is None else m.group("abi") == "1"
        return cls((int(m.group("major")), int(m.group("minor"))), m.group("accel"), abi)

    @property
    def torch(self) -> str:
        return f"{self.torch_minor[0]}.{self.torch_minor[1]}"

    @property
    def cuda(self) -> Optional[str]:
        return cuda_from_accel(self.accel)

    @property
    def is_official(self) -> bool:
        """Whether this is the ABI of PyTorch's official build (only those get published wheels)."""
        return self.cxx11_abi is None

    @property
    def abi(self) -> bool:
        """The C++ ABI this variant's binaries use."""
        return official_cxx11_abi(self.torch_minor, self.accel) if self.cxx11_abi is None else self.cxx11_abi

    @property
    def name(self) -> str:
        suffix = "" if self.cxx11_abi is None else f"-cxx11abi{int(self.cxx11_abi)}"
        return f"torch{self.torch}-{self.accel}{suffix}"

    def __str__(self) -> str:
        return self.name


def torch_requirement(torch_minor: tuple[int, int], stable: bool = False) -> str:
    """The Requires-Dist pin of a wheel: ``torch>=2.7,<2.8``; a stable-ABI wheel: ``torch>=2.10``
    (no upper bound: it loads on torch releases that do not exist yet)."""
    major, minor = torch_minor
    if stable:
        return f"torch>={major}.{minor}"
    return f"torch>={major}.{minor},<{major}.{minor + 1}"


def local_version(variant: BuildVariant) -> str:
    """The local version label: ``cu128.torch2.7`` (``.cxx11abi0/1`` added for unofficial ABIs);
    ``cu13.stable2.10`` for a stable-ABI build."""
    if isinstance(variant, StableVariant):
        return f"{variant.family}.stable{variant.torch}"
    label = f"{variant.accel}.torch{variant.torch}"
    if variant.cxx11_abi is not None:
        label += f".cxx11abi{int(variant.cxx11_abi)}"
    return label


def variant_from_local_version(label: str) -> Variant:
    m = _LOCAL_RE.match(label)
    if not m:
        raise InvalidVariant(f"Invalid local version label (expected 'cuXYZ.torchX.Y'): {label!r}")
    abi = None if m.group("abi") is None else m.group("abi") == "1"
    return Variant((int(m.group("major")), int(m.group("minor"))), m.group("accel"), abi)


def accel_family(accel: str) -> str:
    """The stable-wheel family of an accelerator: ``"cu128"`` -> ``"cu12"``, ``"cpu"`` -> ``"cpu"``."""
    cuda = cuda_from_accel(accel)  # validates
    return "cpu" if cuda is None else f"cu{cuda.split('.', 1)[0]}"


def stable_target_macro(target: tuple[int, int] = STABLE_TARGET) -> str:
    """The value of ``-DTORCH_TARGET_VERSION``: ``(2, 10)`` -> ``"0x020a000000000000"``.

    torch's version macro packs the version into one 64-bit number: the major in the top byte, the
    minor in the next; patch and tweak below them are zero for a target (any 2.10.x is 2.10).
    """
    major, minor = target
    return f"0x{major:02x}{minor:02x}000000000000"


@dataclasses.dataclass(frozen=True, order=True)
class StableVariant:
    """A stable-ABI build: one accelerator family (``cpu``, ``cu12``, ``cu13``) on the LibTorch stable
    ABI with ``TORCH_TARGET_VERSION`` = ``target``. It serves every torch >= target of its family,
    whatever that torch's C++ ABI: the stable ABI crosses only C shims.

    Two relations to a torch build, both decided here and nowhere else:

    - :meth:`serves` (the wheel made for that torch): torch >= target and the same family. What is
      recommended and linked: the index's torch-minor pages, the sdist's wheel lookup, doctor's and the
      guard's install commands (all via :func:`stable_variant_for`), and what a build of this variant
      compiles against (:meth:`mismatch`).
    - :meth:`loads_on` (accepted when installed; the import guard, via :meth:`refusal`): every torch it
      serves and, for the CPU wheel, every torch >= target whatever its build, CPU or CUDA (a CPU-only
      runner with PyPI's default CUDA torch): its CPU kernels work, a CUDA tensor gets the ops'
      "built without CUDA kernels" error (csrc/ops.cpp), and :meth:`limitation` says so. A CUDA wheel
      loads only on a torch of its CUDA major: never on a CPU torch, never cu12 on cu13 or back.

    Name ``stable2.10-cu13``; local version label ``cu13.stable2.10``; ``Requires-Dist: torch>=2.10``.
    """

    family: str
    target: tuple[int, int] = STABLE_TARGET

    def __post_init__(self) -> None:
        if self.family not in ACCEL_FAMILIES:
            raise InvalidVariant(
                f"Invalid stable-ABI accelerator family (expected one of {', '.join(ACCEL_FAMILIES)}): {self.family!r}"
            )
        if tuple(self.target) < STABLE_ABI_MIN_TORCH:
            raise InvalidVariant(
                f"Invalid stable-ABI target torch{self.target[0]}.{self.target[1]} "
                f"(the stable ABI starts at torch {STABLE_ABI_MIN_TORCH[0]}.{STABLE_ABI_MIN_TORCH[1]})"
            )

    @classmethod
    def parse(cls, name: str) -> StableVariant:
        """Parse ``stable2.10-cu13`` / ``stable2.10-cpu``."""
        m = _STABLE_NAME_RE.match(name)
        if not m:
            raise InvalidVariant(f"Invalid stable variant name (expected 'stableX.Y-cuNN' or 'stableX.Y-cpu'): {name!r}")
        return cls(m.group("family"), (int(m.group("major")), int(m.group("minor"))))

    @property
    def torch(self) -> str:
        """The lowest torch served, ``"2.10"``."""
        return f"{self.target[0]}.{self.target[1]}"

    @property
    def cuda_major(self) -> Optional[int]:
        return None if self.family == "cpu" else int(self.family[2:])

    @property
    def name(self) -> str:
        return f"stable{self.torch}-{self.family}"

    @property
    def is_official(self) -> bool:
        return True

    def serves(self, variant: Variant) -> bool:
        """Whether this is the wheel made for the torch builds of ``variant`` (any C++ ABI): torch >=
        target of the same accelerator family. The CPU wheel does not serve a CUDA torch (the CUDA
        wheel of its major does), though it loads there (:meth:`loads_on`)."""
        return variant.torch_minor >= self.target and accel_family(variant.accel) == self.family

    def loads_on(self, variant: Variant) -> bool:
        """Whether this wheel, once installed, may be imported with the torch builds of ``variant``:
        those it serves and, for the CPU wheel, every torch >= target, CPU or CUDA (CPU kernels only)."""
        return self.serves(variant) or (self.family == "cpu" and variant.torch_minor >= self.target)

    def _why_not(self, torch_version: str, cuda_version: Optional[str],
                 accepted: Callable[[Variant], bool]) -> Optional[str]:
        try:
            running = Variant.from_torch(torch_version, cuda_version)
        except InvalidVariant as exc:
            return str(exc)
        if accepted(running):
            return None
        if running.torch_minor < self.target:
            return (
                f"this stable-ABI build needs torch >= {self.torch}, but torch {torch_version} is installed"
            )
        family = accel_family(running.accel)
        built = "CPU" if self.family == "cpu" else f"CUDA {self.cuda_major}"
        have = "a CPU build" if family == "cpu" else f"a CUDA {family[2:]} build ({cuda_version})"
        return f"this build is for {built} torch, but the installed torch {torch_version} is {have}"

    def refusal(self, torch_version: str, cuda_version: Optional[str]) -> Optional[str]:
        """None when this build loads on the running torch (:meth:`loads_on`), else why not (one
        sentence): what the import guard raises. The CPU wheel is accepted on a CUDA torch."""
        return self._why_not(torch_version, cuda_version, self.loads_on)

    def mismatch(self, torch_version: str, cuda_version: Optional[str]) -> Optional[str]:
        """None when this build serves that torch (:meth:`serves`), else why not (one sentence): the
        build side's check (the torch a build of this variant compiles against, its build record).
        Stricter than :meth:`refusal`: a CPU build against a CUDA torch is a mismatch."""
        return self._why_not(torch_version, cuda_version, self.serves)

    def limitation(self, torch_version: str, cuda_version: Optional[str]) -> Optional[str]:
        """When this build loads on the running torch without serving it (the CPU wheel on a CUDA
        torch): what is missing, one sentence; else None."""
        try:
            running = Variant.from_torch(torch_version, cuda_version)
        except InvalidVariant:
            return None
        if not self.loads_on(running) or self.serves(running):
            return None
        family = accel_family(running.accel)
        return (
            f"only CPU kernels are present: this is the CPU wheel ({self.name}) and the installed torch "
            f"{torch_version} is a CUDA {family[2:]} build; CUDA tensors raise 'built without CUDA kernels'"
        )

    def __str__(self) -> str:
        return self.name


#: What a wheel or a build record is for: one torch minor (legacy) or a stable-ABI family.
BuildVariant = Union[Variant, StableVariant]


def stable_variant_for(variant: Variant) -> Optional[StableVariant]:
    """The stable-ABI build that serves ``variant``'s torch, or None when its torch predates the
    stable ABI. The C++ ABI suffix does not matter: stable wheels cross only C shims."""
    if variant.torch_minor < STABLE_TARGET:
        return None
    return StableVariant(accel_family(variant.accel))


def build_variant_from_local_version(label: str) -> BuildVariant:
    """``cu128.torch2.7`` -> Variant; ``cu13.stable2.10`` -> StableVariant."""
    m = _STABLE_LOCAL_RE.match(label)
    if m:
        return StableVariant(m.group("family"), (int(m.group("major")), int(m.group("minor"))))
    try:
        return variant_from_local_version(label)
    except InvalidVariant:
        raise InvalidVariant(
            f"Invalid local version label (expected 'cuXYZ.torchX.Y' or 'cuNN.stableX.Y'): {label!r}"
        ) from None


def parse_build_variant(name: str) -> BuildVariant:
    """A variant name of either kind: ``torch2.7-cu128`` -> Variant, ``stable2.10-cu13`` -> StableVariant."""
    if name.startswith("stable"):
        return StableVariant.parse(name)
    try:
        return Variant.parse(name)
    except InvalidVariant:
        raise InvalidVariant(
            f"Invalid variant name (expected 'torchX.Y-cuXYZ', 'torchX.Y-cpu' or 'stableX.Y-cuNN'/'stableX.Y-cpu'): {name!r}"
        ) from None


def wheel_filename(version: str, variant: BuildVariant, platform: str) -> str:
    """``causal_conv1d-1.7.0+cu128.torch2.7-cp39-abi3-manylinux_2_28_x86_64.whl``;
    ``causal_conv1d-1.7.0+cu13.stable2.10-cp39-abi3-manylinux_2_28_x86_64.whl`` for a stable build."""
    base = version.split("+", 1)[0]
    return f"{DIST_NAME}-{base}+{local_version(variant)}-{PYTHON_TAG}-{ABI_TAG}-{platform}.whl"


@dataclasses.dataclass(frozen=True)
class WheelName:
    """A parsed wheel file name of this project."""

    filename: str
    version: Version  # full version, local label included
    variant: BuildVariant  # Variant (one torch minor) or StableVariant (every torch >= its target)
    tags: frozenset  # frozenset[packaging.tags.Tag]
    platforms: tuple  # platform tags, sorted

    @property
    def public_version(self) -> str:
        return self.version.public


def parse_wheel_name(filename: str) -> WheelName:
    """Parse and validate a wheel file name against the wheel contract.

    Raises InvalidWheelName naming what is wrong.
    """
    from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
    from packaging.version import InvalidVersion

    try:
        name, version, _build, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename as exc:
        raise InvalidWheelName(str(exc)) from None  # packaging's message already names the file
    except InvalidVersion as exc:
        raise InvalidWheelName(f"Invalid wheel filename ({exc}): {filename!r}") from None
    if name != canonicalize_name(PROJECT_NAME):
        raise InvalidWheelName(f"Invalid wheel filename (not a {PROJECT_NAME} wheel): {filename!r}")
    if not version.local:
        raise InvalidWheelName(
            f"Invalid wheel filename (no local version label '+cuXYZ.torchX.Y' or '+cuNN.stableX.Y'): {filename!r}"
        )
    try:
        variant = build_variant_from_local_version(version.local)
    except InvalidVariant as exc:
        raise InvalidWheelName(f"Invalid wheel filename ({exc}): {filename!r}") from None
    for tag in tags:
        if tag.interpreter != PYTHON_TAG or tag.abi != ABI_TAG:
            raise InvalidWheelName(
                f"Invalid wheel filename (expected {PYTHON_TAG}-{ABI_TAG}, got {tag.interpreter}-{tag.abi}): {filename!r}"
            )
    return WheelName(filename, version, variant, frozenset(tags), tuple(sorted({t.platform for t in tags})))


def quote_path(path: str) -> str:
    """URL-quote a path segment by segment; ``+`` becomes ``%2B``."""
    return "/".join(urllib.parse.quote(part, safe="") for part in path.split("/"))


#: The folder of the variant indexes under the site root: ``whl/index.html`` lists them.
WHEELS_DIR = "whl"


def site_base(url: str) -> str:
    """A site's base URL as every URL of the layout is made from: with a trailing slash."""
    return url if url.endswith("/") else url + "/"


def index_base(environ: Optional[Mapping[str, str]] = None) -> str:
    """The site to use: ``CAUSAL_CONV1D_INDEX_URL`` when set (a mirror, a ``file://`` copy), else
    :data:`DEFAULT_INDEX_URL`; with a trailing slash."""
    raw = (os.environ if environ is None else environ).get(ENV_INDEX_URL, "").strip()
    return site_base(raw or DEFAULT_INDEX_URL)


def _variant_name(variant: Union[str, Variant, StableVariant]) -> str:
    return variant if isinstance(variant, str) else variant.name


def variant_path(variant: Union[str, Variant, StableVariant]) -> str:
    """The PEP 503 root of a variant relative to the site root: ``whl/<variant>/``."""
    return f"{WHEELS_DIR}/{_variant_name(variant)}/"


def project_path(variant: Union[str, Variant, StableVariant]) -> str:
    """The PEP 503 project page of a variant relative to the site root: ``whl/<variant>/causal-conv1d/``."""
    return f"{variant_path(variant)}{PROJECT_NAME}/"


def variant_index_url(index_url: str, variant: Union[str, Variant, StableVariant]) -> str:
    """The PEP 503 root of a variant: ``<site>/whl/<variant>/`` (what ``--extra-index-url`` takes)."""
    return site_base(index_url) + variant_path(variant)


def project_page_url(index_url: str, variant: Union[str, Variant, StableVariant]) -> str:
    """The PEP 503 project page of a variant: ``<site>/whl/<variant>/causal-conv1d/``."""
    return site_base(index_url) + project_path(variant)


def uv_index_name(variant: Union[str, Variant, StableVariant]) -> str:
    """The name uv's ``--index NAME=URL`` / ``[[tool.uv.index]]`` gives a variant's index:
    ``causal-conv1d-torch2-13-cpu``, ``causal-conv1d-stable2-10-cu13`` (dots become dashes)."""
    return f"{PROJECT_NAME}-{_variant_name(variant)}".replace(".", "-")
