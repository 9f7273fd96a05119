"""Variants, the unit of binary compatibility: one torch minor (:class:`Variant`) or a stable-ABI
accelerator family (:class:`StableVariant`); their names, local version labels and relations to a
torch build."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Optional, Union

__all__ = [
    "STABLE_ABI_MIN_TORCH",
    "STABLE_TARGET",
    "ACCEL_FAMILIES",
    "InvalidVariant",
    "Variant",
    "StableVariant",
    "BuildVariant",
    "accel_from_cuda",
    "cuda_from_accel",
    "official_cxx11_abi",
    "accel_family",
    "stable_target_macro",
    "stable_variant_for",
    "local_version",
    "variant_from_local_version",
    "build_variant_from_local_version",
    "parse_build_variant",
]

#: The first torch whose LibTorch stable ABI (torch/csrc/stable, torch/headeronly, the C shims) the
#: op layer can be built on; a stable build refuses an older torch at build time.
STABLE_ABI_MIN_TORCH = (2, 10)
#: The TORCH_TARGET_VERSION a stable build pins (-DTORCH_TARGET_VERSION=stable_target_macro()): it
#: uses no shim newer than this, so it loads on this torch and every later one.
STABLE_TARGET = (2, 10)
#: Accelerator families of stable wheels: one wheel per family and platform serves every torch
#: >= STABLE_TARGET of that family (CUDA minor versions of one major share a runtime ABI).
ACCEL_FAMILIES = ("cpu", "cu12", "cu13")

_VARIANT_RE = re.compile(r"^torch(?P<major>\d+)\.(?P<minor>\d+)-(?P<accel>cpu|cu\d{3,4})(?:-cxx11abi(?P<abi>[01]))?$")
_LOCAL_RE = re.compile(r"^(?P<accel>cpu|cu\d{3,4})\.torch(?P<major>\d+)\.(?P<minor>\d+)(?:\.cxx11abi(?P<abi>[01]))?$")
_STABLE_NAME_RE = re.compile(r"^stable(?P<major>\d+)\.(?P<minor>\d+)-(?P<family>cpu|cu\d{2})$")
_STABLE_LOCAL_RE = re.compile(r"^(?P<family>cpu|cu\d{2})\.stable(?P<major>\d+)\.(?P<minor>\d+)$")


class InvalidVariant(ValueError):
    """A variant name, accelerator or torch version that breaks the variant contract."""


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
        m = re.match(
            r"^(\d+)\.(\d+)(?:\.\d+)*(?:(?:a|b|rc|\.dev|\.post)\d+)*(?:\+[A-Za-z0-9.]+)?$", torch_version.strip()
        )
        if not m:
            raise InvalidVariant(f"Invalid torch version (expected 'X.Y.Z[+local]'): {torch_version!r}")
        return cls((int(m.group(1)), int(m.group(2))), accel_from_cuda(cuda_version), cxx11_abi)

    @classmethod
    def parse(cls, name: str) -> Variant:
        """Parse ``torch2.7-cu128`` / ``torch2.5-cpu-cxx11abi1``."""
        m = _VARIANT_RE.match(name)
        if not m:
            raise InvalidVariant(f"Invalid variant name (expected 'torchX.Y-cuXYZ' or 'torchX.Y-cpu'): {name!r}")
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
            raise InvalidVariant(
                f"Invalid stable variant name (expected 'stableX.Y-cuNN' or 'stableX.Y-cpu'): {name!r}"
            )
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

    def _why_not(
        self, torch_version: str, cuda_version: Optional[str], accepted: Callable[[Variant], bool]
    ) -> Optional[str]:
        try:
            running = Variant.from_torch(torch_version, cuda_version)
        except InvalidVariant as exc:
            return str(exc)
        if accepted(running):
            return None
        if running.torch_minor < self.target:
            return f"this stable-ABI build needs torch >= {self.torch}, but torch {torch_version} is installed"
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
