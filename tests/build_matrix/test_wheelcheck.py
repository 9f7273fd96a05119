"""The wheel checks on small real wheels: one good, and each broken in exactly one way."""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

import causal_conv1d_contract as contract
from build_matrix import binaries, wheelcheck


def _status(results: list[wheelcheck.CheckResult]) -> dict[str, str]:
    return {r.check: r.status for r in results}


def _failed(results: list[wheelcheck.CheckResult]) -> set[str]:
    return {r.check for r in results if r.status == "fail"}


def test_good_wheel_passes_every_check(make_wheel) -> None:
    wheel = make_wheel()
    results = wheelcheck.check_wheel(wheel)
    assert [r.check for r in results] == list(wheelcheck.CHECKS)
    assert _failed(results) == set(), [r.line() for r in results]
    assert _status(results)["cxx11-abi"] == "pass"
    assert _status(results)["abi3"] == "pass"


def test_pre_cxx11_variant_with_pre_cxx11_binary_passes(make_wheel) -> None:
    # torch 2.5 builds are pre-cxx11: the label and the binary agree.
    wheel = make_wheel(variant="torch2.5-cpu")
    assert _failed(wheelcheck.check_wheel(wheel)) == set()


@pytest.mark.parametrize(
    ("kwargs", "failing", "message"),
    [
        # a cxx11 label on a binary compiled with _GLIBCXX_USE_CXX11_ABI=0
        ({"cxx11_abi": False}, {"cxx11-abi"}, "uses the pre-cxx11 ABI but torch2.13-cpu is labelled cxx11"),
        # the inverse: an old-ABI variant label on a cxx11 binary
        ({"variant": "torch2.5-cpu", "cxx11_abi": True}, {"cxx11-abi"}, "uses the cxx11 ABI"),
        # the CUDA driver in DT_NEEDED: would not import on a machine without a GPU driver
        ({"link_libcuda": True}, {"needed"}, "links libcuda.so.1"),
        # an extension using API beyond the cp39 stable ABI
        ({"non_abi3": True}, {"abi3"}, "abi3"),
        # no upper bound on torch
        ({"requires": ["torch>=2.13"]}, {"metadata"}, "torch pin"),
        # no torch requirement at all
        ({"requires": []}, {"metadata"}, "no Requires-Dist on torch"),
        # a build tool among the runtime requirements
        ({"requires": ["torch>=2.13,<2.14", "ninja"]}, {"metadata"}, "build tools among runtime requirements: ninja"),
        # the build record disagrees with the name
        ({"record_overrides": {"variant": "torch2.12-cpu"}}, {"build-record"}, "variant 'torch2.12-cpu'"),
        ({"record_overrides": {"cxx11_abi": False}}, {"build-record"}, "cxx11_abi False"),
        ({"record_overrides": {"extra_key": 1}}, {"build-record"}, "unknown keys ['extra_key']"),
        # no build record
        ({"drop_record": True}, {"build-record"}, "_build_info.json is missing"),
        # a stray file at the top level of the wheel
        (
            {"extra_files": {"stray.py": b"x = 1\n"}},
            {"contents"},
            "W202: Wheel library has undeclared toplevel entry: stray.py",
        ),
    ],
)
def test_broken_wheel_fails_the_named_check(make_wheel, kwargs: dict, failing: set[str], message: str) -> None:
    results = wheelcheck.check_wheel(make_wheel(**kwargs))
    assert _failed(results) == failing, [r.line() for r in results]
    details = " ".join(r.detail for r in results if r.status == "fail")
    assert message in details


@pytest.mark.parametrize(
    "filename",
    [
        "causal_conv1d-1.7.0-cp39-abi3-linux_x86_64.whl",  # no local version label
        "causal_conv1d-1.7.0+cpu.torch2.13-cp311-cp311-linux_x86_64.whl",  # not abi3
        "causal_conv1d-1.7.0+cpu.torch2-cp39-abi3-linux_x86_64.whl",  # malformed label
        "causal_conv1d-1.6.0+cpu.torch2.13-cp39-abi3-linux_x86_64.whl",  # not this package version
    ],
)
def test_bad_name_fails_name_check(make_wheel, filename: str) -> None:
    results = wheelcheck.check_wheel(make_wheel(filename=filename))
    assert "name" in _failed(results)


def test_expected_variant_and_arch_are_enforced(make_wheel) -> None:
    wheel = make_wheel()
    exp = wheelcheck.Expectation(variant=contract.Variant.parse("torch2.14-cpu"))
    assert "name" in _failed(wheelcheck.check_wheel(wheel, exp))
    exp = wheelcheck.Expectation(arch="aarch64")
    assert "name" in _failed(wheelcheck.check_wheel(wheel, exp))
    exp = wheelcheck.Expectation(variant=contract.Variant.parse("torch2.13-cpu"), arch="x86_64")
    assert _failed(wheelcheck.check_wheel(wheel, exp)) == set()


def test_unreadable_file_raises(tmp_path: Path) -> None:
    bogus = tmp_path / "causal_conv1d-1.7.0+cpu.torch2.13-cp39-abi3-linux_x86_64.whl"
    bogus.write_bytes(b"not a zip")
    with pytest.raises(wheelcheck.WheelUnreadable, match="cannot open as a zip"):
        wheelcheck.check_wheel(bogus)


@pytest.mark.parametrize(
    ("symbols", "expected"),
    [
        (["_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEED1Ev"], True),
        (["_Z3fooB5cxx11v"], True),  # [abi:cxx11] tag
        (["_ZNSsD1Ev"], False),  # old COW std::string destructor
        (["_ZN3c106detail14torchCheckFailEPKcS2_jRKSs"], False),  # const std::string& parameter, old ABI
        (["_Z3barv", "PyInit__C"], None),  # no evidence either way
    ],
)
def test_binary_cxx11_abi_from_symbols(symbols: list[str], expected) -> None:
    assert binaries.binary_cxx11_abi(symbols) is expected


def test_mixed_abi_symbols_are_an_error() -> None:
    with pytest.raises(ValueError, match="both ABIs"):
        binaries.binary_cxx11_abi(["_ZNSsD1Ev", "_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEED1Ev"])


@pytest.mark.parametrize("bad", ["9", "sm_90", "9.0+ptx", "abc"])
def test_parse_arch_list_rejects_bad_items(bad: str) -> None:
    with pytest.raises(ValueError, match="Invalid CUDA arch"):
        wheelcheck.parse_arch_list(f"8.0;{bad}")


def test_parse_arch_list_accepts_torch_syntax() -> None:
    assert wheelcheck.parse_arch_list("7.5;8.0 9.0a,12.0+PTX") == ("7.5", "8.0", "9.0a", "12.0+PTX")


# --- the cuda-archs check on a real CUDA binary (nvcc from this machine or NVIDIA's pip wheels)


def _nvcc() -> str | None:
    return shutil.which("nvcc") or (("/usr/local/cuda/bin/nvcc") if Path("/usr/local/cuda/bin/nvcc").exists() else None)


@pytest.fixture(scope="module")
def cuda_object(tmp_path_factory) -> Path:
    nvcc = _nvcc()
    if nvcc is None or binaries.find_cuobjdump() is None:
        pytest.skip("needs nvcc and cuobjdump (pip install nvidia-cuda-cuobjdump)")
    d = tmp_path_factory.mktemp("cu")
    (d / "k.cu").write_text("__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n")
    out = d / "k.o"
    subprocess.run(
        [
            nvcc,
            "-c",
            "-Xcompiler",
            "-fPIC",
            "-gencode",
            "arch=compute_80,code=sm_80",
            "-gencode",
            "arch=compute_90,code=[sm_90,compute_90]",
            str(d / "k.cu"),
            "-o",
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    return out


def test_embedded_cuda_archs_read_by_cuobjdump(cuda_object: Path) -> None:
    sass, ptx = binaries.embedded_cuda_archs(binaries.find_cuobjdump(), cuda_object)
    assert sass == {"80", "90"}
    assert ptx == {"90"}


def _cuda_wheel_from_object(make_wheel, obj: Path, archs: list[str]) -> Path:
    """A cu130 synthetic wheel whose extension carries the device code of ``obj``."""
    wheel = make_wheel(variant="torch2.14-cu130", record_overrides={"cuda_archs": archs, "cuda_version": "13.0"})
    so = wheel.parent / "with-cuda.so"
    build = next(wheel.parent.glob("build-*"))
    subprocess.run(
        [
            "g++",
            "-shared",
            "-fPIC",
            "-DPy_LIMITED_API=0x03090000",
            f"-I{__import__('sysconfig').get_paths()['include']}",
            str(build / "ext.cpp"),
            str(obj),
            "-o",
            str(so),
        ],
        check=True,
        capture_output=True,
    )
    rewritten = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(rewritten, "w") as dst:
        for item in src.infolist():
            data = so.read_bytes() if item.filename.endswith("_C.abi3.so") else src.read(item.filename)
            dst.writestr(item, data)
    rewritten.replace(wheel)
    return wheel


def test_cuda_archs_match_planned_list(make_wheel, cuda_object: Path) -> None:
    wheel = _cuda_wheel_from_object(make_wheel, cuda_object, ["8.0", "9.0+PTX"])
    exp = wheelcheck.Expectation(cuda_archs=("8.0", "9.0+PTX"), require_cuobjdump=True)
    status = _status(wheelcheck.check_wheel(wheel, exp, only=("cuda-archs",)))
    assert status == {"cuda-archs": "pass"}


@pytest.mark.parametrize("planned", [("9.0",), ("8.0", "9.0"), ("8.0", "9.0+PTX", "10.0")])
def test_cuda_archs_mismatch_fails(make_wheel, cuda_object: Path, planned: tuple[str, ...]) -> None:
    wheel = _cuda_wheel_from_object(make_wheel, cuda_object, list(planned))
    results = wheelcheck.check_wheel(wheel, wheelcheck.Expectation(cuda_archs=planned), only=("cuda-archs",))
    assert _status(results) == {"cuda-archs": "fail"}, results


def test_cpu_wheel_with_device_code_fails(make_wheel, cuda_object: Path) -> None:
    wheel = _cuda_wheel_from_object(make_wheel, cuda_object, [])
    # relabel as a CPU wheel by checking it against the CPU variant's expectations
    cpu = wheel.with_name(wheel.name.replace("cu130.torch2.14", "cpu.torch2.14"))
    shutil.copy(wheel, cpu)
    results = wheelcheck.check_wheel(cpu, only=("cuda-archs",))
    assert _status(results) == {"cuda-archs": "fail"}
    assert "CPU wheel embeds CUDA code" in results[0].detail


# --- the command line


def test_cli_check_good_and_bad(make_wheel, run_cli) -> None:
    good = make_wheel()
    bad = make_wheel(link_libcuda=True)
    proc = run_cli("check", str(good))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK" in proc.stdout
    proc = run_cli("check", str(good), str(bad), "--json")
    assert proc.returncode == 11, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert [r["ok"] for r in report] == [True, False]
    failed = [r["check"] for r in report[1]["results"] if r["status"] == "fail"]
    assert failed == ["needed"]


def test_cli_check_directory_and_job(make_wheel, run_cli) -> None:
    good = make_wheel(variant="torch2.9-cpu")
    proc = run_cli("check", "--job", "torch2.9-cpu-linux-x86_64", str(good.parent))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = run_cli("check", "--job", "torch2.8-cpu-linux-x86_64", str(good))
    assert proc.returncode == 11
    assert "planned torch2.8-cpu" in proc.stdout


def test_cli_check_stable_job(make_wheel, run_cli) -> None:
    stable = make_wheel(variant="stable2.10-cpu")
    proc = run_cli("check", "--job", "stable2.10-cpu-linux-x86_64", str(stable))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = run_cli("check", "--variant", "stable2.10-cpu", str(stable))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # a per-minor wheel where the plan has the stable one
    proc = run_cli("check", "--job", "stable2.10-cpu-linux-x86_64", str(make_wheel(variant="torch2.9-cpu")))
    assert proc.returncode == 11 and "planned stable2.10-cpu" in proc.stdout


# --- stable-ABI wheels (+cpu.stable2.10, torch>=2.10 with no upper bound)


def test_stable_wheel_passes_every_check(make_wheel) -> None:
    for variant, build in (
        ("stable2.10-cpu", "torch2.13-cpu"),
        ("stable2.10-cpu", "torch2.10-cpu"),
        ("stable2.10-cu13", "torch2.14-cu130"),
        ("stable2.10-cu12", "torch2.11-cu128"),
    ):
        wheel = make_wheel(variant=variant, build_torch=build)
        assert "stable2.10" in wheel.name
        results = wheelcheck.check_wheel(wheel, wheelcheck.Expectation(variant=contract.StableVariant.parse(variant)))
        failed = _failed(results) - {"cuda-archs"}  # the synthetic CUDA wheels carry no device code
        assert failed == set(), [r.line() for r in results]
        detail = {r.check: r.detail for r in results}
        assert "torch>=2.10" in detail["metadata"] and "<" not in detail["metadata"]
        assert "stable-ABI wheel" in detail["cxx11-abi"]


def test_stable_wheel_any_cxx11_abi(make_wheel) -> None:
    # the stable ABI crosses only C shims: a pre-cxx11 binary is no mislabel
    results = wheelcheck.check_wheel(make_wheel(variant="stable2.10-cpu", cxx11_abi=False))
    assert _failed(results) == set(), [r.line() for r in results]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"requires": ["torch>=2.10,<2.11"]}, "torch pin 'torch<2.11,>=2.10' != 'torch>=2.10'"),
        ({"requires": ["torch>=2.13"]}, "!= 'torch>=2.10'"),
        ({"record_overrides": {"stable_abi_target": None}}, "stable_abi_target None != '2.10'"),
        ({"record_overrides": {"torch_version": "2.9.1+cpu"}}, "needs torch >= 2.10"),
        ({"record_overrides": {"cuda_version": "12.8", "torch_version": "2.13.0+cu128"}}, "CPU torch"),
        ({"record_overrides": {"cuda_major": 13}}, "cuda_major 13 != None"),
        ({"record_overrides": {"variant": "torch2.13-cpu"}}, "variant 'torch2.13-cpu' != 'stable2.10-cpu'"),
    ],
)
def test_broken_stable_wheel_fails(make_wheel, kwargs: dict, message: str) -> None:
    results = wheelcheck.check_wheel(make_wheel(variant="stable2.10-cpu", **kwargs))
    details = " ".join(r.detail for r in results if r.status == "fail")
    assert message in details, [r.line() for r in results]


def test_stable_record_in_a_per_minor_wheel_fails(make_wheel) -> None:
    results = wheelcheck.check_wheel(make_wheel(variant="torch2.9-cpu", record_overrides={"stable_abi_target": "2.10"}))
    assert _failed(results) == {"build-record"}
    assert "stable_abi_target '2.10' in a per-torch-minor wheel" in " ".join(r.detail for r in results)


def test_cli_check_bad_input(tmp_path: Path, run_cli) -> None:
    proc = run_cli("check", "--job", "torch2.9-cpu-linux-x86_46", str(tmp_path / "x.whl"))
    assert proc.returncode == 3
    assert "torch2.9-cpu-linux-x86_64" in proc.stderr  # the close valid job id is suggested
    proc = run_cli("check", "--only", "nedeed", str(tmp_path / "x.whl"))
    assert proc.returncode == 2 and "unknown check" in proc.stderr
    proc = run_cli("check", str(tmp_path / "missing.whl"))
    assert proc.returncode == 11 and "no such file" in proc.stderr


# --------------------------------------------------------------------------------------------
# stable-abi: the symbol check of stable-ABI wheels


def test_stable_abi_check_skips_per_minor_wheels(make_wheel) -> None:
    (result,) = wheelcheck.check_wheel(make_wheel(imports="torch_cxx"), only=["stable-abi"])
    assert result.status == "skip" and "not a stable-ABI build" in result.detail


def test_stable_abi_check_passes_a_shim_only_binary(make_wheel) -> None:
    wheel = make_wheel(imports="c_shims", record_overrides={"stable_abi_target": "2.10"})
    (result,) = wheelcheck.check_wheel(wheel, only=["stable-abi"])
    assert result.status == "pass", result.line()
    assert "2 torch C shims, no torch C++ symbol" in result.detail


def test_stable_abi_check_fails_a_legacy_linked_binary(make_wheel) -> None:
    """A wheel whose record says stable but whose binary imports ATen/c10 C++ symbols (as an ATen
    build does) fails, naming the demangled symbols."""
    wheel = make_wheel(imports="torch_cxx", record_overrides={"stable_abi_target": "2.10"})
    (result,) = wheelcheck.check_wheel(wheel, only=["stable-abi"])
    assert result.status == "fail"
    assert "imports 2 torch C++ symbol(s)" in result.detail
    assert (
        "c10::causal_conv1d_probe(c10::TensorImpl*)" in result.detail and "at::causal_conv1d_threads()" in result.detail
    )


def test_torch_cxx_imports_without_cxxfilt(make_wheel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without c++filt the mangled names are matched instead: the same verdicts."""
    legacy = make_wheel(imports="torch_cxx")
    stable = make_wheel(imports="c_shims", filename="causal_conv1d-1.7.0+cpu.torch2.12-cp39-abi3-linux_x86_64.whl")
    monkeypatch.setattr(binaries, "_demangle", lambda names: None)
    for wheel, n_bad in ((legacy, 2), (stable, 0)):
        out = tmp_path / wheel.stem
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(out)
        offending, _ = binaries.torch_cxx_imports(out / "causal_conv1d" / "_C.abi3.so")
        assert len(offending) == n_bad, offending
        assert all(name.startswith("_Z") for name in offending)
