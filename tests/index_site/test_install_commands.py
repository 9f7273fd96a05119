"""Every install command we print -- README, landing page, doctor, the import guard -- resolved by real
pip (``--dry-run --report``) and real uv (``uv pip compile``, ``uv lock``) against local fixtures: a
fake PyPI whose default torch is the CUDA build (a plain ``2.13.0``, as on PyPI), PyTorch-style
indexes with ``+cpu`` / ``+cuXYZ`` torch builds and our site. The command must give a torch of the
variant's build next to our wheel of that variant: never a CUDA torch with a CPU wheel or the reverse.

The site is the stable-ABI one: torch 2.7 has a per-minor wheel, torch >= 2.10 the stable-ABI wheels
of its family (``+cpu.stable2.10``, ``+cu13.stable2.10``), linked from the family pages and, through
the coverage, from the per-minor pages (``whl/torch2.13-cu130/``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import venv
import zipfile
from pathlib import Path
from typing import Optional

import pytest
from index_site_helpers import NOW, REPO_ROOT, serve

import causal_conv1d_contract as contract
from tests.helpers.wheels import write_wheel

pytestmark = pytest.mark.slow

PUBLIC_TORCH_INDEX = "https://download.pytorch.org/whl/"
UV = Path(sys.executable).with_name("uv")
#: (torch version, accel) of the fixtures: PyPI's plain version is the CUDA default build.
TORCHES = [
    ("2.14.0", "cpu"),
    ("2.14.0", "cu130"),
    ("2.13.0", "cpu"),
    ("2.13.0", "cu130"),
    ("2.7.1", "cu128"),
    ("2.7.1", "cpu"),
]
VARIANTS = ["torch2.13-cpu", "torch2.13-cu130", "torch2.7-cu128"]
#: the wheels published: per-minor below torch 2.10, stable-ABI families above
BUILDS = ["torch2.7-cu128", "stable2.10-cpu", "stable2.10-cu13"]
#: the landing page's "2.14 or newer" entry (the site knows 2.7 and 2.13): family page -> newest torch build
NEWER = {"stable2.10-cpu": "cpu", "stable2.10-cu13": "cu130"}


def _fake_torch(directory: Path, version: str) -> Path:
    """An installable, dependency-free wheel named torch ``version`` (``2.13.0+cpu``, or a plain ``2.13.0``)."""
    name = f"torch-{version}-py3-none-any.whl"
    di = f"torch-{version}.dist-info"
    files = {
        "torch/__init__.py": f"__version__ = {version!r}\n".encode(),
        f"{di}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n\n".encode(),
        f"{di}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    rec = "".join(
        f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}\n"
        for p, d in files.items()
    )
    files[f"{di}/RECORD"] = (rec + f"{di}/RECORD,,\n").encode()
    directory.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(directory / name, "w") as zf:
        for arc, data in files.items():
            zf.writestr(arc, data)
    return directory / name


def _simple_page(project_dir: Path) -> None:
    links = "".join(
        f'<a href="{contract.quote_path(w.name)}#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}">{w.name}</a>\n'
        for w in sorted(project_dir.glob("*.whl"))
    )
    (project_dir / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    """root/pypi/simple/torch/ (plain versions), root/pytorch/whl/<accel>/torch/, root/site/ (index_site)."""
    from index_site.cli import main

    root = tmp_path_factory.mktemp("indexes")
    for version, accel in TORCHES:
        _fake_torch(root / "pytorch" / "whl" / accel / "torch", f"{version}+{accel}")
        _fake_torch(root / "pypi" / "simple" / "torch", version)
    for d in [*(root / "pytorch" / "whl").glob("*/torch"), root / "pypi" / "simple" / "torch"]:
        _simple_page(d)
    wheels = root / "wheels"
    for name in BUILDS:
        v = contract.parse_build_variant(name)
        stable = isinstance(v, contract.StableVariant)
        minor = v.target if stable else v.torch_minor
        write_wheel(wheels, variant=name, requires_dist=(contract.torch_requirement(minor, stable=stable),))
    coverage = root / "coverage.json"
    coverage.write_text(
        json.dumps(
            {
                "platforms": ["linux-x86_64"],
                "rows": [
                    {
                        "torch": contract.Variant.parse(n).torch,
                        "accel": contract.Variant.parse(n).accel,
                        "variant": n,
                        "cells": {"linux-x86_64": {"status": "covered"}},
                    }
                    for n in VARIANTS
                ],
            }
        )
    )
    assert main(["build", str(wheels), "--out", str(root / "site"), "--coverage", str(coverage), "--now", NOW]) == 0
    with serve(root, negotiate=False) as served:
        yield root, served.url


@pytest.fixture(scope="module")
def empty_venv(tmp_path_factory) -> Path:
    """A fresh venv without torch (without pip, too: this tree's pip and uv drive it)."""
    path = tmp_path_factory.mktemp("empty") / "v"
    venv.EnvBuilder(with_pip=False).create(path)
    return path / "bin" / "python"


def _env(tmp: Path, server: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "CAUSAL_CONV1D_"))}
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_NO_CACHE_DIR="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_INDEX_URL=f"{server}pypi/simple/",  # "PyPI": where a command without an index goes
        UV_DEFAULT_INDEX=f"{server}pypi/simple/",
        UV_NO_CONFIG="1",
        UV_CACHE_DIR=str(tmp / "uv-cache"),
        UV_PYTHON_DOWNLOADS="never",
        NO_PROXY="127.0.0.1,localhost",
    )
    return env


def _local(command: str, server: str, site: str) -> list[str]:
    """The printed command, pointed at the fixtures instead of the public hosts."""
    text = command.replace(PUBLIC_TORCH_INDEX, f"{server}pytorch/whl/").replace(site, f"{server}site/")
    return shlex.split(text)


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    """(requirements, options) of ``pip install ...`` / ``uv pip install ...``."""
    takes_value = {
        "--index-url",
        "--extra-index-url",
        "--index",
        "--only-binary",
        "--no-binary",
        "-i",
        "--default-index",
        "--no-build-isolation-package",
    }
    reqs, opts, i = [], [], 0
    while i < len(argv):
        a = argv[i]
        if a in takes_value:
            opts += [a, argv[i + 1]]
            i += 2
        elif a.startswith("-"):
            opts.append(a)
            i += 1
        else:
            reqs.append(a)
            i += 1
    return reqs, opts


def _resolver(argv: list[str], what: str, server: str, tmp: Path, cwd: Path, stdin: Optional[str] = None) -> str:
    """A resolver's stdout against the local server; the test fails (naming ``what``) when it fails."""
    proc = subprocess.run(
        argv, input=stdin, env=_env(tmp, server), capture_output=True, text=True, timeout=300, cwd=cwd
    )
    assert proc.returncode == 0, (what, proc.stderr[-3000:])
    return proc.stdout


def resolve_pip(command: str, fixtures, python: Path, tmp: Path, site: str) -> dict[str, str]:
    _root, server = fixtures
    argv = _local(command, server, site)
    assert argv[:2] == ["pip", "install"], command
    out = _resolver(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--dry-run",
            "--quiet",
            "--report",
            "-",
            *argv[2:],
        ],
        command,
        server,
        tmp,
        tmp,
    )
    return {i["metadata"]["name"]: i["metadata"]["version"] for i in json.loads(out)["install"]}


def resolve_uv(command: str, fixtures, python: Path, tmp: Path, site: str) -> dict[str, str]:
    _root, server = fixtures
    argv = _local(command, server, site)
    assert argv[:3] == ["uv", "pip", "install"], command
    reqs, opts = _split(argv[3:])
    out = _resolver(
        [str(UV), "pip", "compile", "-", "--quiet", "--no-header", "--python", str(python), *opts],
        command,
        server,
        tmp,
        tmp,
        stdin="\n".join(reqs) + "\n",
    )
    return dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", out, re.M))


def resolve_uv_project(snippet: str, fixtures, tmp: Path, site: str) -> dict[str, str]:
    _root, server = fixtures
    text = snippet.replace(PUBLIC_TORCH_INDEX, f"{server}pytorch/whl/").replace(site, f"{server}site/")
    assert text.startswith("[project]\n"), snippet
    project = tmp / "proj"
    project.mkdir(exist_ok=True)
    (project / "pyproject.toml").write_text(
        '[project]\nname = "app"\nversion = "0"\nrequires-python = ">=3.11"\n'
        + text[len("[project]\n") :]
        + "\n\n[tool.uv]\nenvironments = [\"sys_platform == 'linux' and platform_machine == 'x86_64'\"]\n"
    )
    _resolver([str(UV), "lock", "--python", sys.executable], snippet, server, tmp, project)
    lock = (project / "uv.lock").read_text()
    return dict(re.findall(r'\[\[package\]\]\nname = "([^"]+)"\nversion = "([^"]+)"', lock))


def assert_uv_commands_match(cmds: dict[str, str], fixtures, python: Path, tmp: Path, variant: str) -> None:
    """The ``uv`` and ``uv_pyproject`` commands resolve the variant's matching pair (the default site)."""
    site = contract.DEFAULT_INDEX_URL
    assert_matching_pair(resolve_uv(cmds["uv"], fixtures, python, tmp, site), variant, cmds["uv"])
    project = cmds["uv_pyproject"]
    assert_matching_pair(resolve_uv_project(project, fixtures, tmp, site), variant, project)


def assert_matching_pair(resolved: dict[str, str], variant: str, command: str) -> None:
    """torch X.Y of the variant's build next to the wheel that serves it: the variant's own below torch
    2.10, its family's stable-ABI wheel from 2.10 on."""
    v = contract.Variant.parse(variant)
    torch = resolved.get("torch")
    ours = resolved.get(contract.PROJECT_NAME)
    assert torch is not None and ours is not None, (command, resolved)
    assert torch.startswith(v.torch + ".") and torch.endswith("+" + v.accel), (
        f"{command}\n  resolves torch {torch} next to causal-conv1d {ours}: not a torch {v.torch} {v.accel} build"
    )
    build = contract.stable_variant_for(v) or v
    assert ours == f"{contract.PACKAGE_VERSION}+{contract.local_version(build)}", (command, resolved)


# --- the commands, as each part prints them ----------------------------------------------------------


def landing_commands(site_dir: Path) -> dict[str, dict]:
    html = (site_dir / "index.html").read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script id="site-data" type="application/json">(.*?)</script>', html, re.S).group(1))
    return data["commands"]


def readme_commands() -> list[tuple[str, str]]:
    """(command, variant) of every pip / uv install command in the README that names a variant index."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8").replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = re.sub(r"\s+", " ", line.strip())
        m = re.search(r"whl/(torch\d+\.\d+-(?:cpu|cu\d+))/", line)
        if m and line.startswith(("pip install", "uv pip install")):
            out.append((line, m.group(1)))
    return out


def guard_commands(record_variant: str, torch_version: str, cuda: str | None) -> list[str]:
    import importlib.util

    spec = importlib.util.spec_from_file_location("_guard_for_test", REPO_ROOT / "causal_conv1d" / "_guard.py")
    g = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(g)  # type: ignore[union-attr]
    # (the package itself needs torch; the guard imports only the torch-free causal_conv1d_contract)

    record = {
        "version": "1.7.0.post1+cu128.torch2.7",
        "variant": record_variant,
        "torch_version": "2.7.1+cu128",
        "cuda_version": "12.8",
        "cxx11_abi": True,
    }
    text = g.fix_instructions(record, torch_version, cuda, True)
    found = re.findall(r"Install the matching build:\s+(pip install .*)", text) + re.findall(
        r"\(uv:\s+(uv pip install .*)\)", text
    )
    assert len(found) == 2, text
    return found


@pytest.mark.parametrize("variant", VARIANTS)
def test_landing_page_commands_install_a_matching_pair(fixtures, empty_venv, tmp_path, variant):
    root, _server = fixtures
    cmds = landing_commands(root / "site")[variant]["wheel"]
    assert_matching_pair(
        resolve_pip(cmds["pip"], fixtures, empty_venv, tmp_path, contract.DEFAULT_INDEX_URL), variant, cmds["pip"]
    )
    assert_uv_commands_match(cmds, fixtures, empty_venv, tmp_path, variant)


@pytest.mark.parametrize("family", sorted(NEWER))
def test_landing_page_newer_torch_commands_install_the_stable_wheel(fixtures, empty_venv, tmp_path, family):
    """The "2.14 or newer" entry (a torch the site has no per-minor data for): the family page and
    torch>=2.14 from PyTorch's index of the family's newest build."""
    root, _server = fixtures
    cmds = landing_commands(root / "site")[family]["wheel"]
    accel = NEWER[family]
    want = {
        "torch": f"2.14.0+{accel}",
        contract.PROJECT_NAME: f"{contract.PACKAGE_VERSION}+{contract.local_version(contract.StableVariant.parse(family))}",
    }
    assert f"whl/{family}/" in cmds["pip"] and '"torch>=2.14"' in cmds["pip"], cmds["pip"]
    got = resolve_pip(cmds["pip"], fixtures, empty_venv, tmp_path, contract.DEFAULT_INDEX_URL)
    assert {k: got.get(k) for k in want} == want, (cmds["pip"], got)
    got = resolve_uv(cmds["uv"], fixtures, empty_venv, tmp_path, contract.DEFAULT_INDEX_URL)
    assert {k: got.get(k) for k in want} == want, (cmds["uv"], got)
    got = resolve_uv_project(cmds["uv_pyproject"], fixtures, tmp_path, contract.DEFAULT_INDEX_URL)
    assert {k: got.get(k) for k in want} == want, (cmds["uv_pyproject"], got)


def test_readme_commands_install_a_matching_pair(fixtures, empty_venv, tmp_path):
    found = readme_commands()
    assert {c.split()[0] for c, _ in found} == {"pip", "uv"}, found  # both frontends are shown
    for command, variant in found:
        resolve = resolve_pip if command.startswith("pip ") else resolve_uv
        assert_matching_pair(
            resolve(command, fixtures, empty_venv, tmp_path, contract.DEFAULT_INDEX_URL), variant, command
        )


@pytest.mark.parametrize(
    "variant,torch,cuda", [("torch2.13-cpu", "2.13.0+cpu", None), ("torch2.13-cu130", "2.13.0+cu130", "13.0")]
)
def test_doctor_and_guard_commands_install_a_matching_pair(fixtures, empty_venv, tmp_path, variant, torch, cuda):
    """In a venv where that torch is missing (the command was copied elsewhere), they bring the same torch
    build; where it is installed, the pin (its public version) keeps it."""
    v = contract.Variant.parse(variant)
    from causal_conv1d import _guard, doctor  # needs torch: this tree's venv has it

    # as doctor calls it: the build that serves this torch (its stable family from torch 2.10 on) and
    # the running torch's accelerator for PyTorch's index
    build = _guard.wheel_variant(v)
    cmds = doctor.commands(build, contract.DEFAULT_INDEX_URL, torch, torch_accel=v.accel)
    for key in ("pip", "pip_exact"):
        assert_matching_pair(
            resolve_pip(cmds[key], fixtures, empty_venv, tmp_path, contract.DEFAULT_INDEX_URL), variant, cmds[key]
        )
    assert_uv_commands_match(cmds, fixtures, empty_venv, tmp_path, variant)
    for command in guard_commands("torch2.7-cu128", torch, cuda):
        resolve = resolve_pip if command.startswith("pip ") else resolve_uv
        assert_matching_pair(
            resolve(command, fixtures, empty_venv, tmp_path, contract.DEFAULT_INDEX_URL), variant, command
        )
