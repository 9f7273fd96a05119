"""The site serves this project's sdist on its own index, source/causal-conv1d/ (append-only, yankable,
verified), and doctor.pyz."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from pathlib import Path

import pytest
from index_site_helpers import NOW, serve

import causal_conv1d_contract as contract
from causal_conv1d_contract import commands, net

SDIST = f"causal_conv1d-{contract.PACKAGE_VERSION}.tar.gz"


def write_sdist(
    directory: Path,
    version: str = contract.PACKAGE_VERSION,
    *,
    name: str = "causal-conv1d",
    payload: bytes = b"",
    filename: str = "",
) -> Path:
    """A minimal sdist: ``<stem>/PKG-INFO`` (+ ``payload`` to change its bytes)."""
    stem = filename[: -len(".tar.gz")] if filename else f"causal_conv1d-{version}"
    path = directory / f"{stem}.tar.gz"
    directory.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tf:
        for member, data in (
            (
                f"{stem}/PKG-INFO",
                f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nRequires-Python: >=3.9\n".encode(),
            ),
            (f"{stem}/payload", payload),
        ):
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture
def sdist_site(cli, make_wheel, wheels: Path, tmp_path: Path) -> Path:
    make_wheel(variant="stable2.10-cpu", platform="linux_x86_64", requires_dist=("torch>=2.10",))
    write_sdist(wheels)
    site = tmp_path / "site"
    run = cli("build", wheels, "--out", site, "--now", NOW, "--site-url", "http://127.0.0.1:8000/")
    assert run.code == 0, run
    assert f"published {SDIST} (sdist" in run.out
    return site


def test_sdist_page_manifest_and_files(sdist_site: Path) -> None:
    page = (sdist_site / "source" / contract.PROJECT_NAME / "index.html").read_text()
    assert f'href="../../files/{SDIST}#sha256=' in page and 'data-requires-python="&gt;=3.9"' in page
    assert "data-core-metadata" not in page  # pip reads an sdist's metadata by building it
    assert (sdist_site / "files" / SDIST).is_file()
    assert '<a href="causal-conv1d/">' in (sdist_site / "source" / "index.html").read_text()
    doc = json.loads((sdist_site / "source" / contract.PROJECT_NAME / "index.json").read_text())
    assert doc["versions"] == [contract.PACKAGE_VERSION] and doc["files"][0]["filename"] == SDIST
    manifest = json.loads((sdist_site / "manifest.json").read_text())
    assert [s["filename"] for s in manifest["sdists"]] == [SDIST]
    # the sdist is never on a wheel page (an --only-binary command never meets it, uv never builds it)
    for page in (sdist_site / "whl").rglob("index.html"):
        assert ".tar.gz" not in page.read_text()


def test_sdist_publishing_is_append_only_and_yankable(cli, sdist_site: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    write_sdist(again, payload=b"other bytes")
    run = cli("build", again, "--out", sdist_site, "--now", NOW)
    assert run.code == 3 and "append-only" in run.err and SDIST in run.err
    older = tmp_path / "older"
    write_sdist(older, "1.7.0.post0")
    assert cli("build", older, "--out", sdist_site, "--now", NOW).code == 0  # nothing dropped, one added
    manifest = json.loads((sdist_site / "manifest.json").read_text())
    assert sorted(s["filename"] for s in manifest["sdists"]) == ["causal_conv1d-1.7.0.post0.tar.gz", SDIST]
    run = cli("yank", sdist_site, "causal_conv1d-1.7.0.post0.tar.gz", "--reason", "broken")
    assert run.code == 0, run
    assert 'data-yanked="broken"' in (sdist_site / "source" / contract.PROJECT_NAME / "index.html").read_text()
    assert cli("verify", sdist_site).code == 0


@pytest.mark.parametrize(
    "name, version, filename, why",
    [
        ("other-project", contract.PACKAGE_VERSION, "", "PKG-INFO Name is 'other-project'"),  # another project
        ("causal-conv1d", "1.6.0", SDIST, "PKG-INFO Version is '1.6.0'"),  # the name says another version
        (
            "causal-conv1d",
            contract.PACKAGE_VERSION,
            f"causal-conv1d-{contract.PACKAGE_VERSION}.tar.gz",
            "Invalid sdist filename",
        ),  # not the PEP 625 name
    ],
)
def test_bad_sdists_are_skipped_with_the_reason(
    cli, make_wheel, wheels: Path, tmp_path: Path, name: str, version: str, filename: str, why: str
) -> None:
    make_wheel()
    write_sdist(wheels, version, name=name, filename=filename)
    run = cli("build", wheels, "--out", tmp_path / "site", "--now", NOW)
    assert run.code == 0 and why in run.err, run
    assert not (tmp_path / "site" / "source").exists()


def test_verify_finds_a_damaged_sdist(cli, sdist_site: Path) -> None:
    (sdist_site / "files" / SDIST).write_bytes(b"not it")
    run = cli("verify", sdist_site)
    assert run.code == 1 and "sha256 or size differs" in run.out + run.err


def test_the_site_serves_the_doctor(sdist_site: Path) -> None:
    with zipfile.ZipFile(sdist_site / "doctor.pyz") as zf:
        names = set(zf.namelist())
        site = json.loads(zf.read("causal_conv1d_doctor/site.json"))
    assert {
        "__main__.py",
        "causal_conv1d_doctor/doctor.py",
        "causal_conv1d_doctor/_guard.py",
        "causal_conv1d_contract/commands.py",
    } <= names
    assert site == {"site_url": "http://127.0.0.1:8000/"}
    assert "python doctor.pyz" in (sdist_site / "index.html").read_text()


def test_the_source_index_answers_over_http(sdist_site: Path) -> None:
    """What the from-source command's ``--extra-index-url`` names: a PEP 503/691 index listing the sdist
    (pip building the real sdist from it: tests/build_support/test_doctor_before_install.py)."""
    with serve(sdist_site) as served:
        cmd = commands.sdist_commands(served.url)["pip"]
        assert f"--extra-index-url {served.url}source/" in cmd and f'"causal-conv1d=={contract.PACKAGE_VERSION}"' in cmd
        for accept in (net.ACCEPT_HTML, net.ACCEPT_JSON):
            resp = net.fetch_page(contract.source_page_url(served.url), accept=accept, retries=1)
            page = net.parse_page(resp.body, resp.content_type, resp.url)
            assert [link.filename for link in page.links] == [SDIST], accept
