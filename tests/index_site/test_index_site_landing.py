"""The landing page in headless Chromium: selections -> exact commands, coverage, offline, screenshot."""

from __future__ import annotations

import json
import struct

import pytest
from index_site_cdp import Browser, find_chromium
from index_site_helpers import ARTIFACTS, NOW, serve

import causal_conv1d_contract as contract
from causal_conv1d_contract import commands as contract_commands

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
                    },
                    {  # newer than anything published: the page must not open on it
                        "torch": "2.15",
                        "accel": "cu132",
                        "variant": "torch2.15-cu132",
                        "cells": {
                            "linux-x86_64": {"status": "covered"},
                            "windows-amd64": {"status": "unavailable"},
                        },
                    },
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


PIP_CU128 = (
    'pip install "torch==2.14.*" causal-conv1d --only-binary causal-conv1d '
    f"--index-url https://download.pytorch.org/whl/cu128/ --extra-index-url {SITE_URL}whl/torch2.14-cu128/"
)
UV_CU128 = (
    f'uv pip install "torch==2.14.*" causal-conv1d --index causal-conv1d-torch2-14-cu128={SITE_URL}whl/torch2.14-cu128/ '
    "--index pytorch-cu128=https://download.pytorch.org/whl/cu128/"
)


def test_chooser_gives_exact_commands(browser, landing):
    page = browser.open_page((landing / "index.html").as_uri() + "#os=linux-x86_64&torch=2.14&accel=cu128")
    assert page.text("pip-command") == PIP_CU128  # torch and our wheel together, each from its index
    assert page.text("uv-command") == UV_CU128
    project = page.text("uv-project")
    assert f'url = "{SITE_URL}whl/torch2.14-cu128/"' in project and project.count("explicit = true") == 2
    assert 'url = "https://download.pytorch.org/whl/cu128/"' in project
    assert 'torch = { index = "pytorch-cu128" }' in project
    assert 'causal-conv1d = { index = "causal-conv1d-torch2-14-cu128" }' in project

    # a person changes the selections
    page.select("torch", "2.13")
    assert page.eval("document.getElementById('accel').value") == "cpu"  # the only build of 2.13 here
    assert page.text("pip-command").endswith(
        "--index-url https://download.pytorch.org/whl/cpu/ --extra-index-url " + SITE_URL + "whl/torch2.13-cpu/"
    )
    page.select("os", "windows-amd64")
    assert "Wheel available" in page.text("status")
    page.select("torch", "2.14")
    page.select("accel", "cu130")
    assert "PyTorch publishes no Windows build of torch 2.14 for CUDA 13.0" in page.text("status")
    # no wheel: the matching torch, then the sdist; never --no-build-isolation for pip
    assert page.text("pip-command") == (
        'pip install "torch==2.14.*" --index-url https://download.pytorch.org/whl/cu130/\n'
        + contract_commands.sdist_commands(SITE_URL)["pip"]  # this project's sdist, pinned, from the site
    )
    assert f'"causal-conv1d=={contract.PACKAGE_VERSION}"' in page.text("pip-command")
    assert "--no-build-isolation" not in page.text("pip-command")
    assert page.eval("location.hash") == "#os=windows-amd64&torch=2.14&accel=cu130"
    page.select("os", "linux-aarch64")
    page.select("accel", "cu128")
    assert "version 1.7.1" in page.text("status")

    # offline: the page loaded nothing but itself (no external CSS, JS, fonts or images)
    assert page.requested_urls() == [(landing / "index.html").as_uri()]
    assert page.console_errors() == []
    page.select("os", "linux-x86_64")
    shot = ARTIFACTS / "landing.png"
    page.screenshot(shot)
    width, height = png_size(shot.read_bytes())
    assert width >= 800 and height >= 600


def test_default_selection_is_the_newest_combination_with_a_wheel(browser, landing):
    page = browser.open_page((landing / "index.html").as_uri())
    # torch 2.15 / CUDA 13.2 is newer but has no wheel: the page opens on 2.14 / CUDA 13.0 on Linux x86_64
    assert [page.eval(f"document.getElementById('{k}').value") for k in ("os", "torch", "accel")] == [
        "linux-x86_64",
        "2.14",
        "cu130",
    ]
    assert page.text("status").startswith("Wheel available: causal-conv1d for PyTorch 2.14 (CUDA 13.0) on Linux x86_64")
    assert page.eval("location.hash") == "#os=linux-x86_64&torch=2.14&accel=cu130"
    assert page.eval("document.getElementById('notice').hidden") is True
    assert page.console_errors() == []


@pytest.mark.parametrize("over_http", [False, True], ids=["file", "http"])
def test_url_selects_the_combination(browser, landing, over_http):
    query = "?torch=2.13&accel=cpu&os=windows-amd64"
    with serve(landing) as served:
        base = served.url + "index.html" if over_http else (landing / "index.html").as_uri()
        page = browser.open_page(base + query)
        assert [page.eval(f"document.getElementById('{k}').value") for k in ("os", "torch", "accel")] == [
            "windows-amd64",
            "2.13",
            "cpu",
        ]
        assert "Wheel available" in page.text("status") and "Windows x86_64" in page.text("status")
        if over_http:  # the address keeps the choice in the query, ready to share
            assert page.eval("location.search") == "?os=windows-amd64&torch=2.13&accel=cpu"
        # a choice the page has no data for: it says so and shows the closest one
        page = browser.open_page(base + "?torch=9.9&accel=cu999&os=linux-x86_64")
        assert page.eval("document.getElementById('notice').hidden") is False
        assert "torch=9.9" in page.text("notice") and "accel=cu999" in page.text("notice")
        assert page.eval("document.getElementById('torch').value") == "2.14"
        page = browser.open_page(base + "?torch=2.15&accel=cu132&os=linux-x86_64")
        assert "in the build matrix, but no wheel is published yet" in page.text("status")
        assert page.console_errors() == []


def test_coverage_grid_is_compact_with_every_reason_in_legend_and_tooltip(browser, cli, make_wheel, tmp_path, landing):
    # one more reason class: every wheel of a combination yanked
    yanked = make_wheel(variant="torch2.13-cpu", platform="manylinux_2_28_aarch64")
    assert cli("build", tmp_path / "wheels", "--out", landing, "--now", NOW).code == 0
    assert cli("yank", landing, yanked.name, "--reason", "broken build").code == 0
    page = browser.open_page((landing / "index.html").as_uri())
    rows = page.eval("""Array.prototype.map.call(document.querySelectorAll('#coverage tbody tr'),
        function (tr) { return Array.prototype.map.call(tr.children, function (c) {
          return [c.textContent.trim(), c.getAttribute('title')]; }); })""")
    header = page.eval(
        "Array.prototype.map.call(document.querySelectorAll('#coverage thead th'), function (c) { return c.textContent; })"
    )
    assert header == ["PyTorch", "Build", "Linux x86_64", "Linux aarch64", "Windows x86_64"]
    legend = dict(
        page.eval("""Array.prototype.map.call(document.querySelectorAll('#legend li'),
        function (li) { return [li.getAttribute('data-reason'), li.textContent.trim()]; })""")
    )
    table = {(r[0][0], r[1][0]): r[2:] for r in rows}

    def key_of(text: str) -> str:
        return next(k for k, v in legend.items() if v == "\u2014" + k + " " + text)

    reasons = {
        "no wheel is published for this platform": ("2.14", "CUDA 13.0", 1),
        "PyTorch publishes no Windows build of torch 2.14 for CUDA 13.0": ("2.14", "CUDA 13.0", 2),
        "in the build matrix, but no wheel is published yet": ("2.15", "CUDA 13.2", 0),
        "not built by the build matrix": ("2.15", "CUDA 13.2", 2),
        "every wheel published for it is yanked: broken build": ("2.13", "CPU", 1),
    }
    assert len(legend) == len(reasons), legend
    for reason, (torch, build, col) in reasons.items():
        text, title = table[(torch, build)][col]
        assert text == "\u2014" + key_of(reason) and title == reason  # compact cell, the reason in its tooltip
    assert table[("2.14", "CUDA 12.8")] == [
        ["\u2713 1.7.0.post1", None],
        ["\u2713 1.7.1", None],
        ["\u2713 1.7.0.post1", None],
    ]
    assert table[("2.13", "CPU")][0] == ["\u2713 1.7.0.post1", None]
    cells = page.eval("document.querySelectorAll('#coverage td').length")
    assert page.eval("document.getElementById('coverage').textContent").count("no wheel is published yet") == 0
    assert cells == 4 * 3
    # each reason class as a selection: the status names it, pip is never told --no-build-isolation
    for reason, (torch, build, col) in reasons.items():
        os_id = ["linux-x86_64", "linux-aarch64", "windows-amd64"][col]
        accel = {"CUDA 13.0": "cu130", "CUDA 13.2": "cu132", "CPU": "cpu"}[build]
        page = browser.open_page((landing / "index.html").as_uri() + f"#os={os_id}&torch={torch}&accel={accel}")
        assert reason in page.text("status"), (reason, page.text("status"))
        assert "--no-build-isolation" not in page.text("pip-command")
        assert page.console_errors() == []
