"""This project's sdists among the inputs: checked against the sdist contract (its file name, and the
PKG-INFO inside naming this project and the same version), hashed, for the ``source/`` index."""

from __future__ import annotations

__all__ = ["SdistFile", "inspect_sdist", "scan_sdists"]

import dataclasses
import email.parser
import os
import tarfile
from pathlib import Path
from typing import Optional

from packaging.utils import canonicalize_name

import causal_conv1d_contract as contract
from causal_conv1d_contract import sdist as sdist_contract
from index_site.errors import Problem
from index_site.wheels import WheelProblem, add_input, sha256_file


@dataclasses.dataclass(frozen=True)
class SdistFile:
    """An sdist found on disk."""

    path: Path
    filename: str
    version: str
    sha256: str
    size: int
    requires_python: Optional[str]


def _pkg_info(path: Path, filename: str) -> bytes:
    top = filename[: -len(sdist_contract.SDIST_SUFFIX)]
    try:
        with tarfile.open(path, "r:gz") as tf:
            member = tf.extractfile(f"{top}/PKG-INFO")
            if member is None:
                raise WheelProblem(f"{top}/PKG-INFO is not a file")
            return member.read()
    except KeyError:
        raise WheelProblem(f"no {top}/PKG-INFO in the archive (not an sdist of this project)") from None
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise WheelProblem(f"not a readable .tar.gz archive ({type(exc).__name__}: {exc})") from None


def inspect_sdist(path: Path) -> SdistFile:
    """Check one sdist; raises WheelProblem naming what is wrong."""
    try:
        version = sdist_contract.parse_sdist_name(path.name)
    except sdist_contract.InvalidSdistName as exc:
        raise WheelProblem(str(exc)) from None
    meta = email.parser.BytesParser().parsebytes(_pkg_info(path, path.name), headersonly=True)
    if canonicalize_name(meta.get("Name", "")) != canonicalize_name(contract.PROJECT_NAME):
        raise WheelProblem(f"PKG-INFO Name is {meta.get('Name')!r}, expected {contract.PROJECT_NAME!r}")
    if meta.get("Version") != version:
        raise WheelProblem(f"PKG-INFO Version is {meta.get('Version')!r} but the file name says {version!r}")
    sha256, size = sha256_file(path)
    requires_python = (meta.get("Requires-Python") or "").strip() or None
    return SdistFile(path, path.name, version, sha256, size, requires_python)


def scan_sdists(directory: Path) -> tuple[list[SdistFile], list[Problem]]:
    """All ``*.tar.gz`` under ``directory`` (recursively, sorted) that are this project's sdists, and the
    problems found (a ``.tar.gz`` that is not one is skipped with a problem)."""
    found: dict[str, SdistFile] = {}
    problems: list[Problem] = []
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for fname in sorted(files):
            if not fname.endswith(sdist_contract.SDIST_SUFFIX):
                continue
            path = Path(root) / fname
            try:
                sd = inspect_sdist(path)
            except WheelProblem as exc:
                problems.append(Problem(str(path), f"{exc}; skipped"))
                continue
            add_input(found, fname, sd)
    return [found[k] for k in sorted(found)], problems
