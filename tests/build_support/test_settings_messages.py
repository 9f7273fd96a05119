"""Settings parsed once, up front, with one-line errors (the build backend, the index URL), and the
backend's messages said once and at the default verbosity."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import causal_conv1d_contract as contract
from build_support import backend, prebuilt

from .conftest import REPO, clean_env, index_first_env

HOOKS = [
    "get_requires_for_build_wheel()",
    "prepare_metadata_for_build_wheel(OUT)",
    "build_wheel(OUT)",
    "get_requires_for_build_sdist()",
    "build_editable(OUT)",
]


def _hook(call: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    code = f"from build_support import backend; OUT = {str(tmp_path)!r}; backend.{call}"
    return subprocess.run(
        [sys.executable, "-c", code], env=clean_env(**env), cwd=REPO, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("hook", HOOKS)
@pytest.mark.parametrize(
    "var, value, accepted",
    [
        (contract.ENV_FORCE_BUILD, "maybe", "expected TRUE or FALSE"),
        (contract.ENV_PREBUILT_ONLY, "sure", "expected TRUE or FALSE"),
        (contract.ENV_INDEX_TIMEOUT, "soon", "not a positive number of seconds"),
        (contract.ENV_INDEX_URL, "/srv/site", "expected the site's base URL"),
        (contract.ENV_LOCAL_VERSION, "cpu.torch2", "Invalid local version label"),
    ],
)
def test_a_bad_setting_is_one_line_from_every_hook(
    tmp_path: Path, hook: str, var: str, value: str, accepted: str
) -> None:
    proc = _hook(hook, tmp_path, **{var: value})
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("causal-conv1d: ") and var in lines[0], proc.stderr
    assert accepted in lines[0] and repr(value) in lines[0]


def test_prebuilt_only_is_parsed_even_when_a_wheel_would_be_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, ``sure`` was only read after a failed lookup: accepted silently whenever a wheel was found."""
    monkeypatch.setenv(contract.ENV_PREBUILT_ONLY, "sure")
    looked_up: list[Path] = []
    monkeypatch.setattr(prebuilt, "fetch_prebuilt", lambda dest: looked_up.append(dest))
    with pytest.raises(
        SystemExit,
        match=r"causal-conv1d: Invalid value for CAUSAL_CONV1D_PREBUILT_ONLY \(expected "
        r"TRUE or FALSE\): 'sure'",
    ):
        backend.prepare_metadata_for_build_wheel(str(tmp_path))
    assert looked_up == []


def test_the_prebuilt_only_stop_says_its_reason_once(tmp_path: Path, refused_url: str) -> None:
    proc = _hook(
        "build_wheel(OUT)", tmp_path, **{contract.ENV_PREBUILT_ONLY: "TRUE", contract.ENV_INDEX_URL: refused_url}
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "CAUSAL_CONV1D_PREBUILT_ONLY=TRUE and no verified prebuilt wheel" in proc.stderr
    assert proc.stderr.count("/whl/torch2.13-cpu/causal-conv1d/") == 1, proc.stderr  # uv showed it twice


@pytest.mark.parametrize(
    "value, fix",
    [
        ("/srv/site", "for a folder give file:///srv/site/"),  # a plain path
        (
            "http://127.0.0.1:8000/whl/torch2.13-cpu/",
            "give the site's base URL, 'http://127.0.0.1:8000/'",
        ),  # a variant page
        (
            "https://h/s/whl/stable2.10-cu13/causal-conv1d/",
            "give the site's base URL, 'https://h/s/'",
        ),  # a project page
        ("file:///srv/site/source/causal-conv1d/", "give the site's base URL, 'file:///srv/site/'"),  # the sdist page
    ],
)
def test_index_url_must_be_the_sites_base_url(value: str, fix: str) -> None:
    with pytest.raises(contract.InvalidSetting, match="Invalid value for CAUSAL_CONV1D_INDEX_URL") as info:
        contract.index_base({contract.ENV_INDEX_URL: value})
    assert fix in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "value", ["https://h/site", "http://127.0.0.1:8000/", "file:///srv/site", "https://mirror.example/whl/"]
)  # a site may itself live under whl/
def test_index_url_accepts_site_roots(value: str) -> None:
    assert contract.index_base({contract.ENV_INDEX_URL: value}) == contract.site_base(value)


def test_using_the_prebuilt_wheel_is_said_at_the_default_verbosity(
    index, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip hides a backend's stderr without -v: the line goes to the terminal too (prebuilt._tell_user)."""
    told: list[str] = []
    monkeypatch.setattr(prebuilt, "_tell_user", told.append)
    index_first_env(monkeypatch, index.url)
    out = prebuilt.fetch_prebuilt(tmp_path / "dest")
    assert out.wheel is not None, out.message
    assert [m for m in told if m.startswith("using prebuilt wheel ")], told
