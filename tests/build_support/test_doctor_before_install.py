"""The user's path from nothing installed: doctor.pyz (the site's doctor, before any install), the
advice without torch, the repair of a broken install, and the from-source command building *this*
project's sdist from the served local site (never PyPI's upstream package of the same name)."""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
import venv
from pathlib import Path
from typing import Any

import pytest

import causal_conv1d_contract as contract
from index_site.doctor_app import doctor_app, run_command

from .conftest import REPO, Venv, clean_env, run, wheel_record
from .test_guard_doctor import MISMATCHED, py, unpacked  # noqa: F401  (unpacked: a fixture)

TORCH_INDEX_CPU = "https://download.pytorch.org/whl/cpu/"


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with nothing in it: no torch, no pip."""
    path = tmp_path_factory.mktemp("bare") / "v"
    venv.EnvBuilder(with_pip=False).create(path)
    return path / "bin" / "python"


def _app(tmp_path: Path, site_url: str) -> Path:
    app = tmp_path / "doctor.pyz"
    app.write_bytes(doctor_app(site_url))
    return app


def _doctor(python: Path | str, app: Path, *args: str, **env: str) -> tuple[int, dict[str, Any], str]:
    proc = run([str(python), str(app), "--json", *args], env=clean_env(**env), check=False, cwd=app.parent)
    assert proc.stdout.strip().startswith("{"), proc.stdout + proc.stderr
    text = run([str(python), str(app), *args], env=clean_env(**env), check=False, cwd=app.parent).stdout
    return proc.returncode, json.loads(proc.stdout), text


def test_doctor_app_is_reproducible_and_names_its_site() -> None:
    assert doctor_app("http://127.0.0.1:8000/") == doctor_app("http://127.0.0.1:8000")
    assert doctor_app("http://127.0.0.1:8000/") != doctor_app("https://example.org/site/")
    assert run_command("http://h/s").endswith("python doctor.pyz") and "http://h/s/doctor.pyz" in run_command(
        "http://h/s"
    )


def test_doctor_before_anything_is_installed(tmp_path: Path, bare_python: Path) -> None:
    """No torch, no causal-conv1d: doctor runs, gives torch from PyTorch's index (not PyPI's default, a
    CUDA build on Linux) with the CPU wheel from the site it came from, and the chooser for CUDA."""
    site = "http://127.0.0.1:9/site/"
    rc, r, text = _doctor(bare_python, _app(tmp_path, site), "--offline")
    assert rc == 1 and r["torch"]["importable"] is False
    assert r["build_record"]["status"] == "not installed" and r["import"]["installed"] is False
    assert r["commands"] is not None, "commands: null without torch was the defect"
    assert f"--index-url {TORCH_INDEX_CPU}" in r["commands"]["pip"]
    assert f"--extra-index-url {site}whl/stable2.10-cpu/" in r["commands"]["pip"]
    assert r["commands"]["choose"] == f"{site}index.html"
    (problem,) = r["problems"]
    assert f"pip install torch --index-url {TORCH_INDEX_CPU}" in problem and "a plain `pip install torch`" in problem
    assert "import      causal-conv1d is not installed" in text and "import causal_conv1d fails" not in text


def test_doctor_app_with_torch_only(tmp_path: Path, torch_venv: Venv) -> None:
    """README's first step in a venv holding only torch (``python -m causal_conv1d doctor`` cannot run there)."""
    torch_venv.uninstall()
    proc = run([str(torch_venv.python), "-m", "causal_conv1d", "doctor"], env=clean_env(), check=False, cwd=tmp_path)
    assert "No module named causal_conv1d" in proc.stderr  # what the old first step gave
    rc, r, text = _doctor(torch_venv.python, _app(tmp_path, "http://127.0.0.1:9/"), "--offline")
    assert rc == 0, r["problems"]
    assert r["variant"] == "torch2.13-cpu" and r["wheel_variant"] == "stable2.10-cpu"
    assert r["commands"]["pip"].startswith('pip install "torch==2.13.0" causal-conv1d --only-binary causal-conv1d')
    assert "no problems found" in text and "not installed" in text


def test_the_guard_without_torch_points_at_pytorchs_index(unpacked: Path, bare_python: Path) -> None:  # noqa: F811
    proc = py(unpacked, ["-c", "import causal_conv1d"], python=str(bare_python))
    assert proc.returncode != 0 and "causal-conv1d needs PyTorch" in proc.stderr
    assert f"pip install torch --index-url {TORCH_INDEX_CPU}" in proc.stderr
    assert "Install torch first: pip install torch\n" not in proc.stderr + "\n"


def test_doctor_repairs_a_build_for_another_torch(
    tmp_path: Path, venv_clean: Venv, real_cpu_wheel: Path, index
) -> None:
    """A build record for another torch under the same version: a plain install says "Requirement already
    satisfied"; doctor's first command replaces the build, torch untouched, and the import works."""
    venv_clean.pip("install", "--no-deps", str(real_cpu_wheel))
    installed = Path(
        venv_clean.py(
            "import importlib.util as u; print(u.find_spec('causal_conv1d').submodule_search_locations[0])"
        ).stdout.strip()
    )
    version = wheel_record(real_cpu_wheel)["version"]
    (installed / contract.BUILD_INFO_FILENAME).write_text(json.dumps({**MISMATCHED, "version": version}))
    assert venv_clean.py("import causal_conv1d", check=False).returncode != 0
    env = {contract.ENV_INDEX_URL: index.url}
    rc, r, text = _doctor(venv_clean.python, _app(tmp_path, index.url), **env)
    assert rc == 1 and r["build_record"]["status"] == "mismatch"
    first = r["commands"]["pip"]
    assert "--force-reinstall --no-deps" in first and f'"causal-conv1d=={version}"' in first, first
    assert "repair (replaces the installed build; torch is kept):" in text
    torch_before = venv_clean.py("import torch; print(torch.__file__)").stdout
    args = shlex.split(first)
    assert args[:2] == ["pip", "install"]
    venv_clean.pip(*args[1:], env=clean_env(PIP_CACHE_DIR=str(tmp_path / "cache")))
    proc = venv_clean.py("import causal_conv1d as c; print(c.__version__)")
    assert proc.stdout.strip() == version
    assert venv_clean.py("import torch; print(torch.__file__)").stdout == torch_before


@pytest.mark.slow
def test_the_printed_from_source_command_builds_this_projects_sdist(
    tmp_path: Path, venv_clean: Venv, real_cpu_wheel: Path, sdist_dir: Path, build_deps: Path
) -> None:
    """doctor's from-source command, in a venv with only torch, against the served local site (127.0.0.1):
    the install is this project's sdist (its version, and the build record it brings), not upstream's."""
    wheels = tmp_path / "in"
    wheels.mkdir()
    for f in (real_cpu_wheel, *sdist_dir.glob("*.tar.gz")):
        (wheels / f.name).write_bytes(f.read_bytes())
    site = tmp_path / "site"
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    base = f"http://127.0.0.1:{port}/"
    run(
        [sys.executable, "-m", "index_site", "build", str(wheels), "--out", str(site), "--site-url", base],
        env=clean_env(),
        cwd=REPO,
    )
    server = subprocess.Popen(
        [sys.executable, "-m", "index_site", "serve", str(site), "--port", str(port)],
        cwd=REPO,
        env=clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "source/causal-conv1d/", timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        app = tmp_path / "doctor.pyz"
        urllib.request.urlretrieve(base + "doctor.pyz", app)  # what the landing page tells the user to run
        _rc, r, _text = _doctor(venv_clean.python, app)
        command = r["commands"]["from_source"].split("  #", 1)[0]
        assert (
            f"--extra-index-url {base}source/" in command and f'"causal-conv1d=={contract.PACKAGE_VERSION}"' in command
        )
        landing = (site / "index.html").read_text()
        data = json.loads(
            landing.split('<script id="site-data" type="application/json">', 1)[1].split("</script>", 1)[0]
        )
        assert {c["source"]["pip"] for c in data["commands"].values()} == {command}  # the landing page's is the same
        args = shlex.split(command)
        env = clean_env(PIP_CACHE_DIR=str(tmp_path / "cache"), PIP_FIND_LINKS=str(build_deps))
        proc = venv_clean.pip(*args[1:], env=env)
        assert f"causal_conv1d-{contract.PACKAGE_VERSION}.tar.gz" in proc.stdout, proc.stdout
    finally:
        server.terminate()
        server.wait(timeout=30)
    code = (
        "import causal_conv1d, json, pathlib; "
        "print(json.dumps(json.loads((pathlib.Path(causal_conv1d.__file__).parent / '_build_info.json').read_text())))"
    )
    record = json.loads(venv_clean.py(code).stdout)
    assert record["version"].split("+", 1)[0] == contract.PACKAGE_VERSION and tuple(record) == contract.BUILD_INFO_KEYS
