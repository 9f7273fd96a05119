"""Stable-ABI wheels on the site: one file, many pages; family pages for torch releases the data does not know."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from index_site_helpers import NOW, client_env, serve

import causal_conv1d_contract as contract

REPO = Path(__file__).resolve().parents[2]
CU12 = "causal_conv1d-1.7.0.post1+cu12.stable2.10-cp39-abi3-manylinux_2_28_x86_64.whl"
CU12_WIN = "causal_conv1d-1.7.0.post1+cu12.stable2.10-cp39-abi3-win_amd64.whl"
CU13 = "causal_conv1d-1.7.0.post1+cu13.stable2.10-cp39-abi3-manylinux_2_28_x86_64.whl"
CPU = "causal_conv1d-1.7.0.post1+cpu.stable2.10-cp39-abi3-manylinux_2_28_x86_64.whl"
CPU_29 = "causal_conv1d-1.7.0.post1+cpu.torch2.9-cp39-abi3-manylinux_2_28_x86_64.whl"


def _links(site: Path, variant: str) -> list[str]:
    doc = json.loads((site / "whl" / variant / contract.PROJECT_NAME / "index.json").read_text())
    return sorted(f["filename"] for f in doc["files"])


@pytest.fixture(scope="module")
def coverage_file(tmp_path_factory) -> Path:
    """The real producer's coverage (python -m build_matrix coverage --format json)."""
    out = tmp_path_factory.mktemp("coverage") / "coverage.json"
    subprocess.run(
        [sys.executable, "-m", "build_matrix", "coverage", "--format", "json", "--output", str(out)],
        check=True,
        cwd=str(REPO),
        timeout=120,
    )
    return out


@pytest.fixture
def stable_site(cli, make_wheel, tmp_path, coverage_file) -> Path:
    make_wheel(variant="stable2.10-cu12", platform="manylinux_2_28_x86_64", requires_dist=("torch>=2.10",))
    make_wheel(variant="stable2.10-cu12", platform="win_amd64", requires_dist=("torch>=2.10",))
    make_wheel(variant="stable2.10-cu13", platform="manylinux_2_28_x86_64", requires_dist=("torch>=2.10",))
    make_wheel(variant="stable2.10-cpu", platform="manylinux_2_28_x86_64", requires_dist=("torch>=2.10",))
    make_wheel(variant="torch2.9-cpu", platform="manylinux_2_28_x86_64", requires_dist=("torch>=2.9,<2.10",))
    site = tmp_path / "site"
    run = cli("build", tmp_path / "wheels", "--out", site, "--coverage", coverage_file, "--now", NOW)
    assert run.code == 0, run
    return site


def test_one_file_many_pages(stable_site: Path) -> None:
    manifest = json.loads((stable_site / "manifest.json").read_text())
    names = [e["filename"] for e in manifest["files"]]
    assert sorted(names) == sorted({CU12, CU12_WIN, CU13, CPU, CPU_29})  # one entry per file
    assert {e["filename"]: e["variant"] for e in manifest["files"]}[CU12] == "stable2.10-cu12"
    # the family pages: any torch >= 2.10 of the family, torch releases the data does not know included
    assert _links(stable_site, "stable2.10-cu12") == sorted([CU12, CU12_WIN])
    assert _links(stable_site, "stable2.10-cu13") == [CU13]
    assert _links(stable_site, "stable2.10-cpu") == [CPU]
    # every torch >= 2.10 page of the coverage links its family's stable wheel: cu126/cu128 -> cu12
    for variant in ("torch2.10-cu126", "torch2.11-cu128", "torch2.12-cu126", "torch2.15-cu126"):
        assert _links(stable_site, variant) == sorted([CU12, CU12_WIN]), variant
    for variant in ("torch2.10-cu130", "torch2.13-cu132", "torch2.15-cu130"):
        assert _links(stable_site, variant) == [CU13], variant
    assert _links(stable_site, "torch2.13-cpu") == [CPU]
    assert _links(stable_site, "torch2.9-cpu") == [CPU_29]  # torch 2.9 predates the stable ABI
    assert not (stable_site / "whl" / "torch2.9-cu128").exists()  # no wheel serves it: no page
    # files are stored once: the pages link the same file
    assert len(list((stable_site / "files").glob("*.whl"))) == 5
    html = (stable_site / "whl" / "torch2.12-cu126" / contract.PROJECT_NAME / "index.html").read_text()
    assert f'href="../../../files/{contract.quote_path(CU12)}#sha256=' in html
    listing = (stable_site / "whl" / "index.html").read_text()
    assert 'href="stable2.10-cu13/"' in listing and 'href="torch2.12-cu126/"' in listing


def test_verify_understands_stable_pages(cli, stable_site: Path) -> None:
    run = cli("verify", stable_site)
    assert run.code == 0, run
    assert "verified 5 file(s)" in run.out  # each file downloaded once, however many pages link it
    # a torch >= 2.10 page that lost its stable link is caught
    page = stable_site / "whl" / "torch2.12-cu126" / contract.PROJECT_NAME
    html = (page / "index.html").read_text()
    (page / "index.html").write_text("\n".join(ln for ln in html.splitlines() if CU12_WIN not in ln) + "\n")
    doc = json.loads((page / "index.json").read_text())
    doc["files"] = [f for f in doc["files"] if f["filename"] != CU12_WIN]
    (page / "index.json").write_text(json.dumps(doc))
    run = cli("verify", stable_site)
    assert run.code == 1
    assert f"does not link {CU12_WIN!r} (variant 'stable2.10-cu12' serves torch2.12-cu126)" in run.err
    # a stable wheel on the page of a variant it does not serve is caught too
    page = stable_site / "whl" / "torch2.9-cpu" / contract.PROJECT_NAME
    cpu_page = (stable_site / "whl" / "torch2.13-cpu" / contract.PROJECT_NAME / "index.html").read_text()
    link = next(ln for ln in cpu_page.splitlines() if CPU in ln)
    (page / "index.html").write_text((page / "index.html").read_text().replace("</body>", link + "\n</body>"))
    run = cli("verify", stable_site)
    assert f"links {CPU!r} of variant 'stable2.10-cpu', which does not serve torch2.9-cpu" in run.err


def test_landing_page_serves_a_torch_newer_than_the_data(stable_site: Path) -> None:
    landing = (stable_site / "index.html").read_text()
    data = json.loads(landing.split('<script id="site-data" type="application/json">', 1)[1].split("</script>", 1)[0])
    torch = {t["version"]: t for t in data["torch"]}
    newer = torch["2.16"]  # the data knows 2.4 ... 2.15: the entry after them is the family pages'
    assert newer["label"] == "2.16 or newer"
    assert {a["id"]: a["variant"] for a in newer["accels"]} == {
        "cu13": "stable2.10-cu13",
        "cu12": "stable2.10-cu12",
        "cpu": "stable2.10-cpu",
    }
    assert {a["id"]: a["pytorch"] for a in newer["accels"]}["cu13"] == "cu132"
    # the page opens on the newest torch the site knows, not on the "or newer" entry (its cu132 page
    # links the cu13 stable wheel)
    assert data["default"] == {"os": "linux-x86_64", "torch": "2.15", "accel": "cu132"}
    assert data["cells"]["linux-x86_64 stable2.10-cu13"] == {
        "wheel": True,
        "version": "1.7.0.post1",
        "reason": None,
        "stable": True,
    }
    assert data["cells"]["linux-x86_64 torch2.12-cu126"]["stable"] is True
    assert data["cells"]["windows-amd64 torch2.12-cu126"]["wheel"] is True
    assert data["cells"]["windows-amd64 torch2.12-cu130"]["wheel"] is False  # no cu13 Windows wheel published
    assert data["cells"]["linux-x86_64 torch2.9-cpu"]["stable"] is False
    assert {a["variant"] for a in torch["2.12"]["accels"]} >= {"torch2.12-cu126", "torch2.12-cu130"}
    assert 'data-variant="stable2.10-cu13"' in landing and "(stable ABI)" in landing
    # the family rows of the grid, and a mark on each cell a stable wheel serves (a legend line says what it is)
    assert "<th>\u2265 2.10 (any)</th><th>CUDA 13.x (stable ABI)</th>" in landing
    row = landing.split('<tr data-variant="torch2.12-cu126">', 1)[1].split("</tr>", 1)[0]
    assert row.count('data-stable="1"') == 2 and "&#10003; 1.7.0.post1<sup>S</sup>" in row  # Linux and Windows
    row = landing.split('<tr data-variant="torch2.9-cpu">', 1)[1].split("</tr>", 1)[0]
    assert "data-stable" not in row and "&#10003; 1.7.0.post1</td>" in row
    assert 'data-mark="stable"' in landing
    # the commands: torch minor -> its page; "2.16 or newer" -> the family page, torch>= from cu132
    cmds = data["commands"]
    assert cmds["torch2.12-cu126"]["wheel"]["pip"] == (
        'pip install "torch==2.12.*" causal-conv1d --only-binary causal-conv1d --index-url '
        f"https://download.pytorch.org/whl/cu126/ --extra-index-url {contract.DEFAULT_INDEX_URL}whl/torch2.12-cu126/"
    )
    assert cmds["stable2.10-cu13"]["wheel"]["pip"] == (
        'pip install "torch>=2.16" causal-conv1d --only-binary causal-conv1d --index-url '
        f"https://download.pytorch.org/whl/cu132/ --extra-index-url {contract.DEFAULT_INDEX_URL}whl/stable2.10-cu13/"
    )
    # without JavaScript the page names the family pages
    noscript = landing.split("<noscript>", 1)[1].split("</noscript>", 1)[0]
    for family in ("cu13", "cu12", "cpu"):
        assert f"{contract.DEFAULT_INDEX_URL}whl/stable2.10-{family}/" in noscript


def _pip_download(index: str, tmp_path: Path) -> list[str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    dest = tmp_path / "dl"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            contract.PROJECT_NAME,
            "--no-deps",
            "--only-binary",
            ":all:",
            "--index-url",
            index,
            "--platform",
            "manylinux_2_28_x86_64",
            "--python-version",
            "3.12",
            "--implementation",
            "cp",
            "-d",
            str(dest),
        ],
        env=client_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(tmp_path),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return sorted(p.name for p in dest.glob("*.whl"))


def test_pip_gets_the_stable_wheel_from_old_and_new_commands(stable_site: Path, tmp_path: Path) -> None:
    with serve(stable_site) as served:
        # an install command written for one torch minor keeps working
        assert _pip_download(served.url + "whl/torch2.12-cu126/", tmp_path / "a") == [CU12]
        # torch 2.16: unknown to the data, served by the family page
        assert _pip_download(served.url + "whl/stable2.10-cu13/", tmp_path / "b") == [CU13]


def _chooser(site: Path, hash_: str) -> dict:
    """The landing page's script run under node with a minimal DOM (tests/index_site/landing_dom.js)."""
    import shutil

    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("needs node (Debian: apt-get install nodejs) to run the landing page's script")
    proc = subprocess.run(
        [node, str(Path(__file__).with_name("landing_dom.js")), str(site / "index.html"), hash_],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_chooser_commands_for_stable_wheels(stable_site: Path) -> None:
    site_url = contract.DEFAULT_INDEX_URL
    torch_index = "https://download.pytorch.org/whl/"
    # the default: the newest torch the site knows, not the "or newer" entry
    first = _chooser(stable_site, "")
    assert first["torch"] == "2.15" and first["torch_options"][0] == "2.16 or newer"
    assert first["hash"] == "#os=linux-x86_64&torch=2.15&accel=cu132" and first["notice_hidden"] is True
    # torch 2.12 + cu126: the per-minor page, which links the cu12 stable wheel; torch from PyTorch's cu126
    got = _chooser(stable_site, "#os=linux-x86_64&torch=2.12&accel=cu126")
    assert got["pip-command"] == (
        'pip install "torch==2.12.*" causal-conv1d --only-binary causal-conv1d '
        f"--index-url {torch_index}cu126/ --extra-index-url {site_url}whl/torch2.12-cu126/"
    )
    assert "stable ABI" in got["status"]
    # a torch newer than the site knows: the family page, any torch >= 2.16 from the family's newest index
    got = _chooser(stable_site, "#os=linux-x86_64&torch=2.16&accel=cu13")
    assert got["status"].startswith("Wheel available: causal-conv1d for PyTorch 2.16 or newer"), got
    assert got["pip-command"] == (
        'pip install "torch>=2.16" causal-conv1d --only-binary causal-conv1d '
        f"--index-url {torch_index}cu132/ --extra-index-url {site_url}whl/stable2.10-cu13/"
    )
    assert got["uv-command"] == (
        f'uv pip install "torch>=2.16" causal-conv1d --index '
        f"causal-conv1d-stable2-10-cu13={site_url}whl/stable2.10-cu13/ "
        f"--index pytorch-cu132={torch_index}cu132/"
    )
    assert f'url = "{site_url}whl/stable2.10-cu13/"' in got["uv-project"]
    assert "stable2.10-cu13" in got["pip-note"]
    # no cu13 wheel for Windows was published: the page says so and offers the source build (that torch
    # first; pip keeps its build isolation)
    got = _chooser(stable_site, "#os=windows-amd64&torch=2.16&accel=cu13")
    assert got["status"].startswith("No prebuilt wheel"), got
    # this project's sdist, pinned, from the site's source/ index (never PyPI's package of the same name)
    assert got["pip-command"] == (
        f'pip install "torch>=2.16" --index-url {torch_index}cu132/\n'
        "pip install --no-cache-dir --force-reinstall --no-deps --no-binary causal-conv1d "
        f'"causal-conv1d=={contract.PACKAGE_VERSION}" --extra-index-url {site_url}source/'
    )
    # torch 2.9: its own per-minor wheel
    got = _chooser(stable_site, "#os=linux-x86_64&torch=2.9&accel=cpu")
    assert got["pip-command"].endswith(f"{site_url}whl/torch2.9-cpu/") and "stable ABI" not in got["status"]
    assert f"--index-url {torch_index}cpu/" in got["pip-command"]
    # a torch that even the "or newer" entry is not: said, and the closest choice shown
    got = _chooser(stable_site, "#os=linux-x86_64&torch=3.0&accel=cu13")
    assert got["notice_hidden"] is False and "torch=3.0" in got["notice"]


def test_chooser_never_offers_an_older_torch_nor_another_cuda_major(stable_site: Path) -> None:
    torch_index = "https://download.pytorch.org/whl/"
    # torch 2.17, newer than the data (2.4 ... 2.15): the "2.16 or newer" entry, said in words -- never 2.15
    got = _chooser(stable_site, "#os=linux-x86_64&torch=2.17&accel=cu13")
    assert (got["torch"], got["accel"]) == ("2.16", "cu13"), got
    assert "torch 2.17 is newer than this site's build data (2.15)" in got["notice"] and not got["notice_hidden"]
    assert "whl/stable2.10-cu13/" in got["pip-command"] and "2.15" not in got["pip-command"]
    # a CUDA 12 torch, asked by its build (cu128) or its major (cu12): the CUDA 12 family, never CUDA 13
    for accel in ("cu128", "cu12"):
        got = _chooser(stable_site, f"#os=linux-x86_64&torch=2.16&accel={accel}")
        assert got["accel"] == "cu12", got
        assert "whl/stable2.10-cu12/" in got["pip-command"] and f"{torch_index}cu12" in got["pip-command"]
        assert "cu13" not in got["pip-command"]
    # a patch release of a known minor is that minor
    got = _chooser(stable_site, "#os=linux-x86_64&torch=2.12.1&accel=cu126")
    assert (got["torch"], got["accel"]) == ("2.12", "cu126") and "torch==2.12.*" in got["pip-command"]
    # a torch the stable family pages do not serve (another major): no command at all, and why
    got = _chooser(stable_site, "#os=linux-x86_64&torch=3.0&accel=cu13")
    assert got["pip-command"] == "" and got["uv-command"] == ""
    assert "never offers an older torch than asked" in got["notice"] and "torch=3.0" in got["status"]
    # a per-minor torch asked with a CUDA major it has no build of (2.7 has no CUDA 13 build in the data)
    got = _chooser(stable_site, "#os=linux-x86_64&torch=2.7&accel=cu130")
    assert got["pip-command"] == "" and "accel=cu130" in got["status"], got


def test_chooser_keeps_a_cuda_12_torch_when_only_cuda_13_has_a_stable_wheel(
    cli, make_wheel, tmp_path, coverage_file
) -> None:
    make_wheel(variant="stable2.10-cu13", platform="manylinux_2_28_x86_64", requires_dist=("torch>=2.10",))
    site = tmp_path / "site"
    assert cli("build", tmp_path / "wheels", "--out", site, "--coverage", coverage_file, "--now", NOW).code == 0
    got = _chooser(site, "#os=linux-x86_64&torch=2.16&accel=cu12")
    assert got["accel"] == "cu12" and got["status"].startswith("No prebuilt wheel"), got
    assert "https://download.pytorch.org/whl/cu12" in got["pip-command"] and "cu13" not in got["pip-command"]


def test_chooser_wording_for_cpu_and_low_confidence_data(stable_site: Path) -> None:
    got = _chooser(stable_site, "#os=linux-x86_64&torch=2.16&accel=cpu")
    assert "one wheel for every CPU torch >= 2.10" in got["status"] and "CUDA major" not in got["status"]
    assert "CUDA major" not in got["pip-note"]
    got = _chooser(stable_site, "#os=windows-amd64&torch=2.16&accel=cpu")  # no Windows CPU wheel: source build
    assert got["status"].startswith("No prebuilt wheel") and "(a C++ compiler is needed)" in got["status"], got
    # the default torch (2.15) rests on low-confidence build data (compat.toml): the page says so
    got = _chooser(stable_site, "")
    assert got["torch"] == "2.15" and "build data for torch 2.15 is low confidence" in got["status"], got
    got = _chooser(stable_site, "#os=linux-x86_64&torch=2.12&accel=cu126")
    assert "low confidence" not in got["status"]
