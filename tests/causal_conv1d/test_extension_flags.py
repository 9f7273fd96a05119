"""build_support/extension.py: the Extension definition and the environment switches (no compiling)."""

from __future__ import annotations

import sys

import pytest
import torch

import causal_conv1d_contract as contract
from build_support import extension

_NEW_TORCH = tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 10)


def test_install_requires_pins_the_running_torch_minor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(contract.ENV_STABLE_ABI, "FALSE")  # legacy op layer: one wheel per torch minor
    major, minor = (int(p) for p in torch.__version__.split(".")[:2])
    assert extension.install_requires() == [f"torch>={major}.{minor},<{major}.{minor + 1}"]


@pytest.mark.skipif(not _NEW_TORCH, reason="a stable build needs torch >= 2.10")
def test_install_requires_of_a_stable_build_has_no_upper_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(contract.ENV_STABLE_ABI, "TRUE")
    assert extension.install_requires() == ["torch>=2.10"]


@pytest.mark.parametrize(
    "value, stable",
    [(None, _NEW_TORCH), ("", _NEW_TORCH), ("TRUE", True), ("on", True), ("FALSE", False), ("0", False)],
)
def test_stable_abi_switch(monkeypatch: pytest.MonkeyPatch, value: str, stable: bool) -> None:
    """Unset: stable iff torch >= 2.10; CAUSAL_CONV1D_STABLE_ABI overrides. A stable build defines the
    op layer's switch and pins TORCH_TARGET_VERSION to 2.10."""
    if stable and not _NEW_TORCH:
        pytest.skip("a stable build needs torch >= 2.10 to build against")
    monkeypatch.setenv(contract.ENV_SKIP_CUDA_BUILD, "TRUE")
    if value is None:
        monkeypatch.delenv(contract.ENV_STABLE_ABI, raising=False)
    else:
        monkeypatch.setenv(contract.ENV_STABLE_ABI, value)
    assert extension.stable_abi() is stable
    (ext,) = extension.ext_modules()
    flags = ext.extra_compile_args["cxx"]
    assert ("-DCAUSAL_CONV1D_STABLE_ABI=1" in flags) is stable
    assert ("-DTORCH_TARGET_VERSION=0x020a000000000000" in flags) is stable
    assert not any(f.startswith("-DUSE_CUDA") for f in flags)  # only a CUDA stable build needs the CUDA shims
    assert ("csrc/autograd.cpp" in ext.sources) is not stable  # the C++ autograd: legacy only


def test_stable_abi_switch_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(contract.ENV_STABLE_ABI, raising=False)
    assert extension.stable_abi((2, 9)) is False and extension.stable_abi((2, 10)) is True
    monkeypatch.setenv(contract.ENV_STABLE_ABI, "TRUE")
    with pytest.raises(contract.InvalidSetting, match=r"CAUSAL_CONV1D_STABLE_ABI=TRUE needs torch >= 2.10.*torch 2.9"):
        extension.stable_abi((2, 9))
    monkeypatch.setenv(contract.ENV_STABLE_ABI, "maybe")
    with pytest.raises(contract.InvalidSetting, match=r"Invalid value for CAUSAL_CONV1D_STABLE_ABI .*'maybe'"):
        extension.stable_abi((2, 13))


def test_cpu_extension_for_skip_or_cpu_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(contract.ENV_SKIP_CUDA_BUILD, "TRUE")
    (ext,) = extension.ext_modules()
    assert ext.name == "causal_conv1d._C" and ext.py_limited_api
    cpp_autograd = [] if extension.stable_abi() else ["csrc/autograd.cpp"]  # stable: autograd in _ops.py
    cpu = [
        f"csrc/cpu/{name}.cpp"
        for name in (
            "bwd",
            "dispatch",
            "fwd",
            "fwd_scalar",
            "fwd_simd",
            "isa",
            "packed_bwd",
            "packed_fwd",
            "register",
            "spec_update",
            "update",
            "varlen_fwd",
        )
    ]
    assert sorted(ext.sources) == sorted([*cpp_autograd, *cpu, "csrc/ops.cpp"])
    flags = ext.extra_compile_args["cxx"]
    assert "-DCAUSAL_CONV1D_WITH_CUDA" not in flags and "-fopenmp" in flags
    assert not any(lib.startswith("cuda") for lib in ext.libraries)


@pytest.mark.skipif(sys.platform == "win32", reason="GNU-style link flags")
def test_library_is_linked_without_host_debug_sections(monkeypatch: pytest.MonkeyPatch) -> None:
    """setuptools compiles with -g; the wheel's library drops the DWARF at link time (a CUDA build's
    _C.so goes from ~20 MB to ~2 MB) and keeps its symbol tables, which the wheel checks read."""
    monkeypatch.setenv(contract.ENV_SKIP_CUDA_BUILD, "TRUE")
    (ext,) = extension.ext_modules()
    assert "-Wl,--strip-debug" in ext.extra_link_args and "-fopenmp" in ext.extra_link_args


@pytest.mark.parametrize("value, expected", [("TRUE", 1), ("false", 0), ("1", 1), ("0", 0)])
def test_force_cxx11_abi(monkeypatch: pytest.MonkeyPatch, value: str, expected: int) -> None:
    monkeypatch.setenv(contract.ENV_SKIP_CUDA_BUILD, "TRUE")
    monkeypatch.setenv(contract.ENV_FORCE_CXX11_ABI, value)
    (ext,) = extension.ext_modules()
    assert f"-D_GLIBCXX_USE_CXX11_ABI={expected}" in ext.extra_compile_args["cxx"]


def test_default_abi_is_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(contract.ENV_SKIP_CUDA_BUILD, "TRUE")
    monkeypatch.delenv(contract.ENV_FORCE_CXX11_ABI, raising=False)
    (ext,) = extension.ext_modules()
    assert f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}" in ext.extra_compile_args["cxx"]


def test_bad_switch_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(contract.ENV_FORCE_CXX11_ABI, "maybe")
    with pytest.raises(ValueError, match=r"CAUSAL_CONV1D_FORCE_CXX11_ABI .*'maybe'"):
        extension.ext_modules()
    monkeypatch.delenv(contract.ENV_FORCE_CXX11_ABI)
    monkeypatch.setenv("NVCC_THREADS", "lots")
    with pytest.raises(ValueError, match=r"NVCC_THREADS .*'lots'"):
        extension._nvcc_flags()


def test_cmdclass_is_torch_build_extension() -> None:
    from torch.utils.cpp_extension import BuildExtension

    build_ext = extension.cmdclass()["build_ext"]
    assert issubclass(build_ext, BuildExtension)
