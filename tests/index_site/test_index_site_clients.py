"""Real clients against a served site: pip and uv, into fresh venvs, with no access to anything else.

The site holds, for causal-conv1d: the wanted wheel (1.7.0, torch2.13-cpu), a newer one on the same page
that is yanked (1.7.1), and neighbours on other variants' pages with higher local labels. A fake "PyPI"
offers a causal-conv1d 9.0.0 sdist: the commands the landing page prints must not pick any of those.
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import tarfile
import urllib.request
from pathlib import Path

import pytest
from index_site_helpers import NOW, client_env, run_cmd, serve

import causal_conv1d_contract as contract

pytestmark = pytest.mark.slow

WANTED = "causal_conv1d-1.7.0.post1+cpu.torch2.13-cp39-abi3-linux_x86_64.whl"
YANKED = "causal_conv1d-1.7.1+cpu.torch2.13-cp39-abi3-linux_x86_64.whl"
VARIANT = "torch2.13-cpu"
UV_INDEX = f"causal-conv1d-{VARIANT}"


def _fake_pypi(root: Path) -> Path:
    """A PEP 503 index offering causal-conv1d 9.0.0 as an sdist (what PyPI's upstream package looks like)."""
    project = root / "causal-conv1d"
    project.mkdir(parents=True)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in {
            "causal_conv1d-9.0.0/PKG-INFO": "Metadata-Version: 2.1\nName: causal-conv1d\nVersion: 9.0.0\n",
            "causal_conv1d-9.0.0/setup.py": "from setuptools import setup\nsetup(name='causal-conv1d', version='9.0.0')\n",
        }.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (project / "causal_conv1d-9.0.0.tar.gz").write_bytes(buf.getvalue())
    (project / "index.html").write_text('<a href="causal_conv1d-9.0.0.tar.gz">causal_conv1d-9.0.0.tar.gz</a>\n')
    (root / "index.html").write_text('<a href="causal-conv1d/">causal-conv1d</a>\n')
    return root


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The built site and the fake PyPI, both served on 127.0.0.1 for the whole module."""
    from index_site import main
    from tests.helpers.wheels import write_wheel

    tmp = tmp_path_factory.mktemp("clients")
    wheels = tmp / "wheels"
    write_wheel(wheels, variant=VARIANT)
    write_wheel(wheels, variant=VARIANT, version="1.7.1")
    write_wheel(wheels, variant="torch2.14-cpu")  # neighbour page, higher label
    write_wheel(wheels, variant="torch2.13-cu130")  # neighbour page
    site = tmp / "site"
    assert main(["build", str(wheels), "--out", str(site), "--now", NOW]) == 0
    assert main(["yank", str(site), YANKED, "--reason", "broken build"]) == 0
    pypi = _fake_pypi(tmp / "pypi")
    with serve(site) as served, serve(pypi, negotiate=False) as fake_pypi:
        yield {
            "tmp": tmp,
            "site": site,
            "served": served,
            "pypi": fake_pypi.url,
            "index": served.url + f"whl/{VARIANT}/",
        }


@pytest.fixture(scope="module")
def pip_python(tmp_path_factory):
    """A venv with pip (the client under test); installs go into fresh venvs through ``pip --python``."""
    venv = tmp_path_factory.mktemp("pip-venv") / "venv"
    run_cmd([sys.executable, "-m", "venv", venv], client_env(venv.parent))
    return venv / "bin" / "python"


@pytest.fixture
def fresh_venv(tmp_path):
    venv = tmp_path / "target"
    run_cmd([sys.executable, "-m", "venv", "--without-pip", venv], client_env(tmp_path))
    return venv / "bin" / "python"


def _uv() -> str:
    import shutil

    exe = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    if not Path(exe).exists():
        pytest.skip("needs uv (pip install uv; it is in requirements-dev.txt)")
    return exe


def _installed(python: Path, tmp: Path) -> tuple[str, str]:
    out = run_cmd(
        [python, "-I", "-c", "import causal_conv1d as c; print(c.VARIANT, c.VERSION)"], client_env(tmp)
    ).stdout
    variant, version = out.split()
    return variant, version


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _pip_install(world, pip_python, tmp_path, *args, venv=None, extra_index=None, check=True):
    """``pip install ARGS`` from the fake PyPI plus the variant index (or ``extra_index``), into ``venv``
    (default: pip's own environment)."""
    target = ["--python", venv] if venv is not None else []
    index = ["--index-url", world["pypi"], "--extra-index-url", extra_index or world["index"]]
    return run_cmd([pip_python, "-m", "pip", *target, "install", *index, *args], client_env(tmp_path), check=check)


def test_pip_installs_the_variant_wheel_with_pep658(world, pip_python, fresh_venv, tmp_path):
    served = world["served"]
    served.requests.clear()
    proc = _pip_install(
        world, pip_python, tmp_path, "-v", "--only-binary", "causal-conv1d", "causal-conv1d", venv=fresh_venv
    )
    assert _installed(fresh_venv, tmp_path) == (VARIANT, "1.7.0.post1+cpu.torch2.13")  # not yanked 1.7.1, not 9.0.0
    quoted = contract.quote_path(WANTED)
    assert f"Obtaining dependency information for causal-conv1d from {served.url}files/{quoted}.metadata" in proc.stdout
    assert any(f"GET /files/{quoted}.metadata " in r for r in served.requests)
    # only the chosen variant's page was read: neighbours were never offered
    pages = [r for r in served.requests if "/whl/" in r]
    assert pages and all(f"/whl/{VARIANT}/" in r for r in pages)


def test_without_only_binary_pip_would_take_the_sdist(world, pip_python, tmp_path):
    """The control: this is what --only-binary protects against (the test above is not vacuous).

    pip picks the higher-versioned sdist and tries to build it (which fails here: no build tools offline).
    """
    proc = _pip_install(world, pip_python, tmp_path, "--dry-run", "-v", "causal-conv1d", check=False)
    assert f"{world['pypi']}causal-conv1d/causal_conv1d-9.0.0.tar.gz" in proc.stdout + proc.stderr


def test_pip_with_a_plain_static_host(world, pip_python, fresh_venv, tmp_path):
    """A static host cannot negotiate: pip reads the HTML pages (the JSON form is not served)."""
    report = tmp_path / "report.json"
    with serve(world["site"], negotiate=False) as static:
        _pip_install(
            world,
            pip_python,
            tmp_path,
            *("--dry-run", "--report", report, "--only-binary", "causal-conv1d", "causal-conv1d"),
            venv=fresh_venv,
            extra_index=static.url + f"whl/{VARIANT}/",
        )
        requests = list(static.requests)
    (item,) = json.loads(report.read_text())["install"]
    assert item["metadata"]["version"] == "1.7.0.post1+cpu.torch2.13"
    assert item["download_info"]["url"].endswith("/files/" + contract.quote_path(WANTED))
    assert any(".whl.metadata " in r for r in requests)


def test_serve_negotiates_json(world):
    url = world["index"] + "causal-conv1d/"
    req = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req) as resp:
        assert resp.headers["Content-Type"] == "application/vnd.pypi.simple.v1+json"
        doc = json.loads(resp.read())
    assert {f["filename"] for f in doc["files"]} == {WANTED, YANKED}
    with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept": "text/html"})) as resp:
        assert resp.headers["Content-Type"].startswith("text/html")
        assert b'<meta name="pypi:repository-version" content="1.0">' in resp.read()


@pytest.mark.parametrize("right", [True, False], ids=["right-hash", "wrong-hash"])
def test_pip_require_hashes(world, pip_python, fresh_venv, tmp_path, right):
    sha = _sha256(world["site"] / "files" / WANTED)
    if not right:
        sha = hashlib.sha256(b"something else").hexdigest()
    req = tmp_path / "requirements.txt"
    req.write_text(f"causal-conv1d==1.7.0.post1+cpu.torch2.13 --hash=sha256:{sha}\n")
    proc = _pip_install(
        world,
        pip_python,
        tmp_path,
        "--require-hashes",
        "-r",
        req,
        "--only-binary",
        "causal-conv1d",
        venv=fresh_venv,
        check=right,
    )
    if right:
        assert _installed(fresh_venv, tmp_path) == (VARIANT, "1.7.0.post1+cpu.torch2.13")
    else:
        assert proc.returncode != 0
        assert "DO NOT MATCH THE HASHES" in proc.stderr


def test_pip_yanked_only_when_pinned(world, pip_python, fresh_venv, tmp_path):
    proc = _pip_install(
        world,
        pip_python,
        tmp_path,
        "--only-binary",
        "causal-conv1d",
        "causal-conv1d==1.7.1+cpu.torch2.13",
        venv=fresh_venv,
    )
    assert "yanked" in proc.stderr and "broken build" in proc.stderr
    assert _installed(fresh_venv, tmp_path) == (VARIANT, "1.7.1+cpu.torch2.13")


def _uv_venv(tmp: Path) -> Path:
    run_cmd([_uv(), "venv", "--no-config", "-q", "--python", sys.executable, tmp / "uv-venv"], client_env(tmp))
    return tmp / "uv-venv" / "bin" / "python"


def test_uv_installs_the_variant_wheel(world, tmp_path):
    python = _uv_venv(tmp_path)
    served = world["served"]
    served.requests.clear()
    run_cmd(
        [
            _uv(),
            "pip",
            "install",
            "--python",
            python,
            "--default-index",
            world["pypi"],
            "--index",
            f"{UV_INDEX}={world['index']}",
            "causal-conv1d",
        ],
        client_env(tmp_path),
    )
    assert _installed(python, tmp_path) == (VARIANT, "1.7.0.post1+cpu.torch2.13")
    assert any(f"GET /files/{contract.quote_path(WANTED)}.metadata " in r for r in served.requests)


@pytest.mark.parametrize("right", [True, False], ids=["right-hash", "wrong-hash"])
def test_uv_require_hashes(world, tmp_path, right):
    python = _uv_venv(tmp_path)
    sha = _sha256(world["site"] / "files" / WANTED) if right else hashlib.sha256(b"x").hexdigest()
    req = tmp_path / "requirements.txt"
    req.write_text(f"causal-conv1d==1.7.0.post1+cpu.torch2.13 --hash=sha256:{sha}\n")
    proc = run_cmd(
        [
            _uv(),
            "pip",
            "install",
            "--python",
            python,
            "--require-hashes",
            "-r",
            req,
            "--default-index",
            world["pypi"],
            "--index",
            f"{UV_INDEX}={world['index']}",
        ],
        client_env(tmp_path),
        check=right,
    )
    if right:
        assert _installed(python, tmp_path) == (VARIANT, "1.7.0.post1+cpu.torch2.13")
    else:
        assert proc.returncode != 0
        assert "hash" in proc.stderr.lower() and sha in proc.stderr


def test_uv_project_explicit_index(world, tmp_path):
    """The pyproject snippet of the landing page: explicit = true, causal-conv1d pinned to the variant index."""
    project = tmp_path / "app"
    project.mkdir()
    (project / "pyproject.toml").write_text(f"""\
[project]
name = "app"
version = "0"
requires-python = ">=3.9"
dependencies = ["causal-conv1d"]

[[tool.uv.index]]
name = "{UV_INDEX}"
url = "{world["index"]}"
explicit = true

[[tool.uv.index]]
name = "fake-pypi"
url = "{world["pypi"]}"
default = true

[tool.uv.sources]
causal-conv1d = {{ index = "{UV_INDEX}" }}
""")
    env = client_env(tmp_path)
    env.pop("UV_NO_CONFIG")  # the project's own pyproject.toml is the configuration under test
    proc = run_cmd([_uv(), "lock", "--directory", project, "--python", sys.executable], env)
    lock = (project / "uv.lock").read_text()
    assert 'version = "1.7.0.post1+cpu.torch2.13"' in lock, proc.stderr
    assert WANTED.replace("+", "%2B") in lock or WANTED in lock


def test_verify_over_http(world):
    from index_site.verify import verify_site

    checked, problems = verify_site(world["served"].url)
    assert problems == []
    assert checked == 4  # every wheel of every variant page, yanked included
