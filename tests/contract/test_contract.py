"""The shared contracts (causal_conv1d_contract/) behave as their docstrings and docs/ARCHITECTURE.md say."""

from __future__ import annotations

from pathlib import Path

import pytest

import causal_conv1d_contract as c


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
    [
        ("TRUE", True),
        ("true", True),
        ("1", True),
        ("on", True),
        ("FALSE", False),
        ("0", False),
        ("no", False),
        ("", None),
        ("  ", None),
    ],
)
def test_env_flag(raw: str, expected: bool | None) -> None:
    assert c.env_flag("X", {"X": raw}) is expected
    assert c.env_flag("X", {}) is None


def test_env_flag_rejects_other_values() -> None:
    # A typo must not silently mean FALSE: the message names the variable and the value.
    with pytest.raises(c.InvalidSetting, match=r"CAUSAL_CONV1D_FORCE_BUILD .*'yes please'"):
        c.env_flag("CAUSAL_CONV1D_FORCE_BUILD", {"CAUSAL_CONV1D_FORCE_BUILD": "yes please"})


# --- stable-ABI builds (torch >= 2.10) -----------------------------------------------------------


def test_stable_variant_names_labels_and_pin() -> None:
    sv = c.StableVariant.parse("stable2.10-cu13")
    assert sv == c.StableVariant("cu13") and sv.target == c.STABLE_TARGET == (2, 10)
    assert (sv.name, sv.torch, sv.cuda_major, str(sv)) == ("stable2.10-cu13", "2.10", 13, "stable2.10-cu13")
    assert c.local_version(sv) == "cu13.stable2.10"
    assert c.StableVariant("cpu").cuda_major is None
    assert c.torch_requirement(sv.target, stable=True) == "torch>=2.10"  # no upper bound
    assert c.torch_requirement((2, 9)) == "torch>=2.9,<2.10"
    assert c.stable_target_macro() == "0x020a000000000000"
    name = c.wheel_filename("1.7.0", sv, "manylinux_2_28_x86_64")
    assert name == "causal_conv1d-1.7.0+cu13.stable2.10-cp39-abi3-manylinux_2_28_x86_64.whl"
    parsed = c.parse_wheel_name(name)
    assert parsed.variant == sv and parsed.platforms == ("manylinux_2_28_x86_64",)
    assert c.variant_index_url("https://h/s", sv) == "https://h/s/whl/stable2.10-cu13/"
    assert c.project_page_url("https://h/s/", c.StableVariant("cpu")) == "https://h/s/whl/stable2.10-cpu/causal-conv1d/"


@pytest.mark.parametrize("bad", ["stable2.10-cu11", "stable2.9-cpu", "stable2.10-cu130", "stable-cpu", "stable2.10"])
def test_stable_variant_rejects(bad: str) -> None:
    with pytest.raises(c.InvalidVariant):
        c.StableVariant.parse(bad)


def test_parse_build_variant_and_local_labels() -> None:
    assert c.parse_build_variant("torch2.7-cu128") == c.Variant.parse("torch2.7-cu128")
    assert c.parse_build_variant("stable2.10-cu12") == c.StableVariant("cu12")
    for bad in ("torch2.7-gpu", "stable2.10-gpu", ""):
        with pytest.raises(c.InvalidVariant):
            c.parse_build_variant(bad)
    assert c.build_variant_from_local_version("cu12.stable2.10") == c.StableVariant("cu12")
    assert c.build_variant_from_local_version("cu128.torch2.7") == c.Variant.parse("torch2.7-cu128")
    with pytest.raises(c.InvalidVariant, match="cuNN.stableX.Y"):
        c.build_variant_from_local_version("cu12.stable")


def test_which_torch_builds_a_stable_wheel_serves() -> None:
    cu12, cu13, cpu = c.StableVariant("cu12"), c.StableVariant("cu13"), c.StableVariant("cpu")
    for name in ("torch2.10-cu126", "torch2.11-cu128", "torch2.15-cu129", "torch2.12-cu126-cxx11abi0"):
        assert cu12.serves(c.Variant.parse(name)) and not cu13.serves(c.Variant.parse(name)), name
    assert cu13.serves(c.Variant.parse("torch2.16-cu132")) and not cu13.serves(c.Variant.parse("torch2.9-cu130"))
    assert cpu.serves(c.Variant.parse("torch2.13-cpu")) and not cpu.serves(c.Variant.parse("torch2.13-cu130"))
    assert c.stable_variant_for(c.Variant.parse("torch2.15-cu130")) == cu13
    assert c.stable_variant_for(c.Variant.parse("torch2.9-cu130")) is None
    assert c.accel_family("cu129") == "cu12" and c.accel_family("cpu") == "cpu"
    assert cu13.refusal("2.14.1+cu130", "13.0") is None
    assert cu12.refusal("2.13.0+cu130", "13.0") == (
        "this build is for CUDA 12 torch, but the installed torch 2.13.0+cu130 is a CUDA 13 build (13.0)"
    )
    assert (
        cu13.refusal("2.13.0+cpu", None)
        == "this build is for CUDA 13 torch, but the installed torch 2.13.0+cpu is a CPU build"
    )
    assert cpu.refusal("2.9.1", None) == "this stable-ABI build needs torch >= 2.10, but torch 2.9.1 is installed"


def test_the_cpu_stable_wheel_loads_on_a_cuda_torch_but_does_not_serve_it() -> None:
    """Accepted when installed (the guard: loads_on / refusal), never recommended (serves, the
    family lookup, the index pages, the build side's mismatch); CUDA wheels keep their family."""
    cu12, cu13, cpu = c.StableVariant("cu12"), c.StableVariant("cu13"), c.StableVariant("cpu")
    for name in ("torch2.10-cu126", "torch2.11-cu130", "torch2.12-cu126", "torch2.14-cu130", "torch2.16-cu132"):
        v = c.Variant.parse(name)
        assert cpu.loads_on(v) and not cpu.serves(v), name
        assert c.stable_variant_for(v) == (cu12 if "cu12" in name else cu13), name  # what is recommended
    assert cpu.loads_on(c.Variant.parse("torch2.13-cpu")) and not cpu.loads_on(c.Variant.parse("torch2.9-cu128"))
    assert not cpu.loads_on(c.Variant.parse("torch2.9-cpu"))
    # CUDA wheels: exactly the torch they serve (never a CPU torch, never the other CUDA major)
    assert not cu13.loads_on(c.Variant.parse("torch2.13-cpu")) and not cu12.loads_on(c.Variant.parse("torch2.13-cu130"))
    assert not cu13.loads_on(c.Variant.parse("torch2.13-cu128")) and cu13.loads_on(c.Variant.parse("torch2.13-cu130"))
    for torch, cuda in (("2.11.0+cu130", "13.0"), ("2.12.1+cu126", "12.6"), ("2.14.1+cu130", "13.0")):
        assert cpu.refusal(torch, cuda) is None, torch
        assert cpu.mismatch(torch, cuda) == (
            f"this build is for CPU torch, but the installed torch {torch} is a CUDA {cuda.split('.')[0]} build ({cuda})"
        )
        assert cpu.limitation(torch, cuda) == (
            f"only CPU kernels are present: this is the CPU wheel (stable2.10-cpu) and the installed torch {torch} "
            f"is a CUDA {cuda.split('.')[0]} build; CUDA tensors raise 'built without CUDA kernels'"
        )
    assert (
        cpu.refusal("2.9.1+cu128", "12.8")
        == "this stable-ABI build needs torch >= 2.10, but torch 2.9.1+cu128 is installed"
    )
    assert cpu.mismatch("2.13.0+cpu", None) is None and cpu.limitation("2.13.0+cpu", None) is None
    assert cpu.limitation("2.9.1+cu128", "12.8") is None  # refused, not limited
    assert cu13.mismatch("2.14.1+cu130", "13.0") is None and cu13.limitation("2.14.1+cu130", "13.0") is None
    cu13_on_cpu = "this build is for CUDA 13 torch, but the installed torch 2.13.0+cpu is a CPU build"
    assert cu13.refusal("2.13.0+cpu", None) == cu13.mismatch("2.13.0+cpu", None) == cu13_on_cpu
    assert cu13.limitation("2.13.0+cpu", None) is None


def test_index_base_and_the_layout() -> None:
    """One resolution of the site (environment or default, with a trailing slash) and one layout."""
    assert c.index_base({}) == c.DEFAULT_INDEX_URL and c.DEFAULT_INDEX_URL.endswith("/")
    assert c.index_base({c.ENV_INDEX_URL: "  file:///srv/site "}) == "file:///srv/site/"
    assert c.index_base({c.ENV_INDEX_URL: "  "}) == c.DEFAULT_INDEX_URL
    assert c.site_base("http://h/s") == c.site_base("http://h/s/") == "http://h/s/"
    v, sv = c.Variant.parse("torch2.7-cu128"), c.StableVariant("cu13")
    assert c.variant_path(v) == c.variant_path("torch2.7-cu128") == "whl/torch2.7-cu128/"
    assert c.project_path(sv) == "whl/stable2.10-cu13/causal-conv1d/"
    assert c.variant_path(v).startswith(c.WHEELS_DIR + "/")
    assert c.project_page_url("http://h/s", sv) == "http://h/s/" + c.project_path(sv)


def test_uv_index_name() -> None:
    """What the README, the landing page, doctor and the guard all print (dots become dashes)."""
    assert c.uv_index_name(c.Variant.parse("torch2.7-cu128")) == "causal-conv1d-torch2-7-cu128"
    assert c.uv_index_name(c.StableVariant("cu13")) == "causal-conv1d-stable2-10-cu13"
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert f"--index {c.uv_index_name(c.Variant.parse('torch2.7-cu128'))}=" in readme


def test_build_record_type_has_the_keys_in_order() -> None:
    """BuildRecord (the type) and BUILD_INFO_KEYS (what readers and writers check) are one list."""
    assert tuple(c.BuildRecord.__annotations__) == c.BUILD_INFO_KEYS
