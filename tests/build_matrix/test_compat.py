"""The compatibility data: the packaged file is valid, sourced and round-trips; bad files fail clearly."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import causal_conv1d_contract as contract
from build_matrix import compat, compat_write
from build_matrix.errors import DataError


def test_packaged_data_covers_torch_2_4_through_2_14(data: compat.CompatData) -> None:
    minors = [compat.minor_key(m) for m in data.torch]
    assert minors == sorted(minors)
    for minor in range(4, 15):
        assert f"2.{minor}" in data.torch, f"torch 2.{minor} missing"


def test_every_entry_names_its_source(data: compat.CompatData) -> None:
    for rel in data.torch.values():
        assert len(rel.source) > 20, rel.minor
        assert rel.confidence in compat.CONFIDENCE
    for cuda in data.cuda.values():
        assert cuda.source
    for abi in data.abi.values():
        assert abi.source


def test_known_facts(data: compat.CompatData) -> None:
    # C++20 from 2.13 (RELEASE.md), C++17 before.
    assert {m: r.cpp_std for m, r in data.torch.items() if compat.minor_key(m) < (2, 13)} == {
        m: "17" for m in data.torch if compat.minor_key(m) < (2, 13)
    }
    assert data.torch["2.13"].cpp_std == data.torch["2.14"].cpp_std == "20"
    assert data.torch["2.14"].latest == "2.14.1"
    assert "cu118" not in data.torch["2.8"].builds
    assert set(data.torch["2.6"].builds) == {"cpu", "cu118", "cu124", "cu126"}
    assert "3.9" not in data.torch["2.9"].pythons and "3.14t" in data.torch["2.9"].pythons
    # CUDA 13 dropped sm < 7.5; sm_100/120 need CUDA >= 12.8; sm_110 only on aarch64 with CUDA 13.
    assert data.cuda["13.0"].archs.split(";")[0] == "7.5"
    assert "10.0" not in data.cuda["12.6"].archs and "10.0" in data.cuda["12.8"].archs
    assert "11.0" in data.cuda["13.0"].archs_aarch64 and "11.0" not in data.cuda["13.0"].archs
    assert data.abi["cxx11"].manylinux == "manylinux_2_28" and data.abi["pre-cxx11"].manylinux == "manylinux2014"


def test_every_cuda_build_has_an_arch_list(data: compat.CompatData) -> None:
    for rel in data.torch.values():
        for accel in rel.builds:
            cuda = contract.cuda_from_accel(accel)
            assert cuda is None or cuda in data.cuda, (rel.minor, accel)


def test_round_trip_is_stable(data: compat.CompatData, tmp_path: Path) -> None:
    text = compat_write.dumps(data, header="header line")
    target = tmp_path / "again.toml"
    compat_write.write_atomic(target, text)
    again = compat.load(target)
    assert compat_write.to_raw(again) == compat_write.to_raw(data)
    assert compat_write.dumps(again, header="header line") == text
    assert text.startswith("# header line\n")
    assert not list(tmp_path.glob(".*.tmp")), "temporary file left behind"


def test_env_var_selects_the_data_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    small = Path(__file__).parent / "fixtures" / "small.toml"
    monkeypatch.setenv(compat.DATA_ENV, str(small))
    assert list(compat.load().torch) == ["2.7", "2.8"]


# Each case: (what to replace in the packaged file, replacement, key named in the error, value named).
BAD = [
    # wrong schema number
    ("schema = 1", "schema = 2", "schema", "2"),
    # a patch version that is not a patch version
    ('latest = "2.14.1"', 'latest = "2.14"', 'torch."2.14".latest', "'2.14'"),
    # latest patch of another minor
    ('latest = "2.13.0"', 'latest = "2.12.0"', 'torch."2.13".latest', "'2.12.0'"),
    # a C++ standard that does not exist for torch
    (
        'cpp_std = "20"\npythons = ["3.10", "3.11", "3.12", "3.13", "3.14", "3.14t"]\nsource = "RM: Python >=3.10 (3.15/3.15t experimental), C++20, CUDA 12.6, 13.0, 13.2',
        'cpp_std = "23"\npythons = ["3.10", "3.11", "3.12", "3.13", "3.14", "3.14t"]\nsource = "RM: Python >=3.10 (3.15/3.15t experimental), C++20, CUDA 12.6, 13.0, 13.2',
        'torch."2.14".cpp_std',
        "'23'",
    ),
    # a Python version that is not one
    ('pythons = ["3.8", "3.9"', 'pythons = ["3.8", "3.x"', 'torch."2.4".pythons[1]', "'3.x'"),
    # a platform name with a typo
    (
        '[torch."2.4".builds]\ncpu = ["linux-x86_64", "linux-aarch64"',
        '[torch."2.4".builds]\ncpu = ["linux-x86_64", "linux-arm64"',
        'torch."2.4".builds.cpu[1]',
        "'linux-arm64'",
    ),
    # an accelerator that breaks the variant contract
    (
        'cu121 = ["linux-x86_64", "windows-amd64"]\ncu124',
        'cu12 = ["linux-x86_64", "windows-amd64"]\ncu124',
        'torch."2.4".builds.cu12',
        "'cu12'",
    ),
    # a CUDA build without an arch list
    ('[cuda."12.9"]', '[cuda."12.99"]', 'torch."2.8".builds.cu129', "'cu129'"),
    # CUDA 13 cannot compile for sm_70
    (
        'archs = "7.5;8.0;8.6;9.0;10.0;12.0+PTX"\narchs_aarch64 = "8.0;9.0;10.0;11.0;12.0+PTX"\nsource = "RM \'PyTorch CUDA Support Matrix\' 13.0.2',
        'archs = "7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX"\narchs_aarch64 = "8.0;9.0;10.0;11.0;12.0+PTX"\nsource = "RM \'PyTorch CUDA Support Matrix\' 13.0.2',
        'cuda."13.0".archs',
        "'7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX'",
    ),
    # sm_100 with CUDA 12.6
    (
        'archs = "5.3;6.0;7.0;7.5;8.0;8.6;9.0+PTX"\narchs_aarch64 = "8.0;9.0+PTX"\nsource = "RM',
        'archs = "5.3;6.0;7.0;7.5;8.0;8.6;9.0;10.0"\narchs_aarch64 = "8.0;9.0+PTX"\nsource = "RM',
        'cuda."12.6".archs',
        "10.0",
    ),
    # +PTX on an arch that is not the last one
    (
        'archs_aarch64 = "8.0;9.0;10.0;12.0+PTX"\nsource = ".ci/manywheel/build_cuda.sh (torch 2.8-2.10): 12.8',
        'archs_aarch64 = "8.0+PTX;9.0;10.0;12.0"\nsource = ".ci/manywheel/build_cuda.sh (torch 2.8-2.10): 12.8',
        'cuda."12.8".archs_aarch64',
        "8.0+PTX",
    ),
    # an override for a build that does not exist
    (
        '"*/linux-aarch64" = ["3.9", "3.10", "3.11", "3.12"]',
        '"cu118/linux-aarch64" = ["3.9"]',
        'torch."2.5".python_overrides."cu118/linux-aarch64"',
        "cu118/linux-aarch64",
    ),
    # a misspelt key in a torch table
    ('latest = "2.10.0"', 'latest = "2.10.0"\nlatset = "2.10.0"', 'torch."2.10".latset', "'2.10.0'"),
    # a confidence level that does not exist
    ('confidence = "low"', 'confidence = "sure"', 'torch."2.15".confidence', "'sure'"),
    # a torch key that is not X.Y
    ('[torch."2.15"]', '[torch."2.x"]', 'torch."2.x"', "'2.x'"),
    # a wrong type
    ("max_jobs_cpu = 4", 'max_jobs_cpu = "4"', "build.max_jobs_cpu", "'4'"),
]


@pytest.mark.parametrize("old,new,key,value", BAD, ids=[b[2] for b in BAD])
def test_malformed_data_names_file_key_and_value(tmp_path: Path, old: str, new: str, key: str, value: str) -> None:
    text = compat.DEFAULT_DATA_PATH.read_text(encoding="utf-8")
    assert old in text, f"fixture drifted: {old!r} not in the data file"
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(DataError) as info:
        compat.load(bad)
    msg = str(info.value)
    assert str(bad) in msg
    assert key in msg, msg
    assert value in msg, msg
    assert info.value.exit_code == 4


def test_invalid_toml_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "broken.toml"
    bad.write_text('schema = 1\n[torch."2.7"\nlatest = 1\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"not valid TOML.*line 2"):
        compat.load(bad)
    with pytest.raises(DataError, match="file not found"):
        compat.load(tmp_path / "nope.toml")


def test_validate_command(cli, tmp_path: Path) -> None:
    ok = cli("validate")
    assert ok.code == 0 and "valid" in ok.out and "low confidence: torch 2.15" in ok.out
    bad = tmp_path / "bad.toml"
    bad.write_text(compat.DEFAULT_DATA_PATH.read_text().replace("nvcc_threads = 2", "nvcc_threads = 0"))
    res = cli("validate", "--data", str(bad))
    assert res.code == 4
    assert re.search(r"error: Invalid compatibility data .* at .*bad.toml: build.nvcc_threads = 0", res.err)
    assert "Traceback" not in res.err
