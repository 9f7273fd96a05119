"""``python -m build_matrix check WHEEL...``: is each wheel what its name says?

Every check reads the wheel itself (its binary, metadata and build record), never the build
inputs, so it can run on any wheel: after each native or cibuildwheel build, and standalone.

Exit status of the command: 0 when every check passes, ``CheckError.exit_code`` (11) when a check
fails or a wheel cannot be read, 3 for an unknown ``--job`` (``UnknownJob``), 2 for bad options.

Checks (each failure names its check):

``name``          the file name parses under the wheel contract (``contract.parse_wheel_name``)
                  and, when a job or variant is given, carries that variant and platform.
``metadata``      ``Requires-Dist`` pins torch to the variant's minor (``torch>=X.Y,<X.(Y+1)``)
                  and lists no build tool; Name/Version match the file name.
``build-record``  ``causal_conv1d/_build_info.json`` has exactly ``contract.BUILD_INFO_KEYS`` and
                  agrees with the name (version, variant, torch minor, CUDA, ABI, platform).
``contents``      check-wheel-contents finds nothing wrong (configuration in ``CONTENTS_IGNORE``).
``needed``        no extension links libpython (abi3 extensions must not) or libcuda (the driver:
                  a wheel must import on machines without one).
``cxx11-abi``     the C++ ABI the binary uses, read from its symbols, equals the label's.
``abi3``          abi3audit finds no symbol outside the stable ABI of the tagged Python.
``cuda-archs``    the SASS/PTX embedded (cuobjdump) equals the planned arch list.

The binaries are read through :mod:`build_matrix.binaries` (DT_NEEDED, symbols, C++ ABI, torch
imports, embedded CUDA archs).
"""

from __future__ import annotations

import argparse
import dataclasses
import email.parser
import json
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet

import causal_conv1d_contract as contract
from build_matrix.binaries import (
    binary_cxx11_abi,
    embedded_cuda_archs,
    find_cuobjdump,
    needed_and_symbols,
    torch_cxx_imports,
)
from build_matrix.errors import EXIT_USAGE, BuildMatrixError, CheckError

__all__ = [
    "CHECKS",
    "CONTENTS_IGNORE",
    "BUILD_TOOLS",
    "CheckResult",
    "Expectation",
    "WheelUnreadable",
    "parse_arch_list",
    "check_wheel",
    "configure_parser",
    "run",
]

CHECKS = ("name", "metadata", "build-record", "contents", "needed", "cxx11-abi", "abi3", "cuda-archs", "stable-abi")

#: check-wheel-contents checks turned off, each with its reason:
#: W002 (duplicate files): empty ``__init__.py``-style files and identical small stubs are legitimate.
#: Everything else stays on, with the wheel's top-level entries (contract.TOPLEVEL_ENTRIES) as ``--toplevel``.
CONTENTS_IGNORE = ("W002",)

#: Distributions that are build-time tools; none may appear among a wheel's runtime requirements.
BUILD_TOOLS = frozenset(
    {"ninja", "setuptools", "wheel", "packaging", "cmake", "pybind11", "build", "cibuildwheel", "auditwheel"}
)


class WheelUnreadable(CheckError):
    """The file is not a wheel that can be opened."""


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """One check on one wheel: ``status`` is "pass", "fail" or "skip"."""

    check: str
    status: str
    detail: str

    def line(self) -> str:
        mark = {"pass": "ok  ", "fail": "FAIL", "skip": "skip"}[self.status]
        return f"  [{mark}] {self.check}: {self.detail}"


@dataclasses.dataclass(frozen=True)
class Expectation:
    """What the caller planned (all optional; without them the wheel is checked against its name)."""

    variant: Optional[contract.BuildVariant] = None
    arch: Optional[str] = None  # "x86_64", "aarch64", "amd64"
    cuda_archs: Optional[tuple[str, ...]] = None  # planned archs, e.g. ("7.5", "9.0+PTX")
    require_cuobjdump: bool = False


def parse_arch_list(value: str) -> tuple[str, ...]:
    """``"7.5;8.0 9.0+PTX"`` -> ``("7.5", "8.0", "9.0+PTX")`` (TORCH_CUDA_ARCH_LIST syntax)."""
    items = [a.strip() for a in re.split(r"[;\s,]+", value) if a.strip()]
    for item in items:
        if not re.match(r"^\d+\.\d+[af]?(\+PTX)?$", item):
            raise ValueError(f"Invalid CUDA arch (expected e.g. '9.0', '9.0a', '12.0+PTX'): {item!r}")
    return tuple(items)


def _arch_key(arch: str) -> str:
    """``"9.0a"`` -> ``"90a"``; the form cuobjdump prints after ``sm_``."""
    base = arch.replace("+PTX", "")
    major, minor = base.split(".")
    return f"{major}{minor}"


# --------------------------------------------------------------------------------------------
# The wheel, opened once


@dataclasses.dataclass
class _Wheel:
    path: Path
    root: Path  # extracted contents
    names: list[str]
    metadata: email.message.Message
    wheel_name: Optional[contract.WheelName]  # None when the name does not parse
    name_error: Optional[str]

    @property
    def binaries(self) -> list[Path]:
        return [self.root / n for n in self.names if n.endswith((".so", ".pyd")) or ".so." in n]

    def build_record(self) -> tuple[Optional[dict], str]:
        rel = f"{contract.DIST_NAME}/{contract.BUILD_INFO_FILENAME}"
        if rel not in self.names:
            return None, f"{rel} is missing from the wheel"
        try:
            data = json.loads((self.root / rel).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return None, f"{rel} is not valid JSON ({exc})"
        if not isinstance(data, dict):
            return None, f"{rel} is not a JSON object"
        return data, ""


def _open(path: Path, workdir: Path) -> _Wheel:
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
            zf.extractall(workdir)
    except (OSError, zipfile.BadZipFile) as exc:
        raise WheelUnreadable(f"Invalid wheel (cannot open as a zip archive: {exc}): {str(path)!r}") from None
    meta_names = [n for n in names if re.match(r"^[^/]+\.dist-info/METADATA$", n)]
    if len(meta_names) != 1:
        raise WheelUnreadable(
            f"Invalid wheel (expected one *.dist-info/METADATA, found {len(meta_names)}): {str(path)!r}"
        )
    metadata = email.parser.Parser().parsestr((workdir / meta_names[0]).read_text(encoding="utf-8"))
    try:
        wheel_name, name_error = contract.parse_wheel_name(path.name), None
    except contract.InvalidWheelName as exc:
        wheel_name, name_error = None, str(exc)
    return _Wheel(path, workdir, names, metadata, wheel_name, name_error)


# --------------------------------------------------------------------------------------------
# Individual checks


def _platform_arch(platform: str) -> str:
    for arch in ("x86_64", "aarch64", "amd64", "arm64"):
        if platform.endswith(arch):
            return arch
    return platform


def _check_name(w: _Wheel, exp: Expectation) -> CheckResult:
    if w.wheel_name is None:
        return CheckResult("name", "fail", w.name_error or "does not parse")
    wn = w.wheel_name
    problems = []
    if wn.version.public != contract.PACKAGE_VERSION:
        problems.append(f"version {wn.version.public} != package version {contract.PACKAGE_VERSION}")
    if exp.variant is not None and wn.variant != exp.variant:
        problems.append(f"variant {wn.variant} != planned {exp.variant}")
    if exp.arch is not None:
        arches = {_platform_arch(p) for p in wn.platforms}
        if arches != {exp.arch}:
            problems.append(f"platform {','.join(wn.platforms)} is not for {exp.arch}")
    if problems:
        return CheckResult("name", "fail", "; ".join(problems))
    return CheckResult("name", "pass", f"variant {wn.variant}, platform {','.join(wn.platforms)}")


def _check_metadata(w: _Wheel, exp: Expectation) -> CheckResult:
    problems = []
    reqs: list[Requirement] = []
    for raw in w.metadata.get_all("Requires-Dist") or []:
        try:
            reqs.append(Requirement(raw))
        except InvalidRequirement:
            problems.append(f"unparsable Requires-Dist {raw!r}")
    runtime = [r for r in reqs if r.marker is None or "extra" not in str(r.marker)]
    variant = w.wheel_name.variant if w.wheel_name is not None else exp.variant
    torch_reqs = [r for r in runtime if r.name.lower() == "torch"]
    if variant is None:
        problems.append("cannot tell the variant (the name does not parse), so the torch pin cannot be checked")
    else:
        pin = _torch_pin(variant)  # a stable wheel: torch>=2.10, no upper bound
        want = SpecifierSet(pin[len("torch") :])
        if not torch_reqs:
            problems.append(f"no Requires-Dist on torch (expected {pin})")
        elif len(torch_reqs) > 1 or torch_reqs[0].specifier != want:
            got = ", ".join(str(r) for r in torch_reqs)
            problems.append(f"torch pin {got!r} != {pin!r}")
    tools = sorted(r.name for r in runtime if r.name.lower().replace("_", "-") in BUILD_TOOLS)
    if tools:
        problems.append(f"build tools among runtime requirements: {', '.join(tools)}")
    name = (w.metadata.get("Name") or "").lower().replace("_", "-")
    if name != contract.PROJECT_NAME:
        problems.append(f"Name {w.metadata.get('Name')!r} != {contract.PROJECT_NAME!r}")
    if w.wheel_name is not None and w.metadata.get("Version") != str(w.wheel_name.version):
        problems.append(f"Version {w.metadata.get('Version')!r} != file name's {str(w.wheel_name.version)!r}")
    if problems:
        return CheckResult("metadata", "fail", "; ".join(problems))
    return CheckResult("metadata", "pass", f"Requires-Dist: {', '.join(str(r) for r in runtime)}")


def _torch_pin(variant: contract.BuildVariant) -> str:
    if isinstance(variant, contract.StableVariant):
        return contract.torch_requirement(variant.target, stable=True)
    return contract.torch_requirement(variant.torch_minor)


def _variant_cuda_major(variant: contract.BuildVariant) -> Optional[int]:
    """The CUDA major a wheel's label promises (None: a CPU wheel)."""
    if isinstance(variant, contract.StableVariant):
        return variant.cuda_major
    return None if variant.cuda is None else int(variant.cuda.split(".")[0])


def _stable_record_problems(record: dict, v: contract.StableVariant) -> list[str]:
    """A stable-ABI record: built against a torch its family serves, stable_abi_target = the label's."""
    problems = []
    if record.get("stable_abi_target") != v.torch:
        problems.append(f"stable_abi_target {record.get('stable_abi_target')!r} != {v.torch!r} (the label's)")
    tv = str(record.get("torch_version") or "")
    mismatch = v.mismatch(tv, record.get("cuda_version"))  # built against a torch of its own family
    if mismatch:
        problems.append(f"torch_version {tv!r} / cuda_version {record.get('cuda_version')!r}: {mismatch}")
    if not isinstance(record.get("cxx11_abi"), bool):
        problems.append(f"cxx11_abi {record.get('cxx11_abi')!r} is not a bool")
    return problems


def _legacy_record_problems(record: dict, v: contract.Variant) -> list[str]:
    problems = []
    tv = str(record.get("torch_version") or "")
    if not re.match(rf"^{re.escape(v.torch)}(\.|$)", tv):
        problems.append(f"torch_version {tv!r} is not torch {v.torch}")
    cuda = record.get("cuda_version")
    cuda_mm = None if cuda is None else ".".join(str(cuda).split(".")[:2])
    if cuda_mm != v.cuda:
        problems.append(f"cuda_version {cuda!r} != {v.cuda!r}")
    if record.get("cxx11_abi") is not v.abi:
        problems.append(f"cxx11_abi {record.get('cxx11_abi')!r} != {v.abi!r} (the label's ABI)")
    if record.get("stable_abi_target") is not None:
        problems.append(
            f"stable_abi_target {record.get('stable_abi_target')!r} in a per-torch-minor wheel (expected null)"
        )
    return problems


def _check_build_record(w: _Wheel, exp: Expectation) -> CheckResult:
    record, error = w.build_record()
    if record is None:
        return CheckResult("build-record", "fail", error)
    problems = []
    keys = set(record)
    want_keys = set(contract.BUILD_INFO_KEYS)
    if keys != want_keys:
        if want_keys - keys:
            problems.append(f"missing keys {sorted(want_keys - keys)}")
        if keys - want_keys:
            problems.append(f"unknown keys {sorted(keys - want_keys)}")
    wn = w.wheel_name
    if wn is not None:
        v = wn.variant
        if record.get("version") != str(wn.version):
            problems.append(f"version {record.get('version')!r} != {str(wn.version)!r}")
        if record.get("variant") != v.name:
            problems.append(f"variant {record.get('variant')!r} != {v.name!r}")
        problems += (
            _stable_record_problems(record, v)
            if isinstance(v, contract.StableVariant)
            else _legacy_record_problems(record, v)
        )
        major = _variant_cuda_major(v)
        if record.get("cuda_major") != major:
            problems.append(f"cuda_major {record.get('cuda_major')!r} != {major!r} (the label's)")
        if record.get("with_cuda") is not (major is not None):
            problems.append(f"with_cuda {record.get('with_cuda')!r} but the variant is {v}")
        plat = str(record.get("platform") or "")
        if plat not in wn.platforms and {_platform_arch(plat)} != {_platform_arch(p) for p in wn.platforms}:
            problems.append(f"platform {plat!r} does not match the file's {','.join(wn.platforms)}")
        archs = record.get("cuda_archs")
        if not isinstance(archs, list):
            problems.append(f"cuda_archs {archs!r} is not a list")
        elif major is None and archs:
            problems.append(f"cuda_archs {archs} in a CPU wheel")
        elif major is not None and not archs:
            problems.append("cuda_archs is empty in a CUDA wheel")
    if problems:
        return CheckResult("build-record", "fail", "; ".join(problems))
    return CheckResult(
        "build-record",
        "pass",
        f"torch {record.get('torch_version')}, cuda {record.get('cuda_version')}, archs {record.get('cuda_archs')}",
    )


def _tool(module: str, script: str) -> Optional[list[str]]:
    """How to run a Python tool: this interpreter's module if importable, else a script on PATH."""
    import importlib.util

    if importlib.util.find_spec(module) is not None:
        return [sys.executable, "-m", module]
    found = shutil.which(script)
    if found:
        return [found]
    return None


def _check_contents(w: _Wheel, exp: Expectation) -> CheckResult:
    cmd = _tool("check_wheel_contents", "check-wheel-contents")
    if cmd is None:
        return CheckResult(
            "contents", "fail", "check-wheel-contents is not installed (pip install -r requirements-dev.txt)"
        )
    proc = subprocess.run(
        [
            *cmd,
            "--no-config",
            "--toplevel",
            ",".join(contract.TOPLEVEL_ENTRIES),
            "--ignore",
            ",".join(CONTENTS_IGNORE),
            str(w.path),
        ],
        capture_output=True,
        text=True,
    )
    out = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0:
        # Output: "<wheel>: W202: Wheel library has undeclared toplevel entry:" + indented entries.
        text = " ".join(ln.strip() for ln in out.splitlines()).replace(f"{w.path}: ", "")
        return CheckResult("contents", "fail", text)
    return CheckResult("contents", "pass", f"check-wheel-contents: OK (ignored {', '.join(CONTENTS_IGNORE)})")


def _elf_files(w: _Wheel) -> list[Path]:
    out = []
    for p in w.binaries:
        with open(p, "rb") as fh:
            if fh.read(4) == b"\x7fELF":
                out.append(p)
    return out


def _check_needed(w: _Wheel, exp: Expectation) -> CheckResult:
    elves = _elf_files(w)
    if not elves:
        if any(p.suffix == ".pyd" for p in w.binaries):
            return CheckResult("needed", "skip", "Windows binary (PE): DT_NEEDED applies to ELF only")
        return CheckResult("needed", "fail", "no compiled extension in the wheel")
    problems = []
    summary = []
    for elf in elves:
        needed, _ = needed_and_symbols(elf)
        rel = elf.relative_to(w.root).as_posix()
        summary.append(f"{rel}: {' '.join(needed)}")
        for lib in needed:
            if lib.startswith("libpython"):
                problems.append(f"{rel} links {lib} (abi3 extensions must not link libpython)")
            if re.match(r"^libcuda\.so(\.|$)", lib):
                problems.append(f"{rel} links {lib} (the CUDA driver; the wheel would not import without a GPU driver)")
    if problems:
        return CheckResult("needed", "fail", "; ".join(problems))
    return CheckResult("needed", "pass", "; ".join(summary))


def _check_cxx11_abi(w: _Wheel, exp: Expectation) -> CheckResult:
    variant = w.wheel_name.variant if w.wheel_name is not None else exp.variant
    elves = _elf_files(w)
    if not elves:
        return CheckResult("cxx11-abi", "skip", "no ELF binary (the C++ ABI label applies to Linux)")
    if variant is None:
        return CheckResult("cxx11-abi", "fail", "cannot tell the label's ABI: the name does not parse")
    if isinstance(variant, contract.StableVariant):
        return _check_stable_cxx11_abi(w, elves)
    found = []
    for elf in elves:
        rel = elf.relative_to(w.root).as_posix()
        _, symbols = needed_and_symbols(elf)
        try:
            abi = binary_cxx11_abi(symbols)
        except ValueError as exc:
            return CheckResult("cxx11-abi", "fail", f"{rel}: {exc}")
        if abi is None:
            return CheckResult("cxx11-abi", "fail", f"{rel}: no std::string symbol shows its C++ ABI")
        if abi != variant.abi:
            return CheckResult(
                "cxx11-abi",
                "fail",
                f"{rel} uses the {'cxx11' if abi else 'pre-cxx11'} ABI but {variant} is labelled "
                f"{'cxx11' if variant.abi else 'pre-cxx11'} (_GLIBCXX_USE_CXX11_ABI={int(variant.abi)})",
            )
        found.append(rel)
    return CheckResult("cxx11-abi", "pass", f"{'cxx11' if variant.abi else 'pre-cxx11'} in {', '.join(found)}")


def _check_stable_cxx11_abi(w: _Wheel, elves: list[Path]) -> CheckResult:
    """A stable-ABI wheel serves torch builds of either C++ ABI: no std::string crosses into torch
    (the stable-abi check verifies that no torch C++ symbol is imported), so only a mixed binary fails."""
    seen = []
    for elf in elves:
        rel = elf.relative_to(w.root).as_posix()
        try:
            abi = binary_cxx11_abi(needed_and_symbols(elf)[1])
        except ValueError as exc:
            return CheckResult("cxx11-abi", "fail", f"{rel}: {exc}")
        seen.append(f"{rel}: {'-' if abi is None else ('cxx11' if abi else 'pre-cxx11')}")
    return CheckResult("cxx11-abi", "pass", "stable-ABI wheel: any torch C++ ABI (" + ", ".join(seen) + ")")


def _check_abi3(w: _Wheel, exp: Expectation) -> CheckResult:
    if not w.binaries:
        return CheckResult("abi3", "fail", "no compiled extension in the wheel")
    # The file name may be _C.so or _C.abi3.so (CPython imports both); abi3audit audits every
    # shared object of a wheel tagged abi3, whatever its suffix.
    cmd = _tool("abi3audit", "abi3audit")
    if cmd is None:
        return CheckResult("abi3", "fail", "abi3audit is not installed (pip install -r requirements-dev.txt)")
    proc = subprocess.run([*cmd, "--strict", "--report", str(w.path)], capture_output=True, text=True)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        return CheckResult(
            "abi3", "fail", f"abi3audit failed (exit {proc.returncode}): {(proc.stdout + proc.stderr).strip()[-800:]}"
        )
    problems = []
    audited = 0
    for spec in report.get("specs", {}).values():
        for obj in spec.get("wheel") or []:
            audited += 1
            res = obj.get("result", {})
            for sym in res.get("non_abi3_symbols", []) or []:
                problems.append(f"{obj.get('name')}: non-abi3 symbol {sym}")
            comp = res.get("computed")
            baseline = res.get("baseline")
            if comp and baseline and _pyver(comp) > _pyver(baseline):
                problems.append(f"{obj.get('name')}: uses abi3 of Python {comp} > tagged {baseline}")
    if proc.returncode != 0 and not problems:
        problems.append(f"abi3audit exit {proc.returncode}: {(proc.stdout + proc.stderr).strip()[-800:]}")
    if problems:
        return CheckResult("abi3", "fail", "; ".join(problems))
    if audited == 0:
        return CheckResult("abi3", "fail", "abi3audit audited no extension")
    return CheckResult("abi3", "pass", f"abi3audit: {audited} extension(s) within the {contract.PYTHON_TAG} stable ABI")


def _pyver(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", str(text))[:2])


def _check_cuda_archs(w: _Wheel, exp: Expectation, cuobjdump: Optional[str]) -> CheckResult:
    variant = w.wheel_name.variant if w.wheel_name is not None else exp.variant
    record, _ = w.build_record()
    planned = exp.cuda_archs
    if planned is None and record is not None and isinstance(record.get("cuda_archs"), list):
        planned = tuple(str(a) for a in record["cuda_archs"])
    # cuobjdump reads the binaries of the platform it runs on: ELF here, PE (.pyd) on Windows.
    elves = _elf_files(w) + ([p for p in w.binaries if p.suffix == ".pyd"] if sys.platform == "win32" else [])
    if variant is not None and _variant_cuda_major(variant) is None:
        if cuobjdump and elves:
            for elf in elves:
                sass, ptx = embedded_cuda_archs(cuobjdump, elf)
                if sass or ptx:
                    return CheckResult("cuda-archs", "fail", f"CPU wheel embeds CUDA code: {sorted(sass | ptx)}")
        return CheckResult(
            "cuda-archs",
            "pass" if cuobjdump else "skip",
            "CPU wheel: no CUDA code expected" + ("" if cuobjdump else " (cuobjdump not found, not verified)"),
        )
    if not planned:
        return CheckResult("cuda-archs", "fail", "no planned arch list (give --cuda-archs or a build record)")
    if not elves:
        return CheckResult(
            "cuda-archs", "skip", "no binary of this platform's format (check Windows wheels on Windows)"
        )
    if cuobjdump is None:
        status = "fail" if exp.require_cuobjdump else "skip"
        return CheckResult(
            "cuda-archs", status, "cuobjdump not found (pip install nvidia-cuda-cuobjdump, or set CUDA_HOME)"
        )
    want_sass = {_arch_key(a) for a in planned}
    want_ptx = {_arch_key(a) for a in planned if a.endswith("+PTX")}
    got_sass: set[str] = set()
    got_ptx: set[str] = set()
    for elf in elves:
        try:
            sass, ptx = embedded_cuda_archs(cuobjdump, elf)
        except RuntimeError as exc:
            return CheckResult("cuda-archs", "fail", str(exc))
        got_sass |= sass
        got_ptx |= ptx
    problems = []
    if got_sass != want_sass:
        problems.append(f"SASS sm_{{{','.join(sorted(got_sass))}}} != planned sm_{{{','.join(sorted(want_sass))}}}")
    if got_ptx != want_ptx:
        problems.append(f"PTX {sorted(got_ptx) or 'none'} != planned {sorted(want_ptx) or 'none'}")
    if problems:
        return CheckResult("cuda-archs", "fail", "; ".join(problems) + f" (planned {';'.join(planned)})")
    return CheckResult("cuda-archs", "pass", f"{';'.join(planned)} (sm_{', sm_'.join(sorted(got_sass))})")


# --------------------------------------------------------------------------------------------
# stable-abi: a LibTorch stable-ABI binary imports torch's C shims only


def _is_stable_build(w: _Wheel) -> Optional[bool]:
    """From the build record (stable_abi_target), else from the name's label; None when neither says."""
    record, _ = w.build_record()
    if record is not None and "stable_abi_target" in record:
        return record.get("stable_abi_target") is not None
    variant = getattr(w.wheel_name, "variant", None)
    return None if variant is None else isinstance(variant, contract.StableVariant)


def _check_stable_abi(w: _Wheel, exp: Expectation) -> CheckResult:
    stable = _is_stable_build(w)
    if not stable:
        return CheckResult("stable-abi", "skip", "not a stable-ABI build (per-torch-minor wheel)")
    elves = _elf_files(w)
    if not elves:
        if any(p.suffix == ".pyd" for p in w.binaries):
            return CheckResult("stable-abi", "skip", "Windows binary (PE): the symbol check reads ELF")
        return CheckResult("stable-abi", "fail", "no compiled extension in the wheel")
    problems, summary = [], []
    for elf in elves:
        rel = elf.relative_to(w.root).as_posix()
        offending, shims = torch_cxx_imports(elf)
        if offending:
            shown = ", ".join(offending[:5]) + (f" (+{len(offending) - 5} more)" if len(offending) > 5 else "")
            problems.append(f"{rel} imports {len(offending)} torch C++ symbol(s): {shown}")
        summary.append(f"{rel}: {len(shims)} torch C shims, no torch C++ symbol")
    if problems:
        return CheckResult("stable-abi", "fail", "; ".join(problems))
    return CheckResult("stable-abi", "pass", "; ".join(summary))


def check_wheel(
    path: Path,
    expectation: Expectation = Expectation(),
    *,
    only: Sequence[str] = CHECKS,
    cuobjdump: Optional[str] = None,
) -> list[CheckResult]:
    """Run the checks on one wheel; returns one result per check in ``only`` (in CHECKS order)."""
    path = Path(path)
    if not path.is_file():
        raise WheelUnreadable(f"Invalid wheel (no such file): {str(path)!r}")
    cuobjdump = cuobjdump or find_cuobjdump()
    with tempfile.TemporaryDirectory(prefix="wheelcheck-") as tmp:
        w = _open(path, Path(tmp))
        results = []
        for name in CHECKS:
            if name not in only:
                continue
            if name == "cuda-archs":
                results.append(_check_cuda_archs(w, expectation, cuobjdump))
            else:
                fn = {
                    "name": _check_name,
                    "metadata": _check_metadata,
                    "build-record": _check_build_record,
                    "contents": _check_contents,
                    "needed": _check_needed,
                    "cxx11-abi": _check_cxx11_abi,
                    "abi3": _check_abi3,
                    "stable-abi": _check_stable_abi,
                }[name]
                results.append(fn(w, expectation))
        return results


# --------------------------------------------------------------------------------------------
# CLI


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``python -m build_matrix check``."""
    parser.description = (
        "Check that wheels are what their names say: name, torch pin, build record, contents, "
        "NEEDED libraries, C++ ABI (from the binary's symbols), abi3 compliance and embedded CUDA archs. "
        "Exit 0 when every check passes, 11 when any fails or a wheel cannot be read."
    )
    parser.add_argument(
        "wheels",
        nargs="+",
        type=Path,
        metavar="WHEEL",
        help="wheel files, or directories whose *.whl files are all checked",
    )
    parser.add_argument("--job", help="also require the variant/platform of this build job (from the plan)")
    parser.add_argument("--variant", help="also require this variant, e.g. torch2.7-cu128")
    parser.add_argument(
        "--cuda-archs",
        help="planned TORCH_CUDA_ARCH_LIST to compare the embedded code with "
        "(default: the job's, else the wheel's build record)",
    )
    parser.add_argument("--cuobjdump", help="path to cuobjdump (default: PATH, CUDA_HOME, pip nvidia-cuda-cuobjdump)")
    parser.add_argument(
        "--require-cuobjdump", action="store_true", help="fail (not skip) the cuda-archs check without cuobjdump"
    )
    parser.add_argument("--only", help=f"comma-separated subset of: {', '.join(CHECKS)}")
    parser.add_argument("--json", action="store_true", help="print results as JSON")


def _expectation_from_args(args: argparse.Namespace) -> Expectation:
    variant: Optional[contract.BuildVariant] = None
    arch = None
    archs = parse_arch_list(args.cuda_archs) if getattr(args, "cuda_archs", None) else None
    if getattr(args, "job", None):
        from build_matrix import compat
        from build_matrix.plan import resolve_job

        job = resolve_job(compat.load(getattr(args, "data", None)), args.job)
        variant = job.variant
        arch = job.arch
        if archs is None and job.cuda_archs:
            archs = parse_arch_list(job.cuda_archs)
    if getattr(args, "variant", None):
        variant = contract.parse_build_variant(args.variant)
    return Expectation(variant=variant, arch=arch, cuda_archs=archs, require_cuobjdump=bool(args.require_cuobjdump))


def run(args: argparse.Namespace) -> int:
    """Entry point of ``python -m build_matrix check``."""
    try:
        expectation = _expectation_from_args(args)
    except BuildMatrixError:
        raise  # an unknown --job: cli.main prints it with its own exit code
    except (ValueError, contract.InvalidVariant) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    only = CHECKS
    if args.only:
        only = tuple(c.strip() for c in args.only.split(",") if c.strip())
        unknown = [c for c in only if c not in CHECKS]
        if unknown:
            print(f"error: unknown check(s) {unknown}; choose from {', '.join(CHECKS)}", file=sys.stderr)
            return EXIT_USAGE
    cuobjdump = args.cuobjdump or find_cuobjdump()
    worst = 0
    report = []
    wheels: list[Path] = []
    for given in args.wheels:
        if given.is_dir():
            found = sorted(p for p in given.glob("*.whl") if p.is_file())
            if not found:
                print(f"error: no *.whl in directory {str(given)!r}", file=sys.stderr)
                worst = CheckError.exit_code
            wheels += found
        else:
            wheels.append(given)
    for wheel in wheels:
        try:
            results = check_wheel(wheel, expectation, only=only, cuobjdump=cuobjdump)
        except WheelUnreadable as exc:
            print(f"error: {exc}", file=sys.stderr)
            worst = CheckError.exit_code
            continue
        failed = [r for r in results if r.status == "fail"]
        report.append({"wheel": str(wheel), "ok": not failed, "results": [dataclasses.asdict(r) for r in results]})
        if not args.json:
            print(f"{wheel.name}: {'OK' if not failed else 'FAILED (' + ', '.join(r.check for r in failed) + ')'}")
            for r in results:
                print(r.line())
        if failed:
            worst = CheckError.exit_code
    if args.json:
        print(json.dumps(report, indent=2))
    return worst
