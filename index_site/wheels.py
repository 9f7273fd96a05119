"""Read wheels: the file name through the contract (packaging.utils), METADATA through packaging.metadata."""

from __future__ import annotations

__all__ = ["WheelFile", "WheelProblem", "inspect_wheel", "scan_wheels", "sha256_file"]

import dataclasses
import hashlib
import os
import zipfile
from pathlib import Path
from typing import Optional, Protocol, TypeVar

from packaging.metadata import Metadata, parse_email
from packaging.utils import canonicalize_name

import causal_conv1d_contract as contract
from index_site.errors import Problem, PublishConflict

_CHUNK = 1 << 20


class WheelProblem(ValueError):
    """A file that cannot be published, with the reason (reported, or fatal under ``--strict``)."""


@dataclasses.dataclass(frozen=True)
class WheelFile:
    """A wheel found on disk, checked against the wheel contract, with its core metadata."""

    path: Path
    filename: str
    variant: str  # variant name, e.g. "torch2.7-cu128"
    version: str  # full version, local label included
    platforms: tuple  # tuple[str, ...], from the file name
    sha256: str
    size: int
    metadata: bytes  # the wheel's METADATA file, byte for byte (served as <wheel>.metadata)
    metadata_sha256: str
    requires_python: Optional[str]


def sha256_file(path: Path) -> tuple[str, int]:
    """The sha256 hex digest and size of a file, read in chunks."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _read_metadata(path: Path, filename: str) -> bytes:
    try:
        with zipfile.ZipFile(path) as zf:
            candidates = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
            if not candidates:
                raise WheelProblem("no *.dist-info/METADATA in the wheel (not a wheel, or a broken build)")
            if len(candidates) > 1:
                raise WheelProblem(f"several METADATA files in the wheel: {sorted(candidates)}")
            return zf.read(candidates[0])
    except zipfile.BadZipFile as exc:
        raise WheelProblem(f"not a valid zip archive ({exc})") from None
    except (OSError, RuntimeError, EOFError, zipfile.LargeZipFile, NotImplementedError) as exc:
        raise WheelProblem(f"cannot read the zip archive ({type(exc).__name__}: {exc})") from None


def _validation_message(exc: BaseException) -> str:
    inner = getattr(exc, "exceptions", None)
    if inner:
        return "; ".join(str(e) for e in inner)
    return str(exc)


def inspect_wheel(path: Path) -> WheelFile:
    """Check one wheel file; raises WheelProblem naming what is wrong."""
    filename = path.name
    try:
        name = contract.parse_wheel_name(filename)
    except contract.InvalidWheelName as exc:
        raise WheelProblem(str(exc)) from None
    metadata = _read_metadata(path, filename)
    raw, unparsed = parse_email(metadata)  # what Metadata.from_email does, without parsing twice
    if unparsed:
        raise WheelProblem(f"invalid METADATA (unrecognised or malformed fields: {sorted(unparsed)})")
    try:
        meta = Metadata.from_raw(raw, validate=True)
    except Exception as exc:  # packaging raises an ExceptionGroup of InvalidMetadata
        raise WheelProblem(f"invalid METADATA ({_validation_message(exc)})") from None
    if canonicalize_name(meta.name) != canonicalize_name(contract.PROJECT_NAME):
        raise WheelProblem(f"METADATA Name is {meta.name!r}, expected {contract.PROJECT_NAME!r}")
    if meta.version != name.version:
        raise WheelProblem(f"METADATA Version is {str(meta.version)!r} but the file name says {str(name.version)!r}")
    sha256, size = sha256_file(path)
    # the value as written (validated above): str(SpecifierSet) would reorder it
    requires_python = raw.get("requires_python")
    return WheelFile(
        path=path,
        filename=filename,
        variant=name.variant.name,
        version=str(name.version),
        platforms=tuple(name.platforms),
        sha256=sha256,
        size=size,
        metadata=metadata,
        metadata_sha256=hashlib.sha256(metadata).hexdigest(),
        requires_python=(requires_python or "").strip() or None,
    )


class _Input(Protocol):
    @property
    def path(self) -> Path: ...
    @property
    def sha256(self) -> str: ...


_I = TypeVar("_I", bound=_Input)


def add_input(found: dict[str, _I], fname: str, item: _I) -> None:
    """Record an input file by name; the same name twice is fine when the contents are the same, and
    a PublishConflict when they differ."""
    previous = found.get(fname)
    if previous is not None and previous.sha256 != item.sha256:
        raise PublishConflict(
            f"two different files named {fname!r} among the inputs: {str(previous.path)!r} "
            f"(sha256 {previous.sha256}) and {str(item.path)!r} (sha256 {item.sha256}); remove one"
        )
    found.setdefault(fname, item)


def scan_wheels(directory: Path) -> tuple[list[WheelFile], list[Problem]]:
    """All wheels under ``directory`` (recursively, in sorted order) and the problems found.

    The same file name twice with the same contents counts once; with different contents it is
    a PublishConflict (there is no way to tell which one is meant).
    """
    if not directory.is_dir():
        raise WheelProblem(f"wheels directory does not exist or is not a directory: {str(directory)!r}")
    found: dict[str, WheelFile] = {}
    problems: list[Problem] = []
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for fname in sorted(files):
            path = Path(root) / fname
            if fname.endswith(".tar.gz"):
                continue  # an sdist: index_site.sdists
            if not fname.endswith(".whl"):
                problems.append(Problem(str(path), "not a wheel file (expected *.whl); skipped"))
                continue
            try:
                wheel = inspect_wheel(path)
            except WheelProblem as exc:
                problems.append(Problem(str(path), f"{exc}; skipped"))
                continue
            except OSError as exc:
                problems.append(Problem(str(path), f"cannot read ({exc.strerror or exc}); skipped"))
                continue
            add_input(found, fname, wheel)
    return [found[k] for k in sorted(found)], problems
