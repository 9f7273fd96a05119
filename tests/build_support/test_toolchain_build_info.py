"""build_support/toolchain.py (machine diagnosis, CUDA discovery) and build_info.py (the record)."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

import causal_conv1d_contract as contract
from build_support import build_info, cuda_toolkit, host_compiler, toolchain, torch_probe

from .conftest import REPO, clean_env, run

#: A CUDA 13.0 torch as the diagnosis reads it (version, torch.version.cuda / hip, the C++ ABI): the
#: CUDA-diagnosis tests need no CUDA torch installed, only nvcc where they say so.
FAKE_CUDA_TORCH = """
__version__ = "2.13.0+cu130"
class version:
    cuda = "13.0"
    hip = None
class _C:
    _GLIBCXX_USE_CXX11_ABI = True
"""


@pytest.fixture(scope="module")
def cuda_torch_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site directory whose ``torch`` is FAKE_CUDA_TORCH (put first on PYTHONPATH)."""
    site = tmp_path_factory.mktemp("cuda-torch-site")
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(FAKE_CUDA_TORCH)
    return site


def fake_nvcc(path: Path, release: str, top: Path | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    top_line = f'echo "#\\$ TOP={top}"' if top else "true"
    path.write_text(
        textwrap.dedent(f"""\
        #!/bin/sh
        case "$1" in
          --version) echo "Cuda compilation tools, release {release}, V{release}.1" ;;
          -dryrun) {top_line} ;;
        esac
        """)
    )
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_gcc_range_and_release_archs_inherit_from_the_closest_entry() -> None:
    assert host_compiler.gcc_range("12.6") == host_compiler.GCC_RANGE[(12, 4)]
    assert host_compiler.gcc_range("13.0") == host_compiler.GCC_RANGE[(13, 0)]
    assert host_compiler.gcc_range("11.8")[1] == 11
    assert toolchain.release_archs("12.6") == toolchain.RELEASE_ARCHS[(12, 0)]
    assert "12.0" in toolchain.release_archs("12.9") and "7.0" not in toolchain.release_archs("13.0")


def test_max_jobs_bounded_by_cores_and_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(toolchain, "_mem_available_gb", lambda: 9.0)
    cores = len(os.sched_getaffinity(0))
    assert toolchain.max_jobs(cuda=True) == max(1, min(cores, 2))  # 9 GB / 4 GB per nvcc job
    monkeypatch.setattr(toolchain.os, "sched_getaffinity", lambda _pid: set(range(16)), raising=False)
    assert toolchain.max_jobs(cuda=True) == 2
    assert toolchain.max_jobs(cuda=False) == 6  # 9 GB / 1.5 GB per c++ job (the native build's default too)
    monkeypatch.setattr(toolchain, "_mem_available_gb", lambda: 1.0)
    assert toolchain.max_jobs(cuda=True) == 1


def test_pip_cuda_packages_are_assembled_into_a_cuda_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine has NVIDIA's pip packages only (nvidia/cu13/{bin,include,lib})."""
    site = tmp_path / "site-packages"
    root = site / "nvidia" / "cu13"
    fake_nvcc(root / "bin" / "nvcc", "13.0")
    (root / "include").mkdir(parents=True)
    (root / "include" / "cuda_runtime.h").write_text("")
    (root / "lib").mkdir()
    (root / "lib" / "libcudart.so.13").write_bytes(b"")
    for var in ("CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setattr(cuda_toolkit, "DEFAULT_CUDA_ROOTS", [])
    monkeypatch.setattr(cuda_toolkit, "_site_dirs", lambda: [site])
    tk = cuda_toolkit.find_cuda_toolkit(13)
    assert tk is not None and tk.version == "13.0" and tk.source == "NVIDIA pip package"
    assert not tk.complete and tk.include_dir == str(root / "include") and tk.cudart_dir == str(root / "lib")
    home = cuda_toolkit.assemble_cuda_home(tk, tmp_path / "build" / "cuda_home")
    assert (home / "include" / "cuda_runtime.h").exists()
    assert (home / "lib64" / "libcudart.so").resolve() == (root / "lib" / "libcudart.so.13").resolve()
    assert (home / "bin" / "nvcc").resolve() == (root / "bin" / "nvcc").resolve()
    cuda_toolkit.assemble_cuda_home(tk, tmp_path / "build" / "cuda_home")  # idempotent


def test_wrapper_script_on_path_resolves_to_the_real_toolkit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """/usr/local/bin/nvcc can be a shell wrapper: torch would take /usr/local as CUDA_HOME."""
    real = tmp_path / "cuda-13.0"
    (real / "include").mkdir(parents=True)
    (real / "include" / "cuda_runtime.h").write_text("")
    (real / "lib64").mkdir()
    (real / "lib64" / "libcudart.so").write_bytes(b"")
    fake_nvcc(tmp_path / "wrapper" / "bin" / "nvcc", "13.0", top=real / "bin" / "..")
    for var in ("CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", f"{tmp_path / 'wrapper' / 'bin'}:/usr/bin:/bin")
    monkeypatch.setattr(cuda_toolkit, "DEFAULT_CUDA_ROOTS", [])
    monkeypatch.setattr(cuda_toolkit, "_site_dirs", lambda: [])
    tk = cuda_toolkit.find_cuda_toolkit(13)
    assert tk is not None and tk.source == "nvcc on PATH"
    assert tk.home == str(real.resolve()) and tk.complete


def test_diagnose_cpu_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    import torch

    if torch.version.cuda is not None:
        pytest.skip("needs a CPU-only torch")
    monkeypatch.delenv("MAX_JOBS", raising=False)
    d = toolchain.diagnose()
    assert not d.build_cuda and d.toolkit is None and d.archs is None
    assert any("CPU-only build" in n and "CUDA ops will be unavailable" in n for n in d.notes)
    assert d.fatal == [] and d.env["MAX_JOBS"] == str(d.max_jobs)
    assert "CPU only" in toolchain.format_report(d)


CU_SCRIPT = """
import json, sys
sys.path.insert(0, {repo!r})
from build_support import cuda_toolkit, toolchain
if {no_toolkit}:
    cuda_toolkit.DEFAULT_CUDA_ROOTS = []
    cuda_toolkit._site_dirs = lambda: []
d = toolchain.diagnose()
print(json.dumps({{"cuda": d.build_cuda, "env": d.env, "problems": [p.text() for p in d.problems],
                  "fatal": len(d.fatal), "archs": d.archs}}))
"""


def _diagnose_cuda(site: Path, env: dict[str, str], no_toolkit: bool = False) -> dict:
    """toolchain.diagnose() in a child whose torch is the CUDA 13.0 torch of ``site``."""
    env = dict(env, PYTHONPATH=str(site), PYTHONNOUSERSITE="1")
    proc = run([sys.executable, "-c", CU_SCRIPT.format(repo=str(REPO), no_toolkit=no_toolkit)], env=env)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_diagnose_cuda_torch_on_this_machine(cuda_torch_site: Path) -> None:
    nvcc = shutil.which("nvcc")
    if not nvcc or "release 13." not in subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout:
        pytest.skip("needs nvcc 13 on PATH (the fake torch is a CUDA 13.0 build)")
    r = _diagnose_cuda(cuda_torch_site, clean_env())
    assert r["cuda"], r
    if r["fatal"] == 0:
        home = Path(r["env"]["CUDA_HOME"])
        assert (home / "include" / "cuda_runtime.h").exists()  # not /usr/local (the wrapper's parent)
        assert r["env"]["TORCH_CUDA_ARCH_LIST"] == r["archs"]
        return
    # A toolkit without the math library headers torch's CUDA headers include (a minimal nvcc install):
    # the one fatal problem names each missing header, and each is indeed missing, with the fix.
    (problem,) = [p for p in r["problems"] if p.startswith("ERROR")]
    m = re.search(r"the CUDA toolkit at (\S+) lacks ([\w.]+(?:, [\w.]+)*), which", problem)
    assert m and r["fatal"] == 1, r["problems"]
    for header in m.group(2).split(", "):
        assert not (Path(m.group(1)) / "include" / header).exists(), header
    assert "nvidia-cublas-cu13" in problem or "nvidia-cusparse-cu13" in problem, problem


def test_diagnose_nvcc_major_mismatch_is_fatal_with_a_fix(tmp_path: Path, cuda_torch_site: Path) -> None:
    home = tmp_path / "cuda-12.4"
    fake_nvcc(home / "bin" / "nvcc", "12.4", top=home)
    r = _diagnose_cuda(cuda_torch_site, clean_env(CUDA_HOME=str(home)))
    text = "\n".join(r["problems"])
    assert r["fatal"] >= 1 and "nvcc 12.4" in text and "CUDA major versions must be equal" in text, text
    assert "fix: install CUDA 13.0 and export CUDA_HOME=" in text


def test_diagnose_cuda_torch_without_toolkit_says_what_to_install(cuda_torch_site: Path) -> None:
    env = clean_env(PATH="/usr/bin:/bin")
    env.pop("CUDA_HOME", None)
    r = _diagnose_cuda(cuda_torch_site, env, no_toolkit=True)
    text = "\n".join(r["problems"])
    assert r["fatal"] == 1 and "no CUDA toolkit (nvcc) was found" in text, text
    assert "nvidia-cuda-nvcc" in text and f"{contract.ENV_SKIP_CUDA_BUILD}=TRUE" in text
    r = _diagnose_cuda(cuda_torch_site, dict(env, **{contract.ENV_SKIP_CUDA_BUILD: "TRUE"}), no_toolkit=True)
    assert not r["cuda"] and r["fatal"] == 0


# --- build_info ----------------------------------------------------------------------------------


class _Ext:
    def __init__(self, sources: list[str], nvcc: list[str]) -> None:
        self.sources = sources
        self.extra_compile_args = {"cxx": [], "nvcc": nvcc}


def test_archs_from_gencode_flags_else_env(monkeypatch: pytest.MonkeyPatch) -> None:
    ext = _Ext(["a.cu"], ["-gencode", "arch=compute_80,code=sm_80", "-gencode=arch=compute_90a,code=sm_90a"])
    assert build_info.archs_from_extensions([ext]) == ["8.0", "9.0a"]
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "7.5;8.6+PTX 12.0")
    assert build_info.archs_from_extensions([_Ext(["a.cu"], [])]) == ["7.5", "8.6", "12.0"]
    assert build_info.has_cuda_sources([ext]) and not build_info.has_cuda_sources([_Ext(["a.cpp"], [])])


def test_write_record_is_atomic_complete_and_readable(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="lacks the keys"):
        build_info.write_record(tmp_path, {"version": "1"})
    pytest.importorskip("torch")
    rec = build_info.collect("1.7.0+cpu.torch2.13")
    assert tuple(rec) == contract.BUILD_INFO_KEYS
    path = build_info.write_record(tmp_path, rec)
    assert json.loads(path.read_text()) == rec
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == [contract.BUILD_INFO_FILENAME]


TINY_SETUP = """
import sys
sys.path.insert(0, {repo!r})
from setuptools import setup, Extension
from build_support import build_info
setup(name="causal-conv1d", version="1.7.0", packages=["causal_conv1d"],
      ext_modules=[Extension("causal_conv1d._tiny", ["tiny.c"], py_limited_api=True)],
      cmdclass=build_info.wrap_cmdclass({{}}))
"""


@pytest.mark.slow
def test_record_lands_in_wheels_and_inplace_builds(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    proj = tmp_path / "proj"
    (proj / "causal_conv1d").mkdir(parents=True)
    (proj / "causal_conv1d" / "__init__.py").write_text("")
    (proj / "tiny.c").write_text(
        '#include <Python.h>\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "_tiny"};\n'
        "PyMODINIT_FUNC PyInit__tiny(void) { return PyModule_Create(&m); }\n"
    )
    (proj / "setup.py").write_text(TINY_SETUP.format(repo=str(REPO)))
    env = clean_env()
    run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=proj, env=env)
    rec = json.loads((proj / "causal_conv1d" / contract.BUILD_INFO_FILENAME).read_text())
    assert tuple(rec) == contract.BUILD_INFO_KEYS and rec["with_cuda"] is False
    (proj / "causal_conv1d" / contract.BUILD_INFO_FILENAME).unlink()
    run([sys.executable, "setup.py", "-q", "bdist_wheel", "-d", str(tmp_path / "dist")], cwd=proj, env=env)
    wheel = next((tmp_path / "dist").glob("*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        rec = json.loads(zf.read(f"causal_conv1d/{contract.BUILD_INFO_FILENAME}"))
    assert rec["version"] == "1.7.0" and rec["platform"] == build_info.platform_tag()


def test_real_wheel_carries_a_complete_record(real_cpu_wheel: Path) -> None:
    from .conftest import wheel_record

    rec = wheel_record(real_cpu_wheel)
    assert tuple(rec) == contract.BUILD_INFO_KEYS
    assert (
        rec["variant"] == "torch2.13-cpu"
        and rec["version"] == f"{contract.PACKAGE_VERSION}+cpu.torch2.13"
        and rec["cuda_archs"] == []
    )


def test_setup_py_metadata_commands_need_no_torch(tmp_path: Path) -> None:
    """sdist / metadata preparation run without torch (the build env under isolation has none)."""
    code = (
        "import sys, builtins; real = builtins.__import__\n"
        "def imp(name, *a, **k):\n"
        "    if name == 'torch' or name.startswith('torch.'): raise ImportError('no torch here')\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = imp\n"
        f"sys.argv = ['setup.py', '-q', 'egg_info', '--egg-base', {str(tmp_path)!r}]\n"
        "exec(compile(open('setup.py').read(), 'setup.py', 'exec'), {'__file__': 'setup.py', '__name__': '__main__'})\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, env=clean_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    requires = (next(tmp_path.glob("*.egg-info")) / "requires.txt").read_text()
    assert requires.strip() == "torch"


def test_fast_torch_probe_agrees_with_importing_torch() -> None:
    pytest.importorskip("torch")
    for py in [Path(sys.executable)]:
        fast = torch_probe.torch_info(str(py), fast=True)
        full = torch_probe.torch_info(str(py))
        assert full.importable, full.error
        assert (fast.version, fast.cuda, fast.hip, fast.cxx11_abi) == (
            full.version,
            full.cuda,
            full.hip,
            full.cxx11_abi,
        )


FAKE_TORCH = """
__version__ = "2.7.1+cu128"
class version:
    cuda = "12.8"
    hip = None
class _C:
    _GLIBCXX_USE_CXX11_ABI = False
"""

ISOLATION_SCRIPT = """
import json, sys
sys.path.insert(0, {repo!r})
from build_support.torch_target import find_target_torch, in_pip_isolation
info, why = find_target_torch()
print(json.dumps({{"isolated": in_pip_isolation(), "version": info.version, "why": why}}))
"""


def test_pip_isolation_uses_the_users_torch_not_the_build_envs(tmp_path: Path) -> None:
    """pip's isolated env (PYTHONPATH=.../pip-build-env-*/site, PYTHONNOUSERSITE=1) holding some
    other torch: the target is the torch of the interpreter with those variables removed."""
    torch = pytest.importorskip("torch")
    site = tmp_path / "pip-build-env-abc123" / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text(FAKE_TORCH)
    env = clean_env(PYTHONPATH=str(site), PYTHONNOUSERSITE="1")
    proc = run([sys.executable, "-c", ISOLATION_SCRIPT.format(repo=str(REPO))], env=env)
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["isolated"] is True
    assert r["version"] == str(torch.__version__)
    assert "isolated build environment has torch 2.7.1+cu128, which is not the torch you install into" in r["why"]
    assert sys.executable in r["why"] or str(Path(sys.executable)) in r["why"]
