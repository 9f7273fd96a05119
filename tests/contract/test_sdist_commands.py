"""The version scheme, the sdist's name and index, and the from-source / repair commands built on them."""

from __future__ import annotations

import pytest
from packaging.version import Version

import causal_conv1d_contract as contract
from causal_conv1d_contract import commands
from causal_conv1d_contract.sdist import InvalidSdistName, parse_sdist_name, sdist_filename

SITE = "https://example.org/site/"


def test_the_version_is_a_post_release_of_upstreams() -> None:
    v = Version(contract.PACKAGE_VERSION)
    assert v.is_postrelease and not v.local and not v.is_prerelease  # an index takes it (no local label)
    assert Version(v.base_version) == Version("1.7.0")  # upstream's API it is a drop-in for
    assert v > Version("1.7.0") and v < Version("1.7.1")


@pytest.mark.parametrize(
    "name, version",
    [
        ("causal_conv1d-1.7.0.post1.tar.gz", "1.7.0.post1"),
        ("causal_conv1d-1.8.0rc1.tar.gz", "1.8.0rc1"),
    ],
)
def test_sdist_names(name: str, version: str) -> None:
    assert parse_sdist_name(name) == version and sdist_filename(version) == name


@pytest.mark.parametrize(
    "name",
    [
        "causal-conv1d-1.7.0.post1.tar.gz",  # not PEP 625's normalised name
        "causal_conv1d-1.7.0.post1+cpu.tar.gz",  # a local version: no index takes it
        "causal_conv1d-1.7.0.post1.zip",  # not .tar.gz
        "other-1.7.0.tar.gz",  # another project
    ],
)
def test_invalid_sdist_names(name: str) -> None:
    with pytest.raises(InvalidSdistName, match="Invalid sdist filename"):
        parse_sdist_name(name)


def test_from_source_commands_pin_this_sdist_on_the_sites_source_index() -> None:
    got = commands.sdist_commands(SITE)
    pin = f'"causal-conv1d=={contract.PACKAGE_VERSION}"'
    assert got["pip"] == (
        f"pip install --no-cache-dir --force-reinstall --no-deps --no-binary causal-conv1d {pin} "
        f"--extra-index-url {SITE}source/"
    )
    assert got["uv"].startswith("uv pip install --reinstall-package causal-conv1d --no-deps --no-binary causal-conv1d")
    assert f"--index causal-conv1d-source={SITE}source/" in got["uv"] and pin in got["uv"]
    src = commands.source_commands("cpu", "==2.13.*", base=SITE)
    assert (
        src["pip"] == got["pip"]
        and src["torch"] == 'pip install "torch==2.13.*" --index-url https://download.pytorch.org/whl/cpu/'
    )
    assert contract.source_page_url(SITE) == f"{SITE}source/causal-conv1d/"


def test_repair_commands_replace_the_build_and_keep_torch() -> None:
    v = contract.StableVariant("cpu")
    got = commands.repair_commands(SITE, v, f"{contract.PACKAGE_VERSION}+cpu.stable2.10")
    assert got["pip"] == (
        f'pip install --force-reinstall --no-deps "causal-conv1d=={contract.PACKAGE_VERSION}+cpu.stable2.10" '
        f"--only-binary causal-conv1d --extra-index-url {SITE}whl/stable2.10-cpu/"
    )
    assert "torch" not in got["pip"].replace("torch2", "")  # torch is never named, so never replaced
    assert "--reinstall-package causal-conv1d --no-deps" in got["uv"]


def test_no_torch_advice_names_pytorchs_index() -> None:
    advice = commands.no_torch_advice(SITE)
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu/" in advice
    assert f"{SITE}index.html" in advice and "\n" not in advice


@pytest.mark.parametrize(
    "env, var",
    [
        ({contract.ENV_FORCE_BUILD: "maybe"}, contract.ENV_FORCE_BUILD),
        ({contract.ENV_STABLE_ABI: "2"}, contract.ENV_STABLE_ABI),
        ({contract.ENV_FORCE_CXX11_ABI: "yes please"}, contract.ENV_FORCE_CXX11_ABI),
        ({contract.ENV_INDEX_TIMEOUT: "-1"}, contract.ENV_INDEX_TIMEOUT),
        ({contract.ENV_INDEX_URL: "site/"}, contract.ENV_INDEX_URL),
        ({contract.ENV_LOCAL_VERSION: "rocm61.torch2.13"}, contract.ENV_LOCAL_VERSION),
    ],
)
def test_check_settings_names_the_variable(env: dict[str, str], var: str) -> None:
    with pytest.raises(contract.InvalidSetting, match=var):
        contract.check_settings(env)


def test_check_settings_accepts_good_values() -> None:
    contract.check_settings({})
    contract.check_settings(
        {
            contract.ENV_FORCE_BUILD: "true",
            contract.ENV_PREBUILT_ONLY: "0",
            contract.ENV_INDEX_URL: "file:///srv/site",
            contract.ENV_INDEX_TIMEOUT: "2.5",
            contract.ENV_LOCAL_VERSION: "cu13.stable2.10",
        }
    )
