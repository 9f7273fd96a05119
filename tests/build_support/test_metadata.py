"""The licence metadata (PEP 639) and the build requirements that must keep an sdist installable."""

from __future__ import annotations

import email.parser
import json
import re
import sys
import tarfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from .conftest import REPO, clean_env, run

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
#: The first setuptools with a working PEP 639 implementation (77.0.0-77.0.2 had bugs in it).
PEP639_SETUPTOOLS = Version("77.0.3")


def _setuptools_requirement() -> Requirement:
    reqs = [Requirement(r) for r in PYPROJECT["build-system"]["requires"]]
    found = [r for r in reqs if r.name == "setuptools"]
    assert len(found) == 1, reqs
    return found[0]


def test_licence_is_an_spdx_expression_with_its_file() -> None:
    project = PYPROJECT["project"]
    assert project["license"] == "BSD-3-Clause"  # a string (PEP 639), not the deprecated {text = ...} table
    assert not any(c.startswith("License ::") for c in project.get("classifiers", []))  # PEP 639 forbids both
    for pattern in project["license-files"]:
        assert list(REPO.glob(pattern)), pattern
    assert "BSD 3-Clause License" in (REPO / "LICENSE").read_text(encoding="utf-8")


def test_setuptools_range_is_bounded_and_supports_pep639() -> None:
    spec = _setuptools_requirement().specifier
    lower = [Version(s.version) for s in spec if s.operator == ">="]
    upper = [Version(s.version) for s in spec if s.operator == "<"]
    assert lower and min(lower) >= PEP639_SETUPTOOLS, spec
    assert upper, f"{spec}: no upper bound; a future setuptools major could break every sdist install"
    assert PEP639_SETUPTOOLS in spec


def test_every_place_installs_the_same_setuptools() -> None:
    want = str(_setuptools_requirement().specifier)
    files = [
        "requirements-dev.txt",
        "build_matrix/build_venv.py",
        "build_matrix/data/compat.toml",
        ".github/workflows/release.yml",
        "pyproject.toml",
        "benchmarks/sdist_install_bench.py",
    ]
    for rel in files:
        text = (REPO / rel).read_text(encoding="utf-8")
        specs = re.findall(r"setuptools((?:[<>=!~]=?[0-9.]+,?)+)", text)
        assert specs, rel
        for s in specs:
            assert str(Requirement("setuptools" + s).specifier) == want, (rel, s)


@pytest.mark.slow
def test_pips_isolated_build_picks_a_pep639_setuptools_and_the_sdist_carries_the_licence(tmp_path: Path) -> None:
    """What pip installs into an isolated build environment (`pip install --ignore-installed` of the
    requirements) is in range today; building the sdist in isolation (python -m build, through pip)
    gives PEP 639 metadata and no licence deprecation warning."""
    req = str(_setuptools_requirement())
    proc = run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report", "-", req],
        env=clean_env(),
    )
    picked = [
        i["metadata"]["version"] for i in json.loads(proc.stdout)["install"] if i["metadata"]["name"] == "setuptools"
    ]
    assert len(picked) == 1 and Version(picked[0]) in _setuptools_requirement().specifier, picked
    assert Version(picked[0]) >= PEP639_SETUPTOOLS
    proc = run([sys.executable, "-m", "build", "--sdist", "-o", tmp_path, REPO], env=clean_env(), timeout=900)
    out = proc.stdout + proc.stderr
    assert "project.license` as a TOML table is deprecated" not in out, out[-3000:]
    assert "License classifiers are deprecated" not in out
    sdist = next(tmp_path.glob("*.tar.gz"))
    with tarfile.open(sdist) as tf:
        pkg_info = next(m for m in tf.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO"))
        meta = email.parser.Parser().parsestr(tf.extractfile(pkg_info).read().decode())  # type: ignore[union-attr]
        names = tf.getnames()
    assert meta["License-Expression"] == "BSD-3-Clause", meta.items()
    assert meta.get_all("License-File") == ["LICENSE"]
    assert Version(meta["Metadata-Version"]) >= Version("2.4")
    assert any(n.endswith("/LICENSE") for n in names)
