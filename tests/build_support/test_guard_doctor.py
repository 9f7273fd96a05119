"""The import-time guard and `python -m causal_conv1d doctor`, on the real CPU wheel unpacked."""

from __future__ import annotations

import json
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

import causal_conv1d_contract as contract

from .conftest import CPU_VARIANT, REPO, clean_env, run

MISMATCHED = {
    "version": "1.7.0.post1+cu128.torch2.7",
    "variant": "torch2.7-cu128",
    "torch_version": "2.7.1+cu128",
    "cuda_version": "12.8",
    "cxx11_abi": False,
    "cuda_archs": ["8.0", "9.0"],
    "with_cuda": True,
    "platform": "manylinux_2_28_x86_64",
    "source_commit": None,
}


@pytest.fixture
def unpacked(real_cpu_wheel: Path, tmp_path: Path) -> Path:
    """The wheel's files in a directory to put on PYTHONPATH (a clean, non-source location)."""
    dest = tmp_path / "site"
    with zipfile.ZipFile(real_cpu_wheel) as zf:
        zf.extractall(dest)
    # This tree's Python files over the wheel's (the wheel may be a cached build of an older tree);
    # the compiled extension and the build record stay the wheel's.
    for package in (contract.DIST_NAME, contract.__name__):  # the package and the contracts it imports
        (dest / package).mkdir(exist_ok=True)
        for src in (REPO / package).glob("*.py"):
            shutil.copy2(src, dest / package / src.name)
    return dest


def py(site: Path, code: list[str], python: str = sys.executable, **env: str):
    return run([python, *code], env=clean_env(PYTHONPATH=str(site), **env), check=False, cwd=site.parent)


def set_record(site: Path, record: dict[str, Any]) -> None:
    (site / contract.DIST_NAME / contract.BUILD_INFO_FILENAME).write_text(json.dumps(record))


def test_guard_contract_agreement() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import importlib.util

    guard = Path(__file__).resolve().parents[2] / "causal_conv1d" / "_guard.py"
    spec = importlib.util.spec_from_file_location("_g", guard)
    assert spec and spec.loader
    g = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(g)  # the module itself imports nothing of the package (only the contract)
    assert g._FILENAME == contract.BUILD_INFO_FILENAME
    assert set(g._USED_KEYS) <= set(contract.BUILD_INFO_KEYS)
    rec = dict(MISMATCHED)
    assert len(g.mismatches(rec, "2.7.0", "12.8", False)) == 0  # patch releases are compatible
    assert len(g.mismatches(rec, "2.8.0+cu128", "12.8", False)) == 1
    assert len(g.mismatches(rec, "2.7.1+cu126", "12.6", False)) == 1
    assert len(g.mismatches(rec, "2.7.1+cu128", "12.8", True)) == 1
    assert len(g.mismatches(rec, "2.7.1+cpu", None, False)) == 1


def test_matching_record_imports(unpacked: Path) -> None:
    proc = py(unpacked, ["-c", "import causal_conv1d as c; print(c.__version__)"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("1.7.0.post1+cpu.torch2.13")


def test_guard_fires_on_mismatched_record_before_the_extension_loads(unpacked: Path) -> None:
    set_record(unpacked, MISMATCHED)
    # Also make _C unloadable: if the guard let the import reach it, the error would differ.
    (unpacked / contract.DIST_NAME / "_C.so").write_bytes(b"not an ELF file")
    proc = py(unpacked, ["-c", "import causal_conv1d"])
    err = proc.stderr
    assert proc.returncode != 0
    assert "causal_conv1d._guard.BuildMismatch" in err
    assert "does not match the installed torch" in err
    assert "built for torch 2.7.1+cu128, but torch 2.13.0+cpu is running" in err
    assert "CUDA 12.8 build of torch, but the running torch is a CPU (no CUDA) build" in err
    assert "_GLIBCXX_USE_CXX11_ABI=0" in err
    url = contract.variant_index_url("http://mirror.example/", contract.Variant.parse(CPU_VARIANT))
    assert (
        url in py(unpacked, ["-c", "import causal_conv1d"], **{contract.ENV_INDEX_URL: "http://mirror.example/"}).stderr
    )
    # torch 2.13 >= 2.10: the stable-ABI wheel of its family (also linked from the torch minor's page),
    # installed together with the running torch from PyTorch's CPU index
    public = MISMATCHED["version"].split("+", 1)[0]
    family = f"{contract.DEFAULT_INDEX_URL}whl/stable2.10-cpu/"
    assert (
        f'Install the matching build:  pip install "torch==2.13.0" "causal-conv1d=={public}+cpu.stable2.10" '
        f"--only-binary causal-conv1d --index-url https://download.pytorch.org/whl/cpu/ "
        f"--extra-index-url {family}"
    ) in err
    assert (
        f'(uv:  uv pip install "torch==2.13.0" "causal-conv1d=={public}+cpu.stable2.10" '
        f"--index causal-conv1d-stable2-10-cpu={family} "
        f"--index pytorch-cpu=https://download.pytorch.org/whl/cpu/)"
    ) in err
    assert f"{contract.DEFAULT_INDEX_URL}whl/{CPU_VARIANT}/, links the same wheel" in err
    assert "undefined symbol:" not in err and "invalid ELF header" not in err  # no loader error


def test_guard_without_packaging_still_names_the_mismatch(unpacked: Path, torch_venv) -> None:
    """A fresh venv with only torch has no `packaging`: the guard must not depend on it."""
    set_record(unpacked, MISMATCHED)
    proc = py(unpacked, ["-c", "import causal_conv1d"], python=str(torch_venv.python))
    assert proc.returncode != 0
    assert "does not match the installed torch" in proc.stderr and "torch 2.7.1+cu128" in proc.stderr
    ok = unpacked.parent / "ok"
    shutil.copytree(unpacked, ok)
    set_record(
        ok,
        {
            **MISMATCHED,
            "version": "1.7.0.post1+cpu.torch2.13",
            "variant": CPU_VARIANT,
            "torch_version": "2.13.0+cpu",
            "cuda_version": None,
            "cxx11_abi": True,
        },
    )
    proc = py(ok, ["-c", "import causal_conv1d as c; print(c.__version__)"], python=str(torch_venv.python))
    assert proc.returncode == 0 and proc.stdout.strip().endswith("1.7.0.post1+cpu.torch2.13"), proc.stderr


def test_damaged_and_missing_records(unpacked: Path) -> None:
    path = unpacked / contract.DIST_NAME / contract.BUILD_INFO_FILENAME
    path.write_text("{not json")
    proc = py(unpacked, ["-c", "import causal_conv1d"])
    assert proc.returncode != 0 and "not valid JSON" in proc.stderr and "--force-reinstall" in proc.stderr
    path.write_text(json.dumps({"variant": CPU_VARIANT}))
    proc = py(unpacked, ["-c", "import causal_conv1d"])
    assert proc.returncode != 0 and "lacks the keys" in proc.stderr
    path.unlink()  # a dev tree without a record: imports, bare version
    proc = py(unpacked, ["-c", "import causal_conv1d as c; print(c.__version__)"])
    assert proc.returncode == 0 and proc.stdout.strip().endswith(contract.PACKAGE_VERSION), proc.stderr


def doctor_json(site: Path, *args: str, python: str = sys.executable, **env: str) -> tuple[int, dict[str, Any]]:
    proc = py(site, ["-m", "causal_conv1d", "doctor", "--json", *args], python=python, **env)
    assert proc.stdout.strip().startswith("{"), proc.stdout + proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_doctor_healthy_with_index(unpacked: Path, index) -> None:
    rc, r = doctor_json(unpacked, **{contract.ENV_INDEX_URL: index.url})
    assert rc == 0, r["problems"]
    assert r["torch"]["version"].startswith("2.13") and r["torch"]["build"] == "cpu" and r["torch"]["cxx11_abi"] is True
    assert r["build_record"]["status"] == "ok" and r["build_record"]["record"]["variant"] == CPU_VARIANT
    assert r["import"]["ok"] is True
    assert r["variant"] == CPU_VARIANT
    assert r["index"]["has_wheel"] is True and r["index"]["wheel"].startswith(
        "causal_conv1d-1.7.0.post1+cpu.torch2.13-"
    )
    url = f"{index.url}whl/{CPU_VARIANT}/"
    assert r["commands"]["pip"] == (
        'pip install "torch==2.13.0" causal-conv1d --only-binary causal-conv1d '
        f"--index-url https://download.pytorch.org/whl/cpu/ --extra-index-url {url}"
    )
    assert r["commands"]["uv"] == (
        f'uv pip install "torch==2.13.0" causal-conv1d --index causal-conv1d-torch2-13-cpu={url} '
        "--index pytorch-cpu=https://download.pytorch.org/whl/cpu/"
    )
    assert r["commands"]["uv_pyproject"].count("explicit = true") == 2
    # torch 2.13: the stable family page first (this index has the per-minor wheel only), then the minor's page
    assert r["wheel_variant"] == "stable2.10-cpu" and r["index"]["url"] == f"{url}{contract.PROJECT_NAME}/"
    assert len(index.requests) == 2 and "/whl/stable2.10-cpu/" in index.requests[0]
    text = py(unpacked, ["-m", "causal_conv1d", "doctor"], **{contract.ENV_INDEX_URL: index.url}).stdout
    for needle in ("torch       2.13", "variant     torch2.13-cpu", "index       yes:", url, "no problems found"):
        assert needle in text, text


def test_doctor_offline_is_quick_and_not_fatal(unpacked: Path, refused_url: str) -> None:
    import time

    t0 = time.monotonic()
    rc, r = doctor_json(unpacked, **{contract.ENV_INDEX_URL: refused_url})
    assert time.monotonic() - t0 < 30
    assert rc == 0 and r["index"]["has_wheel"] is None and "unreachable" in r["index"]["detail"]


def test_doctor_reports_mismatch_with_fix(unpacked: Path, index) -> None:
    set_record(unpacked, MISMATCHED)
    rc, r = doctor_json(unpacked, **{contract.ENV_INDEX_URL: index.url})
    assert rc == 1
    assert r["build_record"]["status"] == "mismatch" and len(r["build_record"]["mismatches"]) == 3
    assert r["import"]["ok"] is False and "does not match" in r["import"]["error"]
    assert any(f"{index.url}whl/{CPU_VARIANT}/" in p for p in r["problems"])


def test_doctor_runs_when_the_extension_cannot_load(unpacked: Path) -> None:
    (unpacked / contract.DIST_NAME / "_C.so").write_bytes(b"\x7fELF broken")
    proc = py(unpacked, ["-c", "import causal_conv1d"])
    assert proc.returncode != 0  # outside `-m`, the import error is raised as usual
    proc = py(unpacked, ["-m", "causal_conv1d", "doctor", "--offline"])
    assert proc.returncode == 1, proc.stderr
    assert "import      FAILS" in proc.stdout and "variant     torch2.13-cpu" in proc.stdout


def test_doctor_without_packaging(unpacked: Path, torch_venv) -> None:
    proc = py(unpacked, ["-m", "causal_conv1d", "doctor"], python=str(torch_venv.python))
    assert "torch       2.13" in proc.stdout, proc.stdout + proc.stderr
    # The contract needs no packaging (it is not a runtime requirement): the variant is still known.
    assert "'packaging' module is missing" not in proc.stdout
    assert "variant     torch2.13-cpu" in proc.stdout, proc.stdout
    assert py(unpacked, ["-m", "causal_conv1d"], python=str(torch_venv.python)).returncode == 2


# --- doctor in a venv made the way a user makes it: python -m venv, pip install torch, pip install our wheel


@pytest.fixture
def user_venv(torch_venv, real_cpu_wheel: Path):
    """torch_venv (torch only: no packaging) + our real wheel installed by pip; this tree's Python files
    over the installed ones (the wheel may be a build of an older tree; its extension and record stay)."""
    torch_venv.uninstall()
    torch_venv.pip("install", "--no-deps", "-q", str(real_cpu_wheel))
    site = Path(
        run([torch_venv.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    )
    for package in (contract.DIST_NAME, contract.__name__):  # the package and the contracts it imports
        (site / package).mkdir(exist_ok=True)
        for src in (REPO / package).glob("*.py"):
            shutil.copy2(src, site / package / src.name)
    assert run([torch_venv.python, "-c", "import packaging"], check=False).returncode != 0  # as a user's venv
    yield torch_venv
    torch_venv.uninstall()


def user_doctor(venv, *args: str, **env: str):
    return run([venv.python, "-m", "causal_conv1d", "doctor", *args], env=clean_env(**env), check=False, cwd=venv.path)


@pytest.mark.parametrize("mode", ["offline", "unreachable", "answering", "garbage"])
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_doctor_in_a_users_venv_without_packaging(user_venv, index, refused_url: str, mode: str, fmt: str) -> None:
    """No packaging, and the index offline / unreachable / answering / answering garbage: never a crash."""
    args = (["--offline"] if mode == "offline" else []) + (["--json"] if fmt == "json" else [])
    url = refused_url if mode == "unreachable" else index.url
    index.mode = "garbage" if mode == "garbage" else "ok"
    proc = user_doctor(user_venv, *args, **{contract.ENV_INDEX_URL: url})
    assert "Traceback" not in proc.stderr and "ModuleNotFoundError" not in proc.stdout + proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stdout + proc.stderr
    if fmt == "json":
        r = json.loads(proc.stdout)
        assert r["variant"] == CPU_VARIANT and r["problems"] == []
        idx = r["index"]
        if mode == "offline":
            assert idx is None
        elif mode == "unreachable":
            assert idx["has_wheel"] is None and "unreachable" in idx["detail"]
        elif mode == "answering":
            assert idx["has_wheel"] is True and idx["wheel"].startswith("causal_conv1d-1.7.0.post1+cpu.torch2.13-")
        else:
            assert idx["has_wheel"] is False
        assert r["commands"]["pip"].startswith('pip install "torch==2.13.0" causal-conv1d --only-binary causal-conv1d')
    else:
        out = proc.stdout
        assert "variant     torch2.13-cpu" in out and "no problems found" in out, out
        expect = {
            "offline": None,
            "unreachable": "index       unknown (index unreachable",
            "answering": "index       yes: causal_conv1d-1.7.0.post1+cpu.torch2.13-",
            "garbage": "index       no (",
        }[mode]
        assert (expect is None and "index  " not in out) or (expect is not None and expect in out), out


def test_doctor_prints_the_mismatch_once(unpacked: Path, index) -> None:
    set_record(unpacked, MISMATCHED)
    proc = py(unpacked, ["-m", "causal_conv1d", "doctor"], **{contract.ENV_INDEX_URL: index.url})
    out = proc.stdout
    assert proc.returncode == 1
    assert out.count("built for torch 2.7.1+cu128, but torch 2.13.0+cpu is running") == 1, out
    assert out.count("The running torch is variant torch2.13-cpu.") == 1, out
    assert "import      FAILS: the build does not match the installed torch (see problems)" in out
