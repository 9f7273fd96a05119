"""Small, valid wheels named by the contract, for the tests and the benchmark (no torch needed)."""

from __future__ import annotations

__all__ = ["write_wheel"]

import base64
import hashlib
import zipfile
from pathlib import Path
from typing import Optional

import causal_conv1d_contract as contract

_DATE = (2020, 1, 1, 0, 0, 0)  # fixed zip timestamps: the same arguments give the same bytes


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def write_wheel(
    directory: Path,
    *,
    version: str = contract.PACKAGE_VERSION,
    variant: str = "torch2.13-cpu",
    platform: str = "linux_x86_64",
    requires_python: Optional[str] = contract.REQUIRES_PYTHON,
    requires_dist: tuple[str, ...] = (),
    payload: str = "",
    metadata: Optional[str] = None,
    filename: Optional[str] = None,
) -> Path:
    """Write an installable wheel of causal-conv1d for ``variant`` (``torch2.13-cpu`` or ``stable2.10-cu12``);
    returns its path.

    The package it installs, ``causal_conv1d``, holds ``VARIANT`` and ``VERSION`` so a test can
    tell which wheel was installed. ``payload`` changes the bytes (and hash) without changing the name;
    ``metadata`` replaces METADATA; ``filename`` overrides the file name.
    """
    v = contract.parse_build_variant(variant)  # torch2.13-cpu, or a stable one: stable2.10-cu13
    name = filename or contract.wheel_filename(version, v, platform)
    full_version = f"{version}+{contract.local_version(v)}"
    dist_info = f"{contract.DIST_NAME}-{full_version}.dist-info"
    if metadata is None:
        lines = [
            "Metadata-Version: 2.1",
            f"Name: {contract.PROJECT_NAME}",
            f"Version: {full_version}",
            "Summary: a test wheel of causal-conv1d",
        ]
        if requires_python:
            lines.append(f"Requires-Python: {requires_python}")
        lines += [f"Requires-Dist: {r}" for r in requires_dist]
        metadata = "\n".join(lines) + "\n\n"
    files = {
        f"{contract.DIST_NAME}/__init__.py": (
            f"VARIANT = {v.name!r}\nVERSION = {full_version!r}\nPAYLOAD = {payload!r}\n"
        ).encode(),
        f"{dist_info}/METADATA": metadata.encode(),
        f"{dist_info}/WHEEL": (
            f"Wheel-Version: 1.0\nGenerator: tests.helpers.wheels\nRoot-Is-Purelib: false\n"
            f"Tag: {contract.PYTHON_TAG}-{contract.ABI_TAG}-{platform}\n"
        ).encode(),
    }
    record = "".join(f"{path},{_record_hash(data)},{len(data)}\n" for path, data in files.items())
    files[f"{dist_info}/RECORD"] = (record + f"{dist_info}/RECORD,,\n").encode()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for arcname, data in files.items():
            zf.writestr(zipfile.ZipInfo(arcname, _DATE), data, compress_type=zipfile.ZIP_DEFLATED)
    return path
