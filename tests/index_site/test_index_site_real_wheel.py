"""A real wheel of this project, published and installed by pip with its torch pin, then imported and run."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

import pytest
from index_site_helpers import NOW, run_cmd, serve

import causal_conv1d_contract as contract

pytestmark = pytest.mark.slow
VARIANT = "torch2.13-cpu"
#: the torch scripts/run-tests.sh installed (so pip finds it in its cache)
TORCH_SPEC = os.environ.get("CAUSAL_CONV1D_TEST_TORCH", "torch==2.13.0")


@pytest.fixture
def real_wheel(request: pytest.FixtureRequest) -> Path:
    """CAUSAL_CONV1D_TEST_CPU_WHEEL if set, else the session fixture ``cpu_wheel`` (tests/conftest.py)."""
    given = os.environ.get("CAUSAL_CONV1D_TEST_CPU_WHEEL")
    if given:
        return Path(given)
    try:
        return Path(request.getfixturevalue("cpu_wheel"))
    except (pytest.FixtureLookupError, ImportError) as exc:
        pytest.skip(f"no real CPU wheel: the cpu_wheel fixture is unavailable ({exc})")


def test_pip_installs_real_wheel_and_its_torch(real_wheel, tmp_path):
    name = contract.parse_wheel_name(real_wheel.name)
    assert name.variant.name == VARIANT, real_wheel.name
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    shutil.copyfile(real_wheel, wheels / real_wheel.name)
    from index_site import main
    from tests.helpers.wheels import write_wheel

    write_wheel(wheels, variant="torch2.14-cpu")  # a neighbour with a higher label, on its own page
    site = tmp_path / "site"
    assert main(["build", str(wheels), "--out", str(site), "--now", NOW]) == 0
    assert main(["verify", str(site)]) == 0
    venv = tmp_path / "venv"
    # this machine's own pip configuration supplies torch 2.13.0 (a local mirror here, PyPI or its cache in CI)
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    run_cmd([sys.executable, "-m", "venv", venv], env)
    python = venv / "bin" / "python"
    with serve(site) as served:
        run_cmd(
            [python, "-m", "pip", "install", "--only-binary", "causal-conv1d",
             "--extra-index-url", served.url + f"whl/{VARIANT}/", "causal-conv1d", *shlex.split(TORCH_SPEC)],
            env, timeout=1200,
        )  # fmt: skip
    check = (
        "import json, torch, causal_conv1d as c\n"
        "from causal_conv1d import causal_conv1d_fn\n"
        "x = torch.randn(1, 4, 8); w = torch.randn(4, 3)\n"
        "y = causal_conv1d_fn(x, w)\n"
        "print(json.dumps({'version': c.__version__, 'shape': list(y.shape), 'file': c.__file__}))\n"
    )
    out = run_cmd([python, "-I", "-c", check], env).stdout
    import json

    info = json.loads(out.strip().splitlines()[-1])
    assert info["version"] == str(name.version)
    assert info["shape"] == [1, 4, 8]
    assert str(venv) in info["file"]
