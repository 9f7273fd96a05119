"""Wheel file names and metadata pins: ``causal_conv1d-{version}+{label}-cp39-abi3-{platform}.whl``.

``packaging`` is imported only by :func:`parse_wheel_name` (a build-time tool, not a runtime
requirement of the wheel).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from causal_conv1d_contract.project import ABI_TAG, DIST_NAME, PROJECT_NAME, PYTHON_TAG
from causal_conv1d_contract.variants import (
    BuildVariant,
    InvalidVariant,
    build_variant_from_local_version,
    local_version,
)

if TYPE_CHECKING:  # packaging is a build-time tool, not a runtime requirement: imported lazily
    from packaging.tags import Tag
    from packaging.version import Version

__all__ = ["InvalidWheelName", "WheelName", "torch_requirement", "wheel_filename", "parse_wheel_name"]


class InvalidWheelName(ValueError):
    """A wheel file name that breaks the wheel contract."""


def torch_requirement(torch_minor: tuple[int, int], stable: bool = False) -> str:
    """The Requires-Dist pin of a wheel: ``torch>=2.7,<2.8``; a stable-ABI wheel: ``torch>=2.10``
    (no upper bound: it loads on torch releases that do not exist yet)."""
    major, minor = torch_minor
    if stable:
        return f"torch>={major}.{minor}"
    return f"torch>={major}.{minor},<{major}.{minor + 1}"


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
    tags: frozenset[Tag]
    platforms: tuple[str, ...]  # platform tags, sorted

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
