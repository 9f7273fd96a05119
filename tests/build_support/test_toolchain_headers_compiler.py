"""Toolchain checks that protect users from two real failures seen on CUDA machines."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from build_support import cuda_toolkit, host_compiler


def _fake_compiler(tmp_path: Path, prints: str) -> str:
    exe = tmp_path / "fake-g++"
    exe.write_text(f"#!/bin/sh\necho '{prints}'\n")
    exe.chmod(0o755)
    return str(exe)


@pytest.mark.skipif(os.name == "nt", reason="gcc-style compilers only")
def test_compiler_without_shared_libstdcxx_is_detected(tmp_path: Path) -> None:
    # gcc prints the bare name back when it cannot find the file: only a static libstdc++ exists.
    assert not host_compiler.has_shared_libstdcxx(_fake_compiler(tmp_path, "libstdc++.so"))
    real = tmp_path / "libstdc++.so"
    real.write_text("")
    assert host_compiler.has_shared_libstdcxx(_fake_compiler(tmp_path, str(real)))


def test_missing_torch_headers_found_in_pip_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    toolkit_inc = tmp_path / "cuda" / "include"
    toolkit_inc.mkdir(parents=True)
    (toolkit_inc / "cuda_runtime.h").write_text("")
    assert cuda_toolkit.missing_torch_headers(str(toolkit_inc)) == list(cuda_toolkit.TORCH_NEEDED_CUDA_HEADERS)
    site = tmp_path / "site-packages"
    inc = site / "nvidia" / "cu13" / "include"
    inc.mkdir(parents=True)
    for h in cuda_toolkit.TORCH_NEEDED_CUDA_HEADERS:
        (inc / h).write_text("")
    monkeypatch.setattr(cuda_toolkit, "_site_dirs", lambda: [site])
    assert cuda_toolkit.pip_header_dirs(13, ["cusparse.h", "cublas_v2.h"]) == [str(inc)]
    assert cuda_toolkit.pip_header_dirs(13, ["no_such_header.h"]) == []
