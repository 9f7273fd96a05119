"""``python -m causal_conv1d doctor [--json]``: diagnose this machine and this installation.

Reports torch (version, CUDA/CPU/ROCm build, C++ ABI), GPUs and their compute capabilities, nvcc,
the host compiler, this package's build record and whether it matches the running torch, the
variant this machine needs (for torch >= 2.10: the stable-ABI wheel of its CUDA major or CPU, served
from ``whl/stable2.10-<family>/`` whatever the torch minor), whether the index has a wheel for it (one request, short timeout,
never fatal offline) and the exact pip and uv commands. The CPU stable wheel on a CUDA torch is a valid
install with CPU kernels only: a note (not a problem) says so and gives the command for the CUDA wheel.

Runs on broken installs: it needs neither the compiled extension nor ``packaging`` (without
``packaging`` the index check matches platform tags by OS and CPU only, not the glibc version). It does not import
``build_support`` (not shipped in wheels).

Runs before any install, too: the site serves this module, ``_guard`` and the contracts as one
stdlib-only zip application, ``<site>/doctor.pyz`` (index_site/doctor_app.py; ``python doctor.pyz``),
where they form the package ``causal_conv1d_doctor`` -- hence the relative import of ``_guard``. It
then finds an installed causal-conv1d without importing it first (its build record by
``importlib.util.find_spec``), reports "not installed" without calling that a problem, and asks the
site it was downloaded from (``site.json`` in the zip) unless ``CAUSAL_CONV1D_INDEX_URL`` says otherwise.

A broken install (a build for another torch, a damaged build record) gets commands that repair it:
``--force-reinstall --no-deps`` and the exact version (a plain install would say "Requirement
already satisfied"). No torch at all gets the command for torch from PyTorch's index (never PyPI's
default torch, a CUDA build on Linux) with the CPU wheel, and the landing page for any other build.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
from typing import Optional, TypedDict

import causal_conv1d_contract as contract
from causal_conv1d_contract import commands as _commands
from causal_conv1d_contract import net

from . import _guard  # causal_conv1d._guard, or causal_conv1d_doctor._guard in doctor.pyz

__all__ = ["collect", "format_text", "main", "INDEX_TIMEOUT_S", "STANDALONE"]

INDEX_TIMEOUT_S = 5.0
#: Whether this runs from doctor.pyz (package causal_conv1d_doctor) rather than an installed package.
STANDALONE = __package__ != contract.DIST_NAME
#: doctor.pyz's record of the site that served it (index_site/doctor_app.py writes it).
SITE_FILE = "site.json"


class GpuInfo(TypedDict):
    index: int
    name: str
    capability: str


class TorchSection(TypedDict, total=False):
    """``importable`` always; ``error`` when it is not; the rest when it is (``gpu_error`` when asking
    CUDA for the GPUs failed)."""

    importable: bool
    error: str
    version: str
    cuda: Optional[str]
    hip: Optional[str]
    build: str
    cxx11_abi: Optional[bool]
    location: str
    gpus: list[GpuInfo]
    gpu_error: str


class NvccSection(TypedDict):
    path: Optional[str]
    version: Optional[str]
    cuda_home: Optional[str]


class CompilerSection(TypedDict):
    path: Optional[str]
    version: Optional[str]


class RecordSection(TypedDict, total=False):
    """The build record and how it compares with the running torch (``error``: a damaged record;
    ``kind``: a record that was read)."""

    path: Optional[str]
    status: str
    error: str
    record: Optional[contract.BuildRecord]
    mismatches: list[str]
    kind: str
    limitation: Optional[str]


class InstallSection(TypedDict):
    installed_version: Optional[str]
    prebuilt: Optional[dict[str, object]]  # PREBUILT.json of a wheel the sdist found on the index


class ImportSection(TypedDict, total=False):
    ok: bool
    error: Optional[str]
    build_mismatch: bool
    installed: bool  # only when False: doctor.pyz found no installed package


class IndexResult(TypedDict, total=False):
    url: str
    has_wheel: Optional[bool]
    wheel: Optional[str]
    detail: Optional[str]
    also_checked: str  # the torch minor's own page, asked too when the family page had no wheel


# ``collect()``: what ``--json`` prints, key for key (functional form: ``import`` is a keyword).
_Report = TypedDict(
    "_Report",
    {
        "python": str,
        "platform": str,
        "machine": str,
        "torch": TorchSection,
        "nvcc": NvccSection,
        "compiler": CompilerSection,
        "build_record": RecordSection,
        "installed": InstallSection,
        "import": ImportSection,
        "variant": Optional[str],
        "wheel_variant": Optional[str],
        "wheel_kind": Optional[str],
        "index": Optional[IndexResult],
        "commands": Optional[dict[str, str]],
        "notes": list[str],
        "problems": list[str],
    },
)


class Report(_Report, total=False):
    index_base: str  # the site asked (set once the settings are read)


def _site_base() -> str:
    """``CAUSAL_CONV1D_INDEX_URL`` when set; else, in doctor.pyz, the site that served it; else the default."""
    if os.environ.get(contract.ENV_INDEX_URL, "").strip() or not STANDALONE:
        return contract.index_base()
    try:
        from importlib import resources  # noqa: PLC0415

        site = json.loads(resources.files(__package__).joinpath(SITE_FILE).read_text(encoding="utf-8"))["site_url"]
    except (OSError, ValueError, KeyError, TypeError, ModuleNotFoundError):
        return contract.index_base()
    return contract.site_base(site) if isinstance(site, str) and site else contract.index_base()


def _installed_package_dir() -> Optional[str]:
    """The directory of the installed ``causal_conv1d`` package, found without importing it; None if absent."""
    from importlib.util import find_spec  # noqa: PLC0415

    try:
        spec = find_spec(contract.DIST_NAME)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def _run(cmd: list[str], timeout: float = 20) -> Optional[str]:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout or out.stderr).strip() or None


def torch_section() -> TorchSection:
    try:
        import torch  # noqa: PLC0415
    except Exception as exc:  # noqa: BLE001  (a broken torch raises all sorts)
        return {"importable": False, "error": f"{type(exc).__name__}: {exc}"}
    abi = getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", None)
    hip = getattr(torch.version, "hip", None)
    info: TorchSection = {
        "importable": True,
        "version": str(torch.__version__),
        "cuda": torch.version.cuda,
        "hip": hip,
        "build": "rocm" if hip else ("cuda" if torch.version.cuda else "cpu"),
        "cxx11_abi": None if abi is None else bool(abi),
        "location": os.path.dirname(torch.__file__),
        "gpus": [],
    }
    try:
        if torch.cuda.is_available():
            for i in range(torch.cuda.device_count()):
                major, minor = torch.cuda.get_device_capability(i)
                info["gpus"].append(
                    {"index": i, "name": torch.cuda.get_device_name(i), "capability": f"{major}.{minor}"}
                )
    except Exception as exc:  # noqa: BLE001
        info["gpu_error"] = f"{type(exc).__name__}: {exc}"
    return info


def nvcc_section() -> NvccSection:
    nvcc = None
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            cand = os.path.join(os.environ[var], "bin", "nvcc.exe" if os.name == "nt" else "nvcc")
            if os.path.isfile(cand):
                nvcc = cand
                break
    nvcc = nvcc or shutil.which("nvcc")
    if not nvcc and os.path.isfile("/usr/local/cuda/bin/nvcc"):
        nvcc = "/usr/local/cuda/bin/nvcc"
    if not nvcc:
        return {"path": None, "version": None, "cuda_home": os.environ.get("CUDA_HOME")}
    out = _run([nvcc, "--version"]) or ""
    m = re.search(r"release (\d+\.\d+)", out)
    return {"path": nvcc, "version": m.group(1) if m else None, "cuda_home": os.environ.get("CUDA_HOME")}


def compiler_section() -> CompilerSection:
    if os.name == "nt":
        cl = shutil.which("cl")
        return {"path": cl, "version": None if cl else None}
    name = os.environ.get("CXX") or "c++"
    path = shutil.which(name)
    if not path:
        return {"path": None, "version": None}
    out = _run([path, "--version"]) or ""
    return {"path": path, "version": out.splitlines()[0] if out else None}


def record_section(torch_info: TorchSection) -> RecordSection:
    where = _installed_package_dir() if STANDALONE else None
    if STANDALONE and where is None:
        return {"path": None, "status": "not installed", "record": None, "mismatches": [], "limitation": None}
    from pathlib import Path  # noqa: PLC0415

    path = Path(where) / contract.BUILD_INFO_FILENAME if where else _guard.record_path()
    try:
        record = _guard.read_build_record(path)
    except ImportError as exc:
        return {
            "path": str(path),
            "status": "damaged",
            "error": str(exc),
            "record": None,
            "mismatches": [],
            "limitation": None,
        }
    if record is None:
        return {
            "path": str(path),
            "status": "missing (a source tree or a dev build: nothing to compare)",
            "record": None,
            "mismatches": [],
            "limitation": None,
        }
    mism: list[str] = []
    lim: Optional[str] = None
    if torch_info.get("importable"):
        mism = _guard.mismatches(record, torch_info["version"], torch_info["cuda"], torch_info["cxx11_abi"])
        # loads, but lacks something here: the CPU stable wheel on a CUDA torch (CPU kernels only)
        lim = None if mism else _guard.limitation(record, torch_info["version"], torch_info["cuda"])
    return {
        "path": str(path),
        "status": "mismatch" if mism else "ok",
        "record": record,
        "mismatches": mism,
        "kind": _guard.record_kind(record),
        "limitation": lim,
    }


def install_section() -> InstallSection:
    from importlib import metadata  # noqa: PLC0415

    try:
        dist = metadata.distribution("causal-conv1d")
    except metadata.PackageNotFoundError:
        return {"installed_version": None, "prebuilt": None}
    prebuilt = None
    try:
        text = dist.read_text("PREBUILT.json")
        prebuilt = json.loads(text) if text else None
    except (OSError, ValueError):
        prebuilt = None
    return {"installed_version": dist.version, "prebuilt": prebuilt}


def import_section() -> ImportSection:
    if STANDALONE and _installed_package_dir() is None:
        return {"ok": False, "error": None, "build_mismatch": False, "installed": False}
    pkg = sys.modules.get("causal_conv1d")
    err = getattr(pkg, "_IMPORT_ERROR", None) if pkg is not None else None
    if err is not None:
        return _import_failure(err)
    if pkg is not None and hasattr(pkg, "causal_conv1d_fn"):
        return {"ok": True, "error": None, "build_mismatch": False}
    try:
        import causal_conv1d._C  # noqa: F401,PLC0415
    except ImportError as exc:
        return _import_failure(exc)
    return {"ok": True, "error": None, "build_mismatch": False}


def _import_failure(err: BaseException) -> ImportSection:
    """``build_mismatch``: the guard refused the build (its reasons and fix are reported once, as problems)."""
    # by name: doctor.pyz's _guard is another module than the installed package's, whose error this is
    mismatch = any(cls.__name__ == _guard.BuildMismatch.__name__ for cls in type(err).__mro__)
    return {"ok": False, "error": f"{type(err).__name__}: {err}", "build_mismatch": mismatch}


def _compatible_platforms() -> Optional[set[str]]:
    """This interpreter's platform tags (``packaging``), or None where it is not installed."""
    try:
        from packaging import tags  # noqa: PLC0415
    except ImportError:
        return None
    return {t.platform for t in tags.sys_tags()}


def _platform_plausible(tag: str) -> bool:
    """Without ``packaging``: whether a wheel platform tag is for this OS and CPU (glibc version unchecked)."""
    here = sysconfig.get_platform().replace("-", "_").replace(".", "_")  # linux_x86_64, win_amd64
    if here.startswith("linux_"):
        arch = here[len("linux_") :]
        return tag.startswith(("manylinux", "linux_")) and tag.endswith("_" + arch)
    return tag == here


def _parse_wheel(filename: str) -> Optional[tuple[contract.BuildVariant, str, list[str]]]:
    """(variant, public version, platform tags) of one of our wheel names; None for anything else.

    Stdlib only: the wheel's runtime requirements are torch alone, so ``packaging`` may be missing
    (``contract.parse_wheel_name`` needs it).
    """
    if not filename.endswith(".whl"):
        return None
    parts = filename[: -len(".whl")].split("-")
    if len(parts) not in (5, 6) or parts[0] != contract.DIST_NAME:
        return None
    version, platforms = parts[1], parts[-1].split(".")
    public, _, label = version.partition("+")
    try:
        variant = contract.build_variant_from_local_version(label)
    except contract.InvalidVariant:
        return None
    return variant, public, platforms


def index_check(
    variant: contract.BuildVariant,
    base: str,
    timeout: float = INDEX_TIMEOUT_S,
    accept: Optional[tuple[contract.BuildVariant, ...]] = None,
) -> IndexResult:
    """One GET of the variant's project page (``causal_conv1d_contract.net``: proxies from the
    environment, file:// read directly): is this version's wheel there for this platform?
    ``accept``: the wheel variants that count (default: ``variant`` itself)."""
    accept = (variant,) if accept is None else accept
    url = contract.project_page_url(base, variant)
    result: IndexResult = {"url": url, "has_wheel": None, "wheel": None, "detail": None}
    try:
        resp = net.fetch_page(
            url, accept=net.ACCEPT_HTML, timeout=timeout, retries=1, user_agent="causal-conv1d-doctor"
        )
    except net.IndexClientError as exc:
        if exc.status is not None:
            result["has_wheel"] = False if exc.status == 404 else None
            result["detail"] = f"HTTP {exc.status}"
        else:
            result["detail"] = f"index unreachable ({exc}); offline?"
        return result
    try:
        page = net.parse_page(resp.body, resp.content_type, resp.url)
    except net.IndexClientError as exc:
        result["detail"] = f"unparsable page ({exc})"
        return result
    platforms = _compatible_platforms()
    for link in page.links:
        name = link.filename
        parsed_name = _parse_wheel(name)
        if parsed_name is None:
            continue
        w_variant, w_public, w_platforms = parsed_name
        fits = (set(w_platforms) & platforms) if platforms is not None else any(map(_platform_plausible, w_platforms))
        if w_variant in accept and w_public == contract.PACKAGE_VERSION and fits:
            result.update(has_wheel=True, wheel=name)
            return result
    result.update(has_wheel=False, detail=f"no {contract.PACKAGE_VERSION} wheel for this platform on the page")
    return result


def find_wheel(
    wanted: contract.BuildVariant, variant: contract.Variant, base: str
) -> tuple[IndexResult, contract.BuildVariant]:
    """(index result, page variant). For torch >= 2.10 the family page (``whl/stable2.10-cu13/``) first;
    when it has no wheel, the torch minor's own page, where the stable wheel or a per-minor wheel of
    that exact variant both count (a site from before stable wheels). Two requests at most."""
    result = index_check(wanted, base)
    if wanted is variant or result["has_wheel"] or not variant.is_official:
        return result, wanted
    fallback = index_check(variant, base, accept=(wanted, variant))
    if fallback["has_wheel"]:
        return fallback, variant
    result["also_checked"] = fallback["url"]
    return result, wanted


def _torch_pin(torch_version: Optional[str]) -> str:
    """``==2.13.0`` for the running ``2.13.0+cpu`` (the public part; ``==`` then accepts the installed
    local build and never replaces it); ``==X.Y.*`` when only the minor is known."""
    public = (torch_version or "").split("+", 1)[0]
    return f"=={public}" if public else ""


def commands(
    variant: contract.BuildVariant,
    base: str,
    torch_version: Optional[str] = None,
    torch_accel: Optional[str] = None,
    *,
    repair: bool = False,
) -> dict[str, str]:
    """The install commands for this machine's variant: torch (pinned to the running one) and our
    wheel together, from PyTorch's index of that accelerator and the variant's index. ``variant`` may
    be the stable-ABI family page's build; ``torch_accel`` then names the running torch's accelerator.

    ``repair``: an install that is there but broken (a build for another torch, a damaged record): the
    first commands replace it (``--force-reinstall --no-deps``, the exact version; torch untouched),
    since a plain install finds the same public version and changes nothing. The from-source command
    builds this project's sdist, pinned, from the site's ``source/`` index (never PyPI's package of
    the same name)."""
    pin = _torch_pin(torch_version) or f"=={variant.torch}.*"
    full = f"{contract.PACKAGE_VERSION}+{contract.local_version(variant)}"
    cmds = _commands.install_commands(base, variant, pin, torch_accel=torch_accel)
    exact = _commands.install_commands(base, variant, pin, version=full, torch_accel=torch_accel)
    source = _commands.sdist_commands(base)["pip"] + "  # index first, else a local build"
    if repair:
        fix = _commands.repair_commands(base, variant, full)
        return {"pip": fix["pip"], "uv": fix["uv"], "from_source": source, "fresh_venv": exact["pip"]}
    return {
        "pip": cmds["pip"],
        "pip_exact": exact["pip"],
        "uv": cmds["uv"],
        "uv_pyproject": cmds["uv_pyproject"],
        "from_source": source,
    }


def no_torch_commands(base: str) -> dict[str, str]:
    """No torch yet: torch from PyTorch's CPU index and the CPU stable-ABI wheel in one command (never
    PyPI's default torch, which on Linux is a CUDA build); ``choose`` is the landing page, for a CUDA build."""
    cpu = contract.StableVariant("cpu")
    spec = f">={cpu.torch}"
    cmds = _commands.install_commands(base, cpu, spec, torch_accel="cpu")
    return {"pip": cmds["pip"], "uv": cmds["uv"], "choose": f"{contract.site_base(base)}index.html"}


def _wheel_kind(wanted: contract.BuildVariant) -> str:
    if isinstance(wanted, contract.StableVariant):
        accel = "CPU" if wanted.cuda_major is None else f"CUDA {wanted.cuda_major}"
        return f"stable ABI: one wheel for every torch >= {wanted.torch} with {accel}"
    return f"per torch minor: torch {wanted.torch} only"


def collect(check_index: bool = True) -> Report:
    t = torch_section()
    report: Report = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "torch": t,
        "nvcc": nvcc_section(),
        "compiler": compiler_section(),
        "build_record": record_section(t),
        "installed": install_section(),
        "import": import_section(),
        "variant": None,
        "wheel_variant": None,
        "wheel_kind": None,
        "index": None,
        "commands": None,
        "notes": [],
        "problems": [],
    }
    problems: list[str] = report["problems"]
    try:
        base = _site_base()
    except contract.InvalidSetting as exc:  # said as a problem; the default site is asked instead
        problems.append(f"{exc} (asking the default site, {contract.DEFAULT_INDEX_URL}, instead)")
        base = contract.DEFAULT_INDEX_URL
    if not t.get("importable"):
        problems.append(f"torch is not importable ({t.get('error')}). {_commands.no_torch_advice(base)}")
        report["commands"] = no_torch_commands(base)
    if t.get("build") == "rocm":
        problems.append("this torch is a ROCm build: causal-conv1d's GPU kernels are CUDA-only (CPU ops only)")
    rec = report["build_record"]
    if rec["status"] == "damaged":
        problems.append(rec["error"])
    for m in rec["mismatches"]:
        problems.append(f"build mismatch: {m}")
    installed = report["import"].get("installed", True)
    if installed and not report["import"]["ok"] and not (report["import"]["build_mismatch"] and rec["mismatches"]):
        problems.append(f"import causal_conv1d fails: {report['import']['error']}")
    nv = report["nvcc"]
    if t.get("cuda") and nv.get("version") and nv["version"].split(".")[0] != str(t["cuda"]).split(".")[0]:
        problems.append(
            f"nvcc {nv['version']} and torch's CUDA {t['cuda']} differ in the major version "
            "(a local build would fail; prebuilt wheels are unaffected)"
        )
    report["index_base"] = base
    broken = installed and bool(rec["mismatches"] or rec["status"] == "damaged" or not report["import"]["ok"])
    if t.get("importable") and not t.get("hip"):
        try:
            variant = contract.Variant.from_torch(t["version"], t["cuda"], t["cxx11_abi"])
        except contract.InvalidVariant as exc:
            problems.append(str(exc))
            return report
        report["variant"] = variant.name
        wanted = _guard.wheel_variant(variant)  # torch >= 2.10: stable2.10-<family>, any C++ ABI
        report["wheel_variant"] = wanted.name
        report["wheel_kind"] = _wheel_kind(wanted)
        if wanted.is_official:
            page = wanted
            if check_index:
                report["index"], page = find_wheel(wanted, variant, base)
            report["commands"] = commands(page, base, t["version"], torch_accel=variant.accel, repair=broken)
        else:
            report["commands"] = {"from_source": commands(variant, base)["from_source"]}
            problems.append(
                f"variant {variant.name}: this torch's C++ ABI differs from PyTorch's official build; "
                "no prebuilt wheels exist for it (build from source)"
            )
        if rec["mismatches"]:
            problems.append(_guard.fix_instructions(rec["record"], t["version"], t["cuda"], t["cxx11_abi"], base=base))
        if rec.get("limitation"):  # a valid install (the CPU wheel on a CUDA torch): a note, not a problem
            cmds = report["commands"]
            how = (
                f"for the CUDA kernels install the {wanted.name} wheel:  {cmds['pip_exact']}"
                if "pip_exact" in cmds
                else f"for the CUDA kernels build from source:  {cmds['from_source']}"
            )
            report["notes"].append(f"{rec['limitation']}; {how}")
    return report


def _import_line(r: Report) -> str:
    imp = r["import"]
    if imp["ok"]:
        return "ok"
    if not imp.get("installed", True):
        return "causal-conv1d is not installed (the commands below install it)"
    if imp.get("build_mismatch") and r["build_record"]["mismatches"]:
        return "FAILS: the build does not match the installed torch (see problems)"
    return f"FAILS: {imp['error']}"


def format_text(r: Report) -> str:
    t = r["torch"]
    lines = [f"python      {r['python']} on {r['platform']}"]
    if t.get("importable"):
        accel = f"ROCm/HIP {t['hip']}" if t.get("hip") else (f"CUDA {t['cuda']}" if t.get("cuda") else "CPU only")
        lines.append(
            f"torch       {t['version']} ({accel}, _GLIBCXX_USE_CXX11_ABI={int(bool(t['cxx11_abi']))}) at {t['location']}"
        )
        gpus = (
            ", ".join(f"{g['name']} (sm {g['capability']})" for g in t["gpus"]) or t.get("gpu_error") or "none visible"
        )
        lines.append(f"GPUs        {gpus}")
    else:
        lines.append(f"torch       not importable: {t.get('error')}")
    nv = r["nvcc"]
    lines.append(f"nvcc        {nv['version'] or '-'} at {nv['path']}" if nv["path"] else "nvcc        not found")
    cc = r["compiler"]
    lines.append(f"compiler    {cc['version'] or '-'} ({cc['path']})" if cc["path"] else "compiler    not found")
    rec = r["build_record"]
    lines.append(f"build       {rec['status']}" + (f" [{rec['path']}]" if rec["path"] else ""))
    if rec.get("kind"):
        lines.append(f"            kind: {rec['kind']}")
    if rec["record"]:
        b = rec["record"]
        lines.append(
            f"            {b.get('version')} variant {b.get('variant')}, torch {b.get('torch_version')}, "
            f"CUDA {b.get('cuda_version') or '-'}, archs {','.join(b.get('cuda_archs') or []) or '-'}, "
            f"platform {b.get('platform')}"
        )
    inst = r["installed"]
    if inst["installed_version"]:
        src = f" (prebuilt {inst['prebuilt']['filename']})" if inst.get("prebuilt") else ""
        lines.append(f"installed   causal-conv1d {inst['installed_version']}{src}")
    lines.append(f"import      {_import_line(r)}")
    lines.append(f"variant     {r['variant'] or 'unknown'}")
    if r.get("wheel_variant"):
        lines.append(f"wheel       {r['wheel_variant']} ({r['wheel_kind']})")
    idx = r.get("index")
    if idx:
        state = {True: f"yes: {idx['wheel']}", False: f"no ({idx['detail']})", None: f"unknown ({idx['detail']})"}
        lines.append(f"index       {state[idx['has_wheel']]}  [{idx['url']}]")
    if r.get("commands"):
        cmds = r["commands"]
        lines.append("repair (replaces the installed build; torch is kept):" if "fresh_venv" in cmds else "install:")
        for key in ("pip", "pip_exact", "uv", "from_source"):
            if key in cmds:
                lines.append(f"  {cmds[key]}")
        if "fresh_venv" in cmds:
            lines.append(f"  in a fresh venv:  {cmds['fresh_venv']}")
        if "choose" in cmds:
            lines.append(f"  (CPU build; for a CUDA build choose your torch at {cmds['choose']})")
        if "uv_pyproject" in r["commands"]:
            lines.append("  uv project (pyproject.toml):")
            lines += [f"    {ln}".rstrip() for ln in r["commands"]["uv_pyproject"].splitlines()]
    if r.get("notes"):
        lines.append("notes:")
        lines += [f"  - {n}" for n in r["notes"]]
    if r["problems"]:
        lines.append("problems:")
        for p in r["problems"]:
            first, *rest = p.splitlines()
            lines.append(f"  - {first}")
            lines += [f"    {ln}" for ln in rest]
    else:
        lines.append("no problems found")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    import argparse  # noqa: PLC0415

    prog = "python doctor.pyz" if STANDALONE else "python -m causal_conv1d doctor"
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    ap.add_argument("--offline", action="store_true", help="do not query the index")
    args = ap.parse_args(argv)
    report = collect(check_index=not args.offline)
    print(json.dumps(report, indent=2, default=str) if args.json else format_text(report))
    return 1 if report["problems"] else 0
