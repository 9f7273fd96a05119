"""The import guard and doctor with stable-ABI build records (``stable_abi_target`` "2.10").

A stable record serves any torch >= its target whose accelerator family matches, whatever the
C++ ABI, and the CPU wheel also loads on any CUDA torch >= its target (CPU kernels only: doctor says
so in a note and prints the CUDA wheel's command); it refuses torch 2.9, a CUDA wheel on a CPU torch
and a cu12 wheel on a cu13 torch with ``StableVariant.refusal``'s sentence. The subprocess tests put
a stable record into the real CPU wheel (torch 2.13 is what this machine has; a CUDA torch is
played by setting ``torch.version.cuda`` / ``torch.__version__`` before the import): the guard
decides before the extension loads.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, Optional

import pytest

import causal_conv1d_contract as contract
from tests.helpers.wheels import write_wheel

from .conftest import REPO
from .test_guard_doctor import doctor_json, py, set_record, unpacked  # noqa: F401  (fixture)


def stable_record(family: str = "cpu", **over: Any) -> dict[str, Any]:
    build = {"cpu": ("2.13.0+cpu", None), "cu12": ("2.11.0+cu128", "12.8"), "cu13": ("2.14.1+cu132", "13.2")}[family]
    sv = contract.StableVariant(family)
    record = {
        "version": f"{contract.PACKAGE_VERSION}+{contract.local_version(sv)}",
        "variant": sv.name,
        "torch_version": build[0],
        "cuda_version": build[1],
        "cxx11_abi": True,
        "cuda_archs": [] if build[1] is None else ["8.0", "9.0", "12.0"],
        "with_cuda": build[1] is not None,
        "platform": "manylinux_2_28_x86_64",
        "source_commit": None,
        "stable_abi_target": "2.10",
        "cuda_major": None if build[1] is None else int(build[1].split(".")[0]),
    }
    record.update(over)
    assert tuple(record) == contract.BUILD_INFO_KEYS
    return record


@pytest.fixture(scope="module")
def guard():
    """_guard.py loaded by path, as test_guard_contract_agreement does (no package import)."""
    spec = importlib.util.spec_from_file_location(
        "_g_stable", Path(__file__).resolve().parents[2] / "causal_conv1d" / "_guard.py"
    )
    assert spec and spec.loader
    g = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(g)
    return g


def test_stable_record_accepts_any_torch_of_its_family(guard) -> None:
    cpu, cu12, cu13 = stable_record("cpu"), stable_record("cu12"), stable_record("cu13")
    assert guard.mismatches(cpu, "2.13.0+cpu", None, True) == []
    assert guard.mismatches(cpu, "2.10.0", None, True) == []
    assert guard.mismatches(cpu, "2.15.0+cpu", None, False) == []  # a newer torch, the other C++ ABI: fine
    assert guard.mismatches(cpu, "2.21.3", None, None) == []  # a torch nobody has seen yet
    for torch, cuda in (
        ("2.10.0+cu126", "12.6"),
        ("2.12.1+cu126", "12.6"),
        ("2.11.0+cu128", "12.8"),
        ("2.15.0+cu129", "12.9"),
    ):
        assert guard.mismatches(cu12, torch, cuda, True) == [], torch
    assert guard.mismatches(cu13, "2.11.0+cu130", "13.0", True) == []
    assert guard.mismatches(cu13, "2.16.0+cu132", "13.2", False) == []
    for torch, cuda in (("2.11.0+cu130", "13.0"), ("2.12.1+cu126", "12.6"), ("2.14.1+cu130", "13.0")):
        assert guard.mismatches(cu13 if cuda.startswith("13") else cu12, torch, cuda, True) == [], torch
        assert guard.limitation(cu13 if cuda.startswith("13") else cu12, torch, cuda) is None


@pytest.mark.parametrize(
    ("torch", "cuda"),
    [
        ("2.10.0+cu126", "12.6"),
        ("2.11.0+cu130", "13.0"),
        ("2.12.1+cu126", "12.6"),
        ("2.14.1+cu130", "13.0"),
        ("2.16.0+cu132", "13.2"),
    ],
)
def test_cpu_stable_record_loads_on_a_cuda_torch_with_cpu_kernels_only(guard, torch: str, cuda: str) -> None:
    """The CPU wheel is accepted on a CUDA torch (a CPU-only runner with PyPI's default torch); the
    guard says nothing at import, ``limitation`` (doctor's note) names what is missing."""
    cpu = stable_record("cpu")
    assert guard.mismatches(cpu, torch, cuda, True) == []
    assert guard.mismatches(cpu, torch, cuda, False) == []  # any C++ ABI, as on a CPU torch
    assert guard.limitation(cpu, torch, cuda) == contract.StableVariant("cpu").limitation(torch, cuda)
    assert guard.limitation(cpu, torch, cuda).startswith("only CPU kernels are present")
    assert guard.limitation(cpu, "2.13.0+cpu", None) is None
    legacy_cpu = {**cpu, "variant": "torch2.13-cpu", "stable_abi_target": None}
    assert guard.limitation(legacy_cpu, torch, cuda) is None  # the per-minor CPU wheel keeps its rule:
    assert guard.mismatches(legacy_cpu, "2.13.0+cu130", "13.0", True) != []  # refused on a CUDA torch


def _other_accel(family: str, torch: str, cuda: Optional[str], installed: str) -> tuple[str, str, Optional[str], str]:
    """A refusal case of a CUDA-family record on a torch of another accelerator; ``installed`` is what
    the sentence calls that torch (``"a CPU build"``, ``"a CUDA 13 build (13.0)"``)."""
    sentence = f"this build is for CUDA {family[2:]} torch, but the installed torch {torch} is {installed}"
    return family, torch, cuda, sentence


@pytest.mark.parametrize(
    ("family", "torch", "cuda", "sentence"),
    [
        ("cpu", "2.9.1+cpu", None, "this stable-ABI build needs torch >= 2.10, but torch 2.9.1+cpu is installed"),
        _other_accel("cu12", "2.13.0+cpu", None, "a CPU build"),
        _other_accel("cu13", "2.13.0+cpu", None, "a CPU build"),
        _other_accel("cu12", "2.13.0+cu130", "13.0", "a CUDA 13 build (13.0)"),
        ("cpu", "2.9.1+cu128", "12.8", "this stable-ABI build needs torch >= 2.10, but torch 2.9.1+cu128 is installed"),
        _other_accel("cu13", "2.13.0+cu128", "12.8", "a CUDA 12 build (12.8)"),
        ("cu13", "2.9.1+cu130", "13.0", "needs torch >= 2.10"),
    ],
)
def test_stable_record_refusals(guard, family: str, torch: str, cuda: str, sentence: str) -> None:
    [problem] = guard.mismatches(stable_record(family), torch, cuda, True)
    assert sentence in problem
    assert problem == contract.StableVariant(family).refusal(torch, cuda)  # the contract's sentence


def test_fix_names_the_family_index_for_any_torch_2_10_plus(guard) -> None:
    record = stable_record("cu12")
    fix = guard.fix_instructions(record, "2.15.0+cu130", "13.0", True)  # 2.15: newer than most data
    url = f"{contract.DEFAULT_INDEX_URL}whl/stable2.10-cu13/"
    assert "served by the stable-ABI wheel stable2.10-cu13" in fix and url in fix
    # torch and the wheel together: torch 2.15.0 from PyTorch's cu130 index, the wheel from the family page
    assert (
        f'pip install "torch==2.15.0" "causal-conv1d==1.7.0.post1+cu13.stable2.10" --only-binary causal-conv1d '
        f"--index-url https://download.pytorch.org/whl/cu130/ --extra-index-url {url}"
    ) in fix
    assert "Or install a torch this build serves: torch >= 2.10, CUDA 12." in fix
    # an unofficial C++ ABI on torch >= 2.10 is served by the stable wheel too
    assert url.replace("cu13", "cpu") in guard.fix_instructions(record, "2.13.0+cpu", None, False)
    # torch 2.9 on a stable wheel: the per-minor index of that torch
    assert f"{contract.DEFAULT_INDEX_URL}whl/torch2.9-cu128/" in guard.fix_instructions(
        record, "2.9.1+cu128", "12.8", True
    )
    assert guard.record_kind(record) == "stable ABI (torch >= 2.10, CUDA 12)"
    assert guard.record_kind(stable_record("cpu")) == "stable ABI (torch >= 2.10, CPU)"
    legacy = {**record, "stable_abi_target": None, "torch_version": "2.9.1+cu128", "cuda_version": "12.8"}
    assert guard.record_kind(legacy) == "per torch minor (torch 2.9, CUDA 12.8)"


def test_stable_record_imports_on_this_torch(unpacked: Path, torch_venv) -> None:  # noqa: F811
    set_record(unpacked, stable_record("cpu"))
    for python in (sys.executable, str(torch_venv.python)):  # torch_venv: no packaging
        proc = py(unpacked, ["-c", "import causal_conv1d as c; print(c.__version__)"], python=python)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip().endswith("1.7.0.post1+cpu.stable2.10")


@pytest.mark.parametrize("family", ["cu12", "cu13"])
def test_cuda_stable_wheel_on_a_cpu_torch_is_refused(unpacked: Path, torch_venv, family: str) -> None:  # noqa: F811
    set_record(unpacked, stable_record(family))
    (unpacked / contract.DIST_NAME / "_C.so").write_bytes(b"not an ELF file")  # the guard must decide first
    for python in (sys.executable, str(torch_venv.python)):
        err = py(unpacked, ["-c", "import causal_conv1d"], python=python).stderr
        assert "causal_conv1d._guard.BuildMismatch" in err, err
        assert f"variant stable2.10-{family}) does not match the installed torch" in err
        assert f"this build is for CUDA {family[2:]} torch, but the installed torch 2.13.0+cpu is a CPU build" in err
        assert f"{contract.DEFAULT_INDEX_URL}whl/stable2.10-cpu/" in err
        assert (
            'pip install "torch==2.13.0" "causal-conv1d==1.7.0.post1+cpu.stable2.10" --only-binary causal-conv1d' in err
        )
        assert "invalid ELF header" not in err


#: Before ``import causal_conv1d``: the CPU torch 2.13 of this machine reports itself as a CUDA 13
#: build of torch 2.14.1 (what the guard and doctor read: ``torch.__version__``, ``torch.version.cuda``).
AS_CUDA_TORCH = "import torch; torch.__version__ = '2.14.1+cu130'; torch.version.cuda = '13.0'\n"


def test_cpu_stable_wheel_imports_on_a_cuda_torch(unpacked: Path) -> None:  # noqa: F811
    set_record(unpacked, stable_record("cpu"))
    code = AS_CUDA_TORCH + (
        "import causal_conv1d as c\n"
        "x, w = torch.randn(2, 8, 16), torch.randn(8, 4)\n"
        "from causal_conv1d.causal_conv1d_interface import causal_conv1d_ref\n"
        "assert torch.allclose(c.causal_conv1d_fn(x, w), causal_conv1d_ref(x, w), atol=1e-5)\n"  # CPU kernels work
        "cuda_only = torch._C.DispatchKeySet(torch._C.DispatchKey.CUDA)\n"
        "try:\n"
        "    torch.ops.causal_conv1d.fwd.default.redispatch(cuda_only, x, w, None, None, None, False, False)\n"
        "except RuntimeError as exc:\n"
        "    print('CUDA:', exc)\n"
        "print('version', c.__version__)\n"
    )
    proc = py(unpacked, ["-c", code])
    assert proc.returncode == 0, proc.stderr
    assert "BuildMismatch" not in proc.stderr and proc.stderr.strip() == "", proc.stderr  # no warning at import
    assert "version 1.7.0.post1+cpu.stable2.10" in proc.stdout
    assert (
        "causal_conv1d was built without CUDA kernels (CPU-only build): causal_conv1d::fwd got CUDA tensors"
        in proc.stdout
    )
    assert "`python -m causal_conv1d doctor` prints the command" in proc.stdout
    # the CUDA wheels keep their family: cu12 on this (pretended) cu13 torch is refused before _C loads
    set_record(unpacked, stable_record("cu12"))
    err = py(unpacked, ["-c", AS_CUDA_TORCH + "import causal_conv1d"]).stderr
    assert "this build is for CUDA 12 torch, but the installed torch 2.14.1+cu130 is a CUDA 13 build (13.0)" in err, err


def test_doctor_says_cpu_kernels_only_and_names_the_cuda_wheel(unpacked: Path) -> None:  # noqa: F811
    set_record(unpacked, stable_record("cpu"))
    base = "http://mirror.example/"
    doctor = "from causal_conv1d.doctor import main; raise SystemExit(main({args}))"
    proc = py(
        unpacked,
        ["-c", AS_CUDA_TORCH + doctor.format(args="['--json', '--offline']")],
        **{contract.ENV_INDEX_URL: base},
    )
    r = json.loads(proc.stdout)
    assert proc.returncode == 0 and r["problems"] == [], r["problems"]  # a valid install, not a problem
    assert r["import"]["ok"] is True and r["build_record"]["status"] == "ok"
    assert r["build_record"]["limitation"] == contract.StableVariant("cpu").limitation("2.14.1+cu130", "13.0")
    # what is recommended stays the CUDA family of this torch
    assert r["variant"] == "torch2.14-cu130" and r["wheel_variant"] == "stable2.10-cu13"
    cuda_cmd = (
        'pip install "torch==2.14.1" "causal-conv1d==1.7.0.post1+cu13.stable2.10" --only-binary causal-conv1d '
        f"--index-url https://download.pytorch.org/whl/cu130/ --extra-index-url {base}whl/stable2.10-cu13/"
    )
    assert r["commands"]["pip_exact"] == cuda_cmd
    assert r["notes"] == [
        "only CPU kernels are present: this is the CPU wheel (stable2.10-cpu) and the installed torch 2.14.1+cu130 is "
        "a CUDA 13 build; CUDA tensors raise 'built without CUDA kernels'; for the CUDA kernels install the "
        f"stable2.10-cu13 wheel:  {cuda_cmd}"
    ]
    text = py(
        unpacked, ["-c", AS_CUDA_TORCH + doctor.format(args="['--offline']")], **{contract.ENV_INDEX_URL: base}
    ).stdout
    assert "notes:\n  - only CPU kernels are present: this is the CPU wheel (stable2.10-cpu)" in text, text
    assert cuda_cmd in text and "no problems found" in text
    # on the CPU torch it serves: no note
    rc, r = doctor_json(unpacked, "--offline")
    assert rc == 0 and r["notes"] == [] and r["build_record"]["limitation"] is None


def _stable_site(root: Path, family: str) -> str:
    """An index (folder, file:// URL) with one stable wheel of ``family`` built by index_site."""
    wheels = root / "stable-wheels"
    write_wheel(wheels, variant=f"stable2.10-{family}", platform="linux_x86_64", requires_dist=("torch>=2.10",))
    from index_site.site import BuildOptions, build_site

    build_site(BuildOptions(wheels_dir=wheels, out=root / "index", now="2026-01-01T00:00:00Z"))
    return (root / "index").as_uri() + "/"


def test_doctor_reports_the_stable_kind_and_finds_the_wheel(unpacked: Path, tmp_path: Path) -> None:  # noqa: F811
    set_record(unpacked, stable_record("cpu"))
    index = _stable_site(tmp_path, "cpu")
    rc, r = doctor_json(unpacked, **{contract.ENV_INDEX_URL: index})
    assert rc == 0, r["problems"]
    assert r["build_record"]["kind"] == "stable ABI (torch >= 2.10, CPU)"
    assert r["variant"] == "torch2.13-cpu" and r["wheel_variant"] == "stable2.10-cpu"
    assert r["wheel_kind"] == "stable ABI: one wheel for every torch >= 2.10 with CPU"
    assert r["index"]["has_wheel"] is True and r["index"]["wheel"].startswith(
        "causal_conv1d-1.7.0.post1+cpu.stable2.10-"
    )
    assert r["commands"]["pip_exact"] == (
        'pip install "torch==2.13.0" "causal-conv1d==1.7.0.post1+cpu.stable2.10" '
        "--only-binary causal-conv1d --index-url https://download.pytorch.org/whl/cpu/ "
        f"--extra-index-url {index}whl/stable2.10-cpu/"
    )
    text = py(unpacked, ["-m", "causal_conv1d", "doctor"], **{contract.ENV_INDEX_URL: index}).stdout
    for needle in (
        "kind: stable ABI (torch >= 2.10, CPU)",
        "wheel       stable2.10-cpu (stable ABI",
        "index       yes: causal_conv1d-1.7.0.post1+cpu.stable2.10",
        "no problems found",
    ):
        assert needle in text, text


def test_doctor_for_torch_2_15_finds_the_family_wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A torch the per-minor pages may not know (2.15; 2.16 beyond the data): the family page serves it."""
    sys.path.insert(0, str(REPO))
    from causal_conv1d import doctor

    index = _stable_site(tmp_path, "cu13")
    monkeypatch.setenv(contract.ENV_INDEX_URL, index)
    for version, cuda in (("2.15.0+cu130", "13.0"), ("2.16.0+cu132", "13.2")):
        monkeypatch.setattr(
            doctor,
            "torch_section",
            lambda v=version, cu=cuda: {
                "importable": True,
                "version": v,
                "cuda": cu,
                "hip": None,
                "build": "cuda",
                "cxx11_abi": True,
                "location": "/nowhere",
                "gpus": [],
            },
        )
        r = doctor.collect()
        assert r["variant"] == f"torch{version[:4]}-{contract.accel_from_cuda(cuda)}"
        assert r["wheel_variant"] == "stable2.10-cu13"
        assert r["index"]["url"] == f"{index}whl/stable2.10-cu13/causal-conv1d/"
        assert r["index"]["has_wheel"] is True and "+cu13.stable2.10-" in r["index"]["wheel"]
        assert r["commands"]["pip"].endswith(f"--extra-index-url {index}whl/stable2.10-cu13/")
        assert "wheel       stable2.10-cu13" in doctor.format_text(r)
    # torch 2.9 keeps its per-minor page
    monkeypatch.setattr(
        doctor,
        "torch_section",
        lambda: {
            "importable": True,
            "version": "2.9.1+cu130",
            "cuda": "13.0",
            "hip": None,
            "build": "cuda",
            "cxx11_abi": True,
            "location": "/nowhere",
            "gpus": [],
        },
    )
    r = doctor.collect(check_index=False)
    assert r["wheel_variant"] == "torch2.9-cu130" and r["wheel_kind"] == "per torch minor: torch 2.9 only"
    assert json.dumps(r)  # the --json form serialises
