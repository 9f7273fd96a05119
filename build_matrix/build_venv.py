"""The build venv of a native build (``python -m build_matrix build --native``): created or reused,
the build tools and exactly the job's torch installed, and the torch actually installed verified
against the job's variant (torch minor, CUDA build, C++ ABI; a stable-ABI job: any torch >= the
target of its family) -- a wrong torch fails here, not as an ``undefined symbol`` later.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Optional, TypedDict

from packaging.version import InvalidVersion, Version

import causal_conv1d_contract as contract
from build_matrix.errors import BuildError
from causal_conv1d_contract.net import index_reachable

if TYPE_CHECKING:  # native imports this module
    from build_matrix.native import BuildOptions
    from build_matrix.plan import Job

__all__ = [
    "BUILD_TOOLS",
    "say",
    "run_step",
    "venv_python",
    "ensure_venv",
    "install_torch",
    "torch_facts",
    "verify_torch",
]

#: Build-environment packages besides torch: pyproject's [build-system] requires plus ninja.
BUILD_TOOLS = ("setuptools>=77.0.3,<85", "wheel", "packaging>=24", "ninja")


def say(msg: str) -> None:
    print(f"[build] {msg}", flush=True)


def run_step(
    cmd: list[str], *, what: str, env: Optional[dict[str, str]] = None, cwd: Optional[Path] = None, fix: str = ""
) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    except OSError as exc:
        raise BuildError(f"{what} failed: cannot run {cmd[0]!r} ({exc}).{(' ' + fix) if fix else ''}") from None
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        raise BuildError(f"{what} failed (exit {proc.returncode}).{(' ' + fix) if fix else ''}\n{tail}")
    return proc


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def ensure_venv(venv: Path, python: str) -> Path:
    py = venv_python(venv)
    if py.exists():
        say(f"reusing venv {venv}")
        return py
    say(f"creating venv {venv} ({python})")
    run_step(
        [python, "-m", "venv", str(venv)],
        what=f"creating a venv with {python}",
        fix="Install the venv module (apt-get install python3-venv) or pass --python.",
    )
    return py


def _torch_spec(job: Job, opts: BuildOptions) -> str:
    return opts.torch_spec or f"torch=={job.torch_version}"


def _reachable(url: str, timeout: float = 8.0) -> bool:
    return index_reachable(url, timeout)


def _index_args(job: Job, opts: BuildOptions) -> list[str]:
    """``--extra-index-url`` for torch: an explicit --torch-index-url always; the job's PyTorch
    index only when it answers (an unreachable index costs pip several retries per package)."""
    if opts.torch_index_url is not None:
        return ["--extra-index-url", opts.torch_index_url] if opts.torch_index_url else []
    url = job.torch_index_url
    if url and not _reachable(url):
        # the user named the torch, or the job is a CUDA one (PyPI's Linux torch is a CUDA build, and a
        # mirror may hold the job's): pip's configured indexes, verified against the job after the install
        if opts.torch_spec or job.accel != "cpu":
            say(
                f"the job's torch index {url} is unreachable from here: installing {_torch_spec(job, opts)} from "
                "pip's configured indexes (verified against the job below; --torch-index-url overrides)"
            )
            return []
        # A CPU job is refused before anything is installed: pip's configured indexes give a CUDA build of
        # torch (PyPI's Linux torch, GBs), which the check after the install would refuse.
        raise BuildError(
            f"the job's torch index {url} is unreachable from here, and pip's configured indexes would install "
            f"some other build of {_torch_spec(job, opts)} (PyPI's torch on Linux is a CUDA build) that job "
            f"{job.id} cannot use. Pass --torch-spec with a torch of the job's build that you can reach, e.g. "
            f"--torch-spec 'torch=={job.torch_version}+{job.accel}' --torch-index-url <a mirror of {url}>, or a "
            "local torch wheel path as --torch-spec with --torch-index-url ''"
        )
    return ["--extra-index-url", url] if url else []


def install_torch(py: Path, job: Job, opts: BuildOptions) -> None:
    spec = _torch_spec(job, opts)
    index = _index_args(job, opts)
    say(
        f"installing {spec} and the build tools {' '.join(BUILD_TOOLS)}"
        + (f" (extra index {index[1]})" if index else " (pip's configured indexes)")
    )
    start = time.monotonic()
    run_step(
        [str(py), "-m", "pip", "install", "--disable-pip-version-check", "--upgrade", *BUILD_TOOLS],
        what="installing the build tools",
        fix="Check pip's index configuration (pip config list).",
    )
    run_step(
        [str(py), "-m", "pip", "install", "--disable-pip-version-check", *index, spec],
        what=f"installing {spec}",
        fix=(
            f"Check that {spec} exists for this Python/platform; override with --torch-spec "
            f"(e.g. 'torch=={job.torch_version}+{job.accel}') and --torch-index-url "
            f"(e.g. https://download.pytorch.org/whl/{job.accel}; '' for pip's configured indexes)."
        ),
    )
    say(f"installed in {time.monotonic() - start:.0f} s")


class TorchFacts(TypedDict):
    """What the build venv's torch says of itself."""

    version: str
    cuda: Optional[str]
    cxx11_abi: bool
    hip: Optional[str]


def torch_facts(py: Path) -> TorchFacts:
    code = (
        "import json, torch; print(json.dumps({'version': torch.__version__, 'cuda': torch.version.cuda, "
        "'cxx11_abi': bool(torch._C._GLIBCXX_USE_CXX11_ABI), 'hip': getattr(torch.version, 'hip', None)}))"
    )
    proc = run_step(
        [str(py), "-c", code],
        what="importing torch in the build venv",
        fix="The torch that pip installed does not import; try another --torch-spec.",
    )
    facts: TorchFacts = json.loads(proc.stdout.strip().splitlines()[-1])
    return facts


def verify_torch(job: Job, facts: TorchFacts, opts: BuildOptions) -> None:
    if getattr(job, "stable_abi", False):
        return _verify_stable_torch(job, facts)
    variant = job.compiled_against  # a per-minor job compiles against its own variant
    try:
        v = Version(facts["version"])
    except InvalidVersion:
        raise BuildError(f"torch reports an invalid version {facts['version']!r}") from None
    problems = []
    if (v.major, v.minor) != tuple(variant.torch_minor):
        problems.append(f"torch {facts['version']} is not torch {variant.torch}")
    accel = contract.accel_from_cuda(facts["cuda"]) if not facts.get("hip") else "rocm"
    if accel != variant.accel:
        problems.append(f"torch {facts['version']} is a {accel} build, the job needs {variant.accel}")
    if facts["cxx11_abi"] != variant.abi:
        problems.append(f"torch {facts['version']} uses cxx11 ABI={facts['cxx11_abi']}, {variant} needs {variant.abi}")
    if problems:
        raise BuildError(
            "the installed torch does not match job "
            + job.id
            + ": "
            + "; ".join(problems)
            + f". Pass --torch-spec 'torch=={variant.torch}.*+{variant.accel}' --torch-index-url "
            f"https://download.pytorch.org/whl/{variant.accel} (or a local wheel path as --torch-spec)."
        )


def _verify_stable_torch(job: Job, facts: TorchFacts) -> None:
    """A stable-ABI job compiles against any torch >= the target of the wheel's family: the
    planned one (job.torch_version), or another one given with --torch-spec (the C++ ABI does not matter)."""
    variant = job.variant
    assert isinstance(variant, contract.StableVariant), f"{job.id} is not a stable-ABI job"
    try:
        v = Version(facts["version"])
    except InvalidVersion:
        raise BuildError(f"torch reports an invalid version {facts['version']!r}") from None
    running = contract.Variant(
        (v.major, v.minor), contract.accel_from_cuda(facts["cuda"]) if not facts.get("hip") else "cpu"
    )
    problem = None if not facts.get("hip") else f"torch {facts['version']} is a ROCm build"
    problem = problem or variant.mismatch(facts["version"], facts["cuda"])
    if problem is None and running.torch_minor != tuple(job.compiled_against.torch_minor):
        say(
            f"building {variant} against torch {facts['version']} instead of the planned {job.torch_version} "
            "(any torch >= the stable target of the wheel's family builds the same ABI)"
        )
    if problem:
        raise BuildError(
            f"the installed torch does not match job {job.id}: {problem}. Pass --torch-spec "
            f"'torch=={job.torch_version}' --torch-index-url https://download.pytorch.org/whl/{job.accel} "
            "(or a local torch wheel of that family as --torch-spec)."
        )
