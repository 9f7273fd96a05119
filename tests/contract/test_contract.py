"""The shared contracts (causal_conv1d/_contract.py) behave as DESIGN.md says."""

from __future__ import annotations

import pytest

from build_support.contract import contract as c


@pytest.mark.parametrize(
    ("minor", "accel", "abi"),
    [
        ((2, 4), "cu121", False),
        ((2, 5), "cpu", False),
        ((2, 6), "cu118", False),
        ((2, 6), "cu124", False),
        ((2, 6), "cu126", True),
        ((2, 6), "cpu", True),
        ((2, 7), "cu118", True),
        ((2, 14), "cu130", True),
    ],
)
def test_official_abi(minor: tuple[int, int], accel: str, abi: bool) -> None:
    assert c.official_cxx11_abi(minor, accel) is abi


@pytest.mark.parametrize("name", ["torch2.7-cu128", "torch2.13-cpu", "torch2.5-cu118-cxx11abi1", "torch2.10-cu130"])
def test_variant_roundtrip(name: str) -> None:
    assert c.Variant.parse(name).name == name


@pytest.mark.parametrize(
    "bad",
    [
        "torch2.7",  # no accelerator
        "torch2.7-rocm6.2",  # ROCm is not a supported accelerator
        "torch2.7-cu12",  # CUDA needs major and minor digits
        "2.7-cu128",  # missing the torch prefix
        "torch2.7-cu128-cxx11abi2",  # ABI suffix is 0 or 1
    ],
)
def test_variant_parse_rejects(bad: str) -> None:
    with pytest.raises(c.InvalidVariant, match="Invalid variant name"):
        c.Variant.parse(bad)


def test_official_abi_suffix_is_normalised_away() -> None:
    # An explicit ABI equal to the official one is the official variant: no suffix.
    assert c.Variant((2, 7), "cu128", True).name == "torch2.7-cu128"
    assert c.Variant((2, 7), "cu128", False).name == "torch2.7-cu128-cxx11abi0"
    assert c.Variant((2, 7), "cu128", False).abi is False
    assert not c.Variant((2, 7), "cu128", False).is_official


def test_from_torch() -> None:
    assert c.Variant.from_torch("2.7.1+cu128", "12.8").name == "torch2.7-cu128"
    assert c.Variant.from_torch("2.13.0+cpu", None).name == "torch2.13-cpu"
    assert c.Variant.from_torch("2.5.1", "12.4", True).name == "torch2.5-cu124-cxx11abi1"
    with pytest.raises(c.InvalidVariant):
        c.Variant.from_torch("not-a-version", None)


@pytest.mark.parametrize(("cuda", "accel"), [("11.8", "cu118"), ("12.8", "cu128"), ("13.0", "cu130"), (None, "cpu")])
def test_accel_roundtrip(cuda: str | None, accel: str) -> None:
    assert c.accel_from_cuda(cuda) == accel
    assert c.cuda_from_accel(accel) == cuda


def test_wheel_filename_and_parse() -> None:
    v = c.Variant.parse("torch2.7-cu128")
    name = c.wheel_filename("1.7.0", v, "manylinux_2_28_x86_64")
    assert name == "causal_conv1d-1.7.0+cu128.torch2.7-cp39-abi3-manylinux_2_28_x86_64.whl"
    parsed = c.parse_wheel_name(name)
    assert parsed.variant == v
    assert parsed.public_version == "1.7.0"
    assert parsed.platforms == ("manylinux_2_28_x86_64",)


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("causal_conv1d-1.7.0-cp39-abi3-linux_x86_64.whl", "no local version label"),
        ("causal_conv1d-1.7.0+cu128.torch2.7-cp311-cp311-linux_x86_64.whl", "expected cp39-abi3"),
        ("other_pkg-1.7.0+cu128.torch2.7-cp39-abi3-linux_x86_64.whl", "not a causal-conv1d wheel"),
        ("causal_conv1d-1.7.0+cuda.torch2.7-cp39-abi3-linux_x86_64.whl", "local version label"),
        ("causal_conv1d-1.7.0.whl", "Invalid wheel filename"),
    ],
)
def test_parse_wheel_name_rejects(bad: str, reason: str) -> None:
    with pytest.raises(c.InvalidWheelName, match=reason):
        c.parse_wheel_name(bad)


def test_urls_and_pins() -> None:
    v = c.Variant.parse("torch2.7-cu128")
    assert c.variant_index_url("https://x.test/site", v) == "https://x.test/site/whl/torch2.7-cu128/"
    assert c.project_page_url("file:///srv/site/", v) == "file:///srv/site/whl/torch2.7-cu128/causal-conv1d/"
    assert c.quote_path("files/a+b.whl") == "files/a%2Bb.whl"
    assert c.torch_requirement((2, 9)) == "torch>=2.9,<2.10"
    assert c.local_version(v) == "cu128.torch2.7"
    assert c.variant_from_local_version("cpu.torch2.5.cxx11abi1").name == "torch2.5-cpu-cxx11abi1"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("TRUE", True), ("true", True), ("1", True), ("on", True), ("FALSE", False), ("0", False), ("no", False),
     ("", None), ("  ", None)],
)
def test_env_flag(raw: str, expected: bool | None) -> None:
    assert c.env_flag("X", {"X": raw}) is expected
    assert c.env_flag("X", {}) is None


def test_env_flag_rejects_other_values() -> None:
    # A typo must not silently mean FALSE: the message names the variable and the value.
    with pytest.raises(c.InvalidSetting, match=r"CAUSAL_CONV1D_FORCE_BUILD .*'yes please'"):
        c.env_flag("CAUSAL_CONV1D_FORCE_BUILD", {"CAUSAL_CONV1D_FORCE_BUILD": "yes please"})
