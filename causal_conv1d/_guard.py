"""Import-time check of the build record against the running torch.

``causal_conv1d/__init__.py`` calls :func:`check_build_record` *before* it loads the compiled
extension ``_C``. A binary built for another torch minor, another CUDA (or CPU) build of torch, or
the other C++ ABI would otherwise fail inside ``dlopen`` with ``undefined symbol: ...`` (or, worse,
load and crash later). Here it fails with an ImportError that names the mismatch, the index URL of
the variant that matches the running torch and the exact pip command that installs it.

The build record (``_build_info.json``, keys ``causal_conv1d_contract.BUILD_INFO_KEYS``) is written by
``build_support/build_info.py`` into every wheel and into editable / in-place builds.

A missing record is NOT an error: it means the package is imported from a source tree whose
extension was compiled some other way (e.g. ``python setup.py build_ext --inplace`` run by a tool
that skipped our build step, or a checkout before its first build). There is nothing to compare, so
the import goes ahead (if ``_C`` is then incompatible, the loader's error is what you get) and
``__version__`` is the bare ``causal_conv1d_contract.PACKAGE_VERSION``. Wheels always carry a record.
A record that exists but cannot be read (invalid JSON, missing keys) IS an error: the install is
damaged and the message says how to reinstall.

Two kinds of record: a per-torch-minor build (``stable_abi_target`` null) must match the running
torch's minor, CUDA major.minor and C++ ABI; a stable-ABI build (``stable_abi_target`` "2.10") is
judged by the contract (``causal_conv1d_contract.StableVariant.loads_on`` / ``refusal``): it accepts
any torch >= its target whose accelerator family matches (CPU, CUDA 12, CUDA 13: its
``cuda_major``), whatever its C++ ABI, and the CPU wheel also any CUDA torch >= its target (CPU
kernels only; a CUDA tensor gets the ops' "built without CUDA kernels" error, and doctor says so:
:func:`limitation`); it refuses a CUDA wheel on a CPU torch or cu12 on cu13 with ``refusal``'s
sentence.

Kept cheap: ``json``, ``re``, the contracts (``causal_conv1d_contract``: stdlib only, no
``packaging``, shipped in the same wheel) and the ``torch`` import that loading ``_C`` needs anyway.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Optional

import causal_conv1d_contract as contract
from causal_conv1d_contract import commands as _commands

__all__ = [
    "BuildMismatch",
    "check_build_record",
    "read_build_record",
    "record_path",
    "mismatches",
    "fix_instructions",
    "record_kind",
    "wheel_variant",
    "limitation",
]

_MINOR_RE = re.compile(r"^\s*(\d+)\.(\d+)")


class BuildMismatch(ImportError):
    """The compiled extension was built for a different torch than the one running."""


#: The record keys the guard itself reads (the full schema is contract.BUILD_INFO_KEYS;
#: tests/build_support checks these are among them and that the file name matches).
_USED_KEYS = ("version", "torch_version", "cuda_version", "cxx11_abi")
_FILENAME = contract.BUILD_INFO_FILENAME


def record_path() -> Path:
    return Path(__file__).resolve().parent / _FILENAME


def read_build_record(path: Optional[Path] = None) -> Optional[contract.BuildRecord]:
    """The build record as a dict, ``None`` when there is none.

    Raises ImportError when the file exists but is not a valid record.
    """
    path = record_path() if path is None else path
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ImportError(f"causal-conv1d: cannot read its build record {path}: {exc}. {_reinstall_hint()}") from None
    try:
        record = json.loads(text)
    except ValueError as exc:
        raise ImportError(
            f"causal-conv1d: its build record {path} is not valid JSON ({exc}); the installation is damaged. "
            f"{_reinstall_hint()}"
        ) from None
    missing = [k for k in _USED_KEYS if not isinstance(record, dict) or k not in record]
    if missing:
        raise ImportError(
            f"causal-conv1d: its build record {path} lacks the keys {missing}; the installation is damaged. "
            f"{_reinstall_hint()}"
        )
    return record


def _site() -> tuple[str, str]:
    """(the site the messages name, a sentence when CAUSAL_CONV1D_INDEX_URL is set to what is not a site's
    base URL). The guard explains an import failure: a bad setting is said in it, never raised over it."""
    try:
        return contract.index_base(), ""
    except contract.InvalidSetting as exc:
        return contract.DEFAULT_INDEX_URL, f" ({exc}; the default site is named instead)"


def _reinstall_hint() -> str:
    """Pinned to this version, from the site (an unpinned ``causal-conv1d`` resolves to PyPI's other
    project of that name): python -m causal_conv1d doctor gives the wheel command for this torch."""
    base, note = _site()
    sdist = _commands.sdist_commands(base)["pip"]
    return (
        f"Run python -m causal_conv1d doctor for the wheel that matches your torch, or reinstall from source: "
        f"{sdist}{note}"
    )


def _minor(version: Optional[str]) -> Optional[tuple[int, int]]:
    if version is None:
        return None
    m = _MINOR_RE.match(str(version))
    return (int(m.group(1)), int(m.group(2))) if m else None


def _cuda_label(cuda: Optional[str]) -> str:
    return "CPU (no CUDA)" if cuda is None else f"CUDA {cuda}"


def _stable_target(record: contract.BuildRecord) -> Optional[tuple[int, int]]:
    """The stable-ABI target of a record (``(2, 10)``), None for a per-torch-minor build."""
    return _minor(record.get("stable_abi_target"))


def _cuda_major(cuda: Optional[str]) -> Optional[int]:
    m = _minor(cuda)
    return None if m is None else m[0]


def record_kind(record: contract.BuildRecord) -> str:
    """``stable ABI (torch >= 2.10, CUDA 13)`` or ``per torch minor (torch 2.9, CUDA 12.8)``."""
    target = _stable_target(record)
    if target is not None:
        major = record.get("cuda_major", _cuda_major(record.get("cuda_version")))
        return f"stable ABI (torch >= {target[0]}.{target[1]}, {'CPU' if major is None else f'CUDA {major}'})"
    built = _minor(record.get("torch_version"))
    torch = f"{built[0]}.{built[1]}" if built else record.get("torch_version")
    return f"per torch minor (torch {torch}, {_cuda_label(record.get('cuda_version'))})"


def _stable_variant(record: contract.BuildRecord) -> Optional[contract.StableVariant]:
    """The contract's StableVariant a stable-ABI record names (family from ``cuda_major``), or None
    when the record names none the contract knows."""
    major = record.get("cuda_major", _cuda_major(record.get("cuda_version")))
    try:
        family = "cpu" if major is None else f"cu{int(major)}"
        return contract.StableVariant(family, _stable_target(record))  # type: ignore[arg-type]
    except (contract.InvalidVariant, TypeError, ValueError):
        return None


def _stable_mismatches(record: contract.BuildRecord, torch_version: str, torch_cuda: Optional[str]) -> list[str]:
    """A stable-ABI record against the running torch: [] or the one sentence saying why not. The policy
    is the contract's (``StableVariant.loads_on`` / ``refusal``): any torch >= the target of the same
    family, whatever its C++ ABI, and the CPU wheel on any torch >= the target, CPU or CUDA."""
    sv = _stable_variant(record)
    if sv is not None:
        sentence = sv.refusal(torch_version, torch_cuda)
        return [] if sentence is None else [sentence]
    return [
        f"its build record names a stable-ABI build this version does not know (stable_abi_target "
        f"{record.get('stable_abi_target')!r}, cuda_major {record.get('cuda_major')!r}), and torch {torch_version} "
        f"({_cuda_label(torch_cuda)}) is running"
    ]


def limitation(record: Optional[contract.BuildRecord], torch_version: str, torch_cuda: Optional[str]) -> Optional[str]:
    """What a build that loads on the running torch lacks there (the contract's
    ``StableVariant.limitation``: the CPU stable wheel on a CUDA torch has only CPU kernels), else None."""
    if record is None or _stable_target(record) is None:
        return None
    sv = _stable_variant(record)
    return None if sv is None else sv.limitation(torch_version, torch_cuda)


def mismatches(
    record: contract.BuildRecord, torch_version: str, torch_cuda: Optional[str], torch_abi: Optional[bool]
) -> list[str]:
    """Human-readable differences between a build record and a torch build; ``[]`` when compatible.

    Per-torch-minor record: compared are torch major.minor, the CUDA major.minor of torch's build
    (None = CPU torch) and the C++ ABI (``torch._C._GLIBCXX_USE_CXX11_ABI``). Patch releases of torch
    and the CUDA patch level are binary compatible and not compared. A stable-ABI record: see
    ``_stable_mismatches`` (the contract's ``StableVariant.refusal``; the ABI is not compared).
    """
    if _stable_target(record) is not None:
        return _stable_mismatches(record, torch_version, torch_cuda)
    problems: list[str] = []
    built_minor, running_minor = _minor(record.get("torch_version")), _minor(torch_version)
    if built_minor is None or built_minor != running_minor:
        problems.append(
            f"it was built for torch {record.get('torch_version')}, but torch {torch_version} is running "
            f"(the torch minor version must match)"
        )
    built_cuda, running_cuda = record.get("cuda_version"), torch_cuda
    if _minor(built_cuda) != _minor(running_cuda):
        problems.append(
            f"it was built for a {_cuda_label(built_cuda)} build of torch, but the running torch is a "
            f"{_cuda_label(running_cuda)} build"
        )
    built_abi = record.get("cxx11_abi")
    if built_abi is not None and torch_abi is not None and bool(built_abi) != bool(torch_abi):
        problems.append(
            f"it was built with the C++ ABI _GLIBCXX_USE_CXX11_ABI={int(bool(built_abi))}, but the running torch "
            f"uses _GLIBCXX_USE_CXX11_ABI={int(bool(torch_abi))}"
        )
    return problems


def fix_instructions(
    record: contract.BuildRecord,
    torch_version: str,
    torch_cuda: Optional[str],
    torch_abi: Optional[bool],
    *,
    base: Optional[str] = None,
) -> str:
    """What to run to get a binary that matches the running torch (pip commands, index URL).
    ``base``: the site (default: ``contract.index_base()``)."""
    note = ""
    if base is None:
        base, note = _site()
    try:
        variant = contract.Variant.from_torch(torch_version, torch_cuda, torch_abi)
    except contract.InvalidVariant as exc:
        return f"The running torch is not a build causal-conv1d supports ({exc})."
    public = str(record.get("version") or contract.PACKAGE_VERSION).split("+", 1)[0]
    lines = [f"The running torch is variant {variant.name}."]
    wanted = wheel_variant(variant)
    if wanted is not variant:  # torch >= 2.10: the stable-ABI wheel of its family, whatever its C++ ABI
        lines.append(
            f"It is served by the stable-ABI wheel {wanted.name} (one wheel for every torch >= {wanted.torch} "
            f"of its family) at {contract.variant_index_url(base, wanted)}"
        )
        if variant.is_official:
            lines.append(
                f"(the page of this torch minor, {contract.variant_index_url(base, variant)}, links the same wheel)"
            )
        lines += _matching_build_lines(base, wanted, public, torch_version, torch_accel=variant.accel)
    elif variant.is_official:
        lines += _matching_build_lines(base, variant, public, torch_version)
    else:
        lines.append(
            "No prebuilt wheel is published for it (its C++ ABI differs from PyTorch's official build of that variant)."
        )
    lines.append(
        "Or reinstall from source (this project's sdist from the site: index first, else a local build for this "
        "torch; --no-cache-dir because pip caches the wheel it made for the previous torch):  "
        + _commands.sdist_commands(base, version=public)["pip"]
    )
    built = record.get("variant")
    if built and _stable_target(record) is not None:
        lines.append(f"Or install a torch this build serves: {record_kind(record).split('(', 1)[1].rstrip(')')}.")
    elif built:
        lines.append(f"Or install the torch this build was made for (variant {built}).")
    lines.append("Diagnose the machine:  python -m causal_conv1d doctor")
    if note:
        lines.append(f"Note:{note}")
    return "\n".join(lines)


def wheel_variant(variant: contract.Variant) -> contract.BuildVariant:
    """The build that serves a torch variant: its stable-ABI family (``stable2.10-cu13``) for torch >= 2.10,
    else the variant itself (one torch minor)."""
    try:
        stable = contract.stable_variant_for(variant)
    except contract.InvalidVariant:  # e.g. cu118 on a torch >= 2.10: no such family, no stable wheel
        return variant
    return variant if stable is None else stable


def _matching_build_lines(
    base: str, variant: contract.BuildVariant, public: str, torch_version: str, torch_accel: Optional[str] = None
) -> list[str]:
    """Where the matching wheel is and the pip / uv commands that install it next to the running torch
    (torch pinned to its public version, so the command keeps it; PyTorch's index of the same build
    for a venv where it is missing). ``variant`` may be a stable-ABI build; ``torch_accel`` is then the
    running torch's accelerator, whose PyTorch index the command names."""
    url = contract.variant_index_url(base, variant)
    full = f"{public}+{contract.local_version(variant)}"
    pin = "==" + str(torch_version).split("+", 1)[0]
    cmds = _commands.install_commands(base, variant, pin, version=full, torch_accel=torch_accel)
    where = [] if torch_accel else [f"Its wheels are at {url}"]
    return where + [f"Install the matching build:  {cmds['pip']}", f"  (uv:  {cmds['uv']})"]


def _running_torch() -> tuple[str, Optional[str], Optional[bool]]:
    try:
        import torch  # noqa: PLC0415
    except ImportError as exc:
        raise ImportError(
            f"causal-conv1d needs PyTorch, which cannot be imported ({exc}). " + _commands.no_torch_advice(_site()[0])
        ) from exc
    abi = getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", None)
    return str(torch.__version__), torch.version.cuda, None if abi is None else bool(abi)


def check_build_record() -> str:
    """Raise ImportError (:class:`BuildMismatch`) if the build does not match the running torch.

    Returns the package version: the record's (local label included, e.g. ``1.7.0+cpu.torch2.13``),
    or ``contract.PACKAGE_VERSION`` when there is no record (see the module docstring).
    """
    record = read_build_record()
    torch_version, torch_cuda, torch_abi = _running_torch()  # also: _C needs torch's libraries loaded
    if record is None:
        return contract.PACKAGE_VERSION
    problems = mismatches(record, torch_version, torch_cuda, torch_abi)
    if problems:
        where = record_path()
        built = record.get("variant") or "unknown variant"
        raise BuildMismatch(
            f"causal-conv1d {record.get('version')} (variant {built}) does not match the installed torch: "
            + "; ".join(problems)
            + f". Loading its compiled extension would fail (undefined symbol) or crash. [build record: {where}]\n"
            + fix_instructions(record, torch_version, torch_cuda, torch_abi)
        )
    return str(record["version"])
