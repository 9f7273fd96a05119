"""The landing page in headless Chromium: selections -> exact commands, coverage, offline, screenshot."""

from __future__ import annotations

import json
import struct

import pytest
from index_site_cdp import Browser, find_chromium
from index_site_helpers import ARTIFACTS, NOW

SITE_URL = "https://example.org/causal-conv1d/"


@pytest.fixture(scope="module")
def browser():
    exe = find_chromium()
    if exe is None:
        pytest.skip("needs Chromium (Debian: apt-get install chromium; scripts/run-tests.sh installs it)")
    b = Browser(exe)
    yield b
    b.close()


@pytest.fixture
def landing(cli, make_wheel, tmp_path):
    make_wheel(variant="torch2.13-cpu", platform="linux_x86_64")
    make_wheel(variant="torch2.13-cpu", platform="win_amd64")
    make_wheel(variant="torch2.14-cu130", platform="manylinux_2_28_x86_64")
    make_wheel(variant="torch2.14-cu128", platform="manylinux_2_28_x86_64")
    make_wheel(variant="torch2.14-cu128", platform="win_amd64")
    make_wheel(variant="torch2.14-cu128", platform="manylinux_2_28_aarch64", version="1.7.1")
    coverage = tmp_path / "coverage.json"
    coverage.write_text(
        json.dumps(
            {
                "platforms": ["linux-x86_64", "windows-amd64"],
                "rows": [
                    {
                        "torch": "2.14",
                        "accel": "cu130",
                        "variant": "torch2.14-cu130",
                        "cells": {
                            "linux-x86_64": {"status": "covered"},
                            "windows-amd64": {
                                "status": "unavailable",
                                "reason": "PyTorch publishes no Windows build of torch 2.14 for CUDA 13.0",
                            },
                        },
                    }
                ],
            }
        )
    )
    site = tmp_path / "site"
    run = cli("build", tmp_path / "wheels", "--out", site, "--site-url", SITE_URL, "--coverage", coverage, "--now", NOW)
    assert run.code == 0, run
    return site


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_chooser_gives_exact_commands(browser, landing):
    page = browser.open_page((landing / "index.html").as_uri() + "#os=linux-x86_64&torch=2.14&accel=cu128")
    assert page.text("pip-command") == (
        f"pip install causal-conv1d --only-binary causal-conv1d --extra-index-url {SITE_URL}whl/torch2.14-cu128/"
    )
    assert page.text("uv-command") == (
        f"uv pip install causal-conv1d --index causal-conv1d-torch2.14-cu128={SITE_URL}whl/torch2.14-cu128/"
    )
    project = page.text("uv-project")
    assert f'url = "{SITE_URL}whl/torch2.14-cu128/"' in project and "explicit = true" in project
    assert 'causal-conv1d = { index = "causal-conv1d-torch2.14-cu128" }' in project
    assert (
        page.text("torch-command") == 'pip install "torch==2.14.*" --index-url https://download.pytorch.org/whl/cu128'
    )

    # a person changes the selections
    page.select("torch", "2.13")
    assert page.eval("document.getElementById('accel').value") == "cpu"  # the only build of 2.13 here
    assert page.text("pip-command").endswith("--extra-index-url " + SITE_URL + "whl/torch2.13-cpu/")
    assert page.text("torch-command").endswith("https://download.pytorch.org/whl/cpu")
    page.select("os", "windows-amd64")
    assert "Wheel available" in page.text("status")
    page.select("torch", "2.14")
    page.select("accel", "cu130")
    assert "PyTorch publishes no Windows build of torch 2.14 for CUDA 13.0" in page.text("status")
    assert page.text("pip-command") == "pip install causal-conv1d --no-build-isolation"
    assert page.eval("location.hash") == "#os=windows-amd64&torch=2.14&accel=cu130"
    page.select("os", "linux-aarch64")
    page.select("accel", "cu128")
    assert "version 1.7.1" in page.text("status")

    # offline: the page loaded nothing but itself (no external CSS, JS, fonts or images)
    assert page.requested_urls() == [(landing / "index.html").as_uri()]
    page.select("os", "linux-x86_64")
    shot = ARTIFACTS / "landing.png"
    page.screenshot(shot)
    width, height = png_size(shot.read_bytes())
    assert width >= 800 and height >= 600


def test_coverage_table(browser, landing):
    page = browser.open_page((landing / "index.html").as_uri())
    rows = page.eval("""Array.prototype.map.call(document.querySelectorAll('#coverage tbody tr'),
        function (tr) { return Array.prototype.map.call(tr.children, function (c) { return c.textContent.trim(); }); })""")
    header = page.eval(
        "Array.prototype.map.call(document.querySelectorAll('#coverage thead th'), function (c) { return c.textContent; })"
    )
    assert header == ["PyTorch", "Build", "Linux x86_64", "Linux aarch64", "Windows x86_64"]
    table = {(r[0], r[1]): r[2:] for r in rows}
    assert table[("2.14", "CUDA 13.0")] == [
        "\u2713 1.7.0",
        "\u2014 no wheel is published for this platform",
        "\u2014 PyTorch publishes no Windows build of torch 2.14 for CUDA 13.0",
    ]
    assert table[("2.14", "CUDA 12.8")] == ["\u2713 1.7.0", "\u2713 1.7.1", "\u2713 1.7.0"]
    assert table[("2.13", "CPU")][0] == "\u2713 1.7.0"
    # default selection: newest torch, newest CUDA with a wheel for the first OS
    assert page.eval("location.hash") == "#os=linux-x86_64&torch=2.14&accel=cu130"
