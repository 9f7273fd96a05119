"""index_site build / yank / verify, in-process: layout, links, reproducibility, append-only, bad input."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest
from index_site_helpers import NOW, snapshot

import causal_conv1d_contract as contract
from index_site import site as site_module
from index_site.serve import negotiate

CPU_213 = "causal_conv1d-1.7.0.post1+cpu.torch2.13-cp39-abi3-linux_x86_64.whl"
CU130_214 = "causal_conv1d-1.7.0.post1+cu130.torch2.14-cp39-abi3-manylinux_2_28_x86_64.whl"


@pytest.fixture
def two_variants(make_wheel) -> None:
    make_wheel(variant="torch2.13-cpu", platform="linux_x86_64", requires_python=">=3.9,<4")
    make_wheel(variant="torch2.14-cu130", platform="manylinux_2_28_x86_64")


def project_page(site: Path, variant: str) -> str:
    return (site / "whl" / variant / contract.PROJECT_NAME / "index.html").read_text()


def project_json(site: Path, variant: str) -> dict:
    return json.loads((site / "whl" / variant / contract.PROJECT_NAME / "index.json").read_text())


@pytest.mark.parametrize("command", [[], ["build"], ["yank"], ["serve"], ["verify"]])
def test_help(cli, command):
    run = cli(*command, "--help")
    assert run.code == 0
    assert "usage: python -m index_site" in run.out


def test_layout_links_and_json(cli, wheels, two_variants, tmp_path):
    site = tmp_path / "site"
    run = cli("build", wheels, "--out", site, "--now", NOW)
    assert run.code == 0, run
    for rel in (
        "index.html",
        "manifest.json",
        "whl/index.html",
        "whl/torch2.13-cpu/index.html",
        "whl/torch2.13-cpu/index.json",
        "whl/torch2.13-cpu/causal-conv1d/index.html",
        "whl/torch2.13-cpu/causal-conv1d/index.json",
        f"files/{CPU_213}",
        f"files/{CPU_213}.metadata",
        f"files/{CU130_214}",
    ):
        assert (site / rel).is_file(), rel
    page = project_page(site, "torch2.13-cpu")
    assert '<meta name="pypi:repository-version" content="1.0">' in page
    assert CU130_214 not in page  # one index per variant: no neighbour on this page
    (link,) = re.findall(r"<a [^>]*>", page)
    wheel = (site / "files" / CPU_213).read_bytes()
    metadata = (site / "files" / f"{CPU_213}.metadata").read_bytes()
    import hashlib

    sha, msha = hashlib.sha256(wheel).hexdigest(), hashlib.sha256(metadata).hexdigest()
    assert (
        f'href="../../../files/causal_conv1d-1.7.0.post1%2Bcpu.torch2.13-cp39-abi3-linux_x86_64.whl#sha256={sha}"'
        in link
    )
    assert 'data-requires-python="&gt;=3.9,&lt;4"' in link  # escaped
    assert f'data-core-metadata="sha256={msha}"' in link and f'data-dist-info-metadata="sha256={msha}"' in link
    assert "data-yanked" not in link
    with zipfile.ZipFile(site / "files" / CPU_213) as zf:
        assert zf.read("causal_conv1d-1.7.0.post1+cpu.torch2.13.dist-info/METADATA") == metadata
    doc = project_json(site, "torch2.13-cpu")
    assert doc["meta"]["api-version"].startswith("1.")
    (f,) = doc["files"]
    assert f["url"] == "../../../files/causal_conv1d-1.7.0.post1%2Bcpu.torch2.13-cp39-abi3-linux_x86_64.whl"
    assert f["hashes"] == {"sha256": sha} and f["core-metadata"] == {"sha256": msha}
    assert f["requires-python"] == ">=3.9,<4" and f["yanked"] is False
    assert f["size"] == len(wheel) and f["upload-time"] == NOW
    root = json.loads((site / "whl/torch2.13-cpu/index.json").read_text())
    assert root["projects"] == [{"name": "causal-conv1d"}]
    listing = (site / "whl/index.html").read_text()
    assert 'href="torch2.13-cpu/"' in listing and 'href="torch2.14-cu130/"' in listing
    assert cli("verify", site).code == 0


def test_files_url_makes_absolute_links(cli, wheels, two_variants, tmp_path):
    site = tmp_path / "site"
    run = cli("build", wheels, "--out", site, "--now", NOW, "--files-url", "https://example.org/releases/v1.7.0")
    assert run.code == 0, run
    page = project_page(site, "torch2.13-cpu")
    assert (
        'href="https://example.org/releases/v1.7.0/causal_conv1d-1.7.0.post1%2Bcpu.torch2.13-cp39-abi3-linux_x86_64.whl#sha256='
        in page
    )
    assert not (site / "files" / CPU_213).exists()  # hosted elsewhere
    assert (site / "files" / f"{CPU_213}.metadata").is_file()  # to upload beside it
    assert project_json(site, "torch2.13-cpu")["files"][0]["url"].startswith("https://example.org/releases/v1.7.0/")


def test_reproducible_byte_for_byte(cli, wheels, two_variants, tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    assert cli("build", wheels, "--out", tmp_path / "a").code == 0
    assert cli("build", wheels, "--out", tmp_path / "b").code == 0
    a, b = snapshot(tmp_path / "a"), snapshot(tmp_path / "b")
    assert a == b
    assert '"upload_time": "2026-01-01T00:00:00Z"' in a["manifest.json"].decode()
    # a rebuild of the same site with the same inputs changes nothing either
    assert cli("build", wheels, "--out", tmp_path / "a", "--now", "2030-01-01T00:00:00Z").code == 0
    assert snapshot(tmp_path / "a") == a


def test_upload_time_recorded_once_and_nothing_dropped(cli, make_wheel, tmp_path):
    site = tmp_path / "site"
    make_wheel(directory=tmp_path / "batch1")
    assert cli("build", tmp_path / "batch1", "--out", site, "--now", "2026-01-01T00:00:00Z").code == 0
    make_wheel(directory=tmp_path / "batch2", variant="torch2.14-cu130", platform="win_amd64")
    run = cli("build", tmp_path / "batch2", "--out", site, "--now", "2026-02-01T00:00:00Z")
    assert run.code == 0, run
    files = {f["filename"]: f for f in json.loads((site / "manifest.json").read_text())["files"]}
    assert files[CPU_213]["upload_time"] == "2026-01-01T00:00:00Z"  # kept from the first publish
    assert (
        files["causal_conv1d-1.7.0.post1+cu130.torch2.14-cp39-abi3-win_amd64.whl"]["upload_time"]
        == "2026-02-01T00:00:00Z"
    )
    assert (site / "files" / CPU_213).is_file()  # the first batch is still served
    assert cli("build", "--out", site).code == 0  # re-render from the manifest alone
    assert len(json.loads((site / "manifest.json").read_text())["files"]) == 2
    assert cli("verify", site).code == 0


def test_same_name_different_hash_is_refused(cli, make_wheel, tmp_path):
    site = tmp_path / "site"
    make_wheel(directory=tmp_path / "one")
    assert cli("build", tmp_path / "one", "--out", site, "--now", NOW).code == 0
    before = snapshot(site)
    make_wheel(directory=tmp_path / "two", payload="rebuilt")  # same file name, other bytes
    make_wheel(directory=tmp_path / "two", variant="torch2.14-cpu")  # an innocent new wheel alongside
    run = cli("build", tmp_path / "two", "--out", site, "--now", NOW)
    assert run.code == 3
    assert CPU_213 in run.err and "append-only" in run.err
    assert snapshot(site) == before  # refused as a whole: nothing changed


def test_same_name_same_hash_is_a_no_op(cli, make_wheel, tmp_path):
    site = tmp_path / "site"
    make_wheel()
    assert cli("build", tmp_path / "wheels", "--out", site, "--now", NOW).code == 0
    before = snapshot(site)
    run = cli("build", tmp_path / "wheels", "--out", site, "--now", "2027-01-01T00:00:00Z")
    assert run.code == 0 and "0 new" in run.out
    assert snapshot(site) == before


def test_yank(cli, make_wheel, tmp_path):
    site = tmp_path / "site"
    make_wheel()
    make_wheel(version="1.7.1")
    assert cli("build", tmp_path / "wheels", "--out", site, "--now", NOW).code == 0
    bad = "causal_conv1d-1.7.1+cpu.torch2.13-cp39-abi3-linux_x86_64.whl"
    run = cli("yank", site, bad, "--reason", 'crashes on "<long>" inputs')
    assert run.code == 0, run
    page = project_page(site, "torch2.13-cpu")
    (link,) = [a for a in re.findall(r"<a [^>]*>", page) if "1.7.1" in a]
    assert 'data-yanked="crashes on &#34;&lt;long&gt;&#34; inputs"' in link
    (other,) = [a for a in re.findall(r"<a [^>]*>", page) if "1.7.0" in a]
    assert "data-yanked" not in other
    files = {f["filename"]: f for f in project_json(site, "torch2.13-cpu")["files"]}
    assert files[bad]["yanked"] == 'crashes on "<long>" inputs'
    assert len(files) == 2  # still listed
    assert cli("verify", site).code == 0
    # no reason: still yanked (data-yanked="" / true)
    assert cli("yank", site, CPU_213).code == 0
    assert project_json(site, "torch2.13-cpu")["files"][0]["yanked"] is True
    assert 'data-yanked=""' in project_page(site, "torch2.13-cpu")


def test_yank_unknown_file_suggests(cli, make_wheel, tmp_path):
    make_wheel()
    assert cli("build", tmp_path / "wheels", "--out", tmp_path / "site", "--now", NOW).code == 0
    run = cli("yank", tmp_path / "site", CPU_213.replace("1.7.0", "1.6.0"))
    assert run.code == 1
    assert "no such file in the manifest" in run.err and f"Perhaps you meant {CPU_213!r}" in run.err


def _zip(path: Path, members: dict[str, str]) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in members.items():
            zf.writestr(name, text)


BAD_INPUTS = [
    # a file that is not a wheel at all
    ("notes.txt", lambda d: (d / "notes.txt").write_text("hello"), "not a wheel file"),
    # a .whl that is not a zip archive
    (CPU_213, lambda d: (d / CPU_213).write_bytes(b"PK\x03\x04 truncated"), "not a valid zip archive"),
    # a zip without METADATA
    (CPU_213, lambda d: _zip(d / CPU_213, {"causal_conv1d/__init__.py": ""}), "no *.dist-info/METADATA"),
    # METADATA that packaging rejects (no Name)
    (
        CPU_213,
        lambda d: _zip(
            d / CPU_213,
            {
                "causal_conv1d-1.7.0.post1+cpu.torch2.13.dist-info/METADATA": "Metadata-Version: 2.1\nVersion: 1.7.0.post1+cpu.torch2.13\n"
            },
        ),
        "invalid METADATA",
    ),
    # METADATA of another version than the file name
    (
        CPU_213,
        lambda d: _zip(
            d / CPU_213,
            {
                "causal_conv1d-1.7.0.post1+cpu.torch2.13.dist-info/METADATA": "Metadata-Version: 2.1\nName: causal-conv1d\nVersion: 1.6.0+cpu.torch2.13\n"
            },
        ),
        "the file name says",
    ),
    # no local version label: which variant would it be?
    ("causal_conv1d-1.7.0-cp39-abi3-linux_x86_64.whl", None, "no local version label"),
    # a per-Python wheel breaks the one-abi3-wheel contract
    ("causal_conv1d-1.7.0.post1+cpu.torch2.13-cp311-cp311-linux_x86_64.whl", None, "expected cp39-abi3"),
    # another project's wheel
    ("other_pkg-1.0+cpu.torch2.13-cp39-abi3-linux_x86_64.whl", None, "not a causal-conv1d wheel"),
    # an unknown accelerator in the label
    ("causal_conv1d-1.7.0.post1+rocm61.torch2.13-cp39-abi3-linux_x86_64.whl", None, "Invalid local version label"),
]


@pytest.mark.parametrize("name,make,reason", BAD_INPUTS, ids=[r for _, _, r in BAD_INPUTS])
def test_bad_input_reported_and_strict_fails(cli, make_wheel, tmp_path, name, make, reason):
    site = tmp_path / "site"
    make_wheel(variant="torch2.14-cpu")  # one good wheel
    assert cli("build", tmp_path / "wheels", "--out", site, "--now", NOW).code == 0
    before = snapshot(site)
    bad_dir = tmp_path / "more"
    bad_dir.mkdir()
    if make is None:
        make_wheel(directory=bad_dir, filename=name)  # a valid wheel under a name that breaks the contract
    else:
        make(bad_dir)
    run = cli("build", bad_dir, "--out", site, "--now", NOW, "--strict")
    assert run.code == 1, run
    assert name in run.err and reason in run.err and "--strict" in run.err
    assert snapshot(site) == before
    run = cli("build", bad_dir, "--out", site, "--now", NOW)  # nothing usable: an error, not a silent no-op
    assert run.code == 1, run
    assert name in run.err and reason in run.err and "no wheels to publish" in run.err
    assert snapshot(site) == before
    make_wheel(directory=bad_dir, variant="torch2.14-cpu")  # with one good wheel: published, the bad one warned
    run = cli("build", bad_dir, "--out", site, "--now", NOW)
    assert run.code == 0, run
    assert name in run.err and reason in run.err and "warning" in run.err
    assert json.loads((site / "manifest.json").read_text())["files"][0]["filename"].startswith(
        "causal_conv1d-1.7.0.post1+cpu.torch2.14"
    )
    assert len(json.loads((site / "manifest.json").read_text())["files"]) == 1


def test_unparseable_manifest_fails_and_keeps_site(cli, make_wheel, tmp_path):
    site = tmp_path / "site"
    make_wheel()
    assert cli("build", tmp_path / "wheels", "--out", site, "--now", NOW).code == 0
    (site / "manifest.json").write_text('{"format": 1, "files": [')
    before = snapshot(site)
    for extra in ([], ["--strict"]):
        run = cli("build", tmp_path / "wheels", "--out", site, "--now", NOW, *extra)
        assert run.code == 4, run
        assert "manifest.json" in run.err and "does not parse" in run.err
        assert snapshot(site) == before


def test_unreadable_entry_is_kept_verbatim(cli, make_wheel, tmp_path):
    site = tmp_path / "site"
    make_wheel()
    assert cli("build", tmp_path / "wheels", "--out", site, "--now", NOW).code == 0
    doc = json.loads((site / "manifest.json").read_text())
    broken = {"filename": "causal_conv1d-0.1+cpu.torch2.13-cp39-abi3-linux_x86_64.whl", "sha256": "nope"}
    doc["files"].append(broken)
    (site / "manifest.json").write_text(json.dumps(doc))
    assert cli("build", "--out", site, "--strict").code == 1
    run = cli("build", "--out", site)
    assert run.code == 0 and "unreadable entry" in run.err
    assert broken in json.loads((site / "manifest.json").read_text())["files"]  # never dropped


def test_failure_while_writing_leaves_old_site(cli, make_wheel, tmp_path, monkeypatch):
    site = tmp_path / "site"
    make_wheel()
    assert cli("build", tmp_path / "wheels", "--out", site, "--now", NOW).code == 0
    before = snapshot(site)
    make_wheel(variant="torch2.14-cpu")

    def explode(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(site_module, "render_pages", explode)
    run = cli("build", tmp_path / "wheels", "--out", site, "--now", NOW)
    assert run.code == 1 and "No space left on device" in run.err
    assert snapshot(site) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".site.")] == []  # temp dir cleaned up


def test_refuses_to_replace_a_foreign_directory(cli, make_wheel, tmp_path):
    make_wheel()
    out = tmp_path / "home"
    out.mkdir()
    (out / "thesis.tex").write_text("precious")
    run = cli("build", tmp_path / "wheels", "--out", out)
    assert run.code == 1 and "not a site written by index_site" in run.err
    assert (out / "thesis.tex").read_text() == "precious"


def test_invalid_now(cli, make_wheel, tmp_path):
    make_wheel()
    run = cli("build", tmp_path / "wheels", "--out", tmp_path / "site", "--now", "yesterday")
    assert run.code == 1 and "Invalid --now" in run.err and "'yesterday'" in run.err


def test_verify_detects_tampering(cli, make_wheel, tmp_path):
    site = tmp_path / "site"
    make_wheel()
    make_wheel(variant="torch2.14-cpu")
    assert cli("build", tmp_path / "wheels", "--out", site, "--now", NOW).code == 0
    wheel = site / "files" / CPU_213
    data = wheel.read_bytes()
    wheel.unlink()  # hard link: replace, don't modify the input in place
    wheel.write_bytes(data + b"\0")
    (site / "files" / "causal_conv1d-1.7.0.post1+cpu.torch2.14-cp39-abi3-linux_x86_64.whl.metadata").unlink()
    run = cli("verify", site)
    assert run.code == 1
    assert "the file's sha256 is" in run.err and "manifest says" in run.err
    assert ".metadata does not resolve" in run.err


def coverage_doc(cells: dict[str, dict[str, dict]]) -> str:
    """A coverage file in build_matrix's format (python -m build_matrix coverage --format json)."""
    rows = []
    for variant, by_platform in cells.items():
        torch, _, accel = variant.removeprefix("torch").partition("-")  # not parsed: tests pass bad names too
        rows.append({"torch": torch, "accel": accel, "variant": variant, "cells": by_platform})
    platforms = sorted({p for c in cells.values() for p in c})
    return json.dumps({"platforms": platforms, "abi3": True, "rows": rows})


def test_coverage_file_reasons_on_landing_page(cli, make_wheel, tmp_path):
    make_wheel()
    coverage = tmp_path / "coverage.json"
    coverage.write_text(
        coverage_doc(
            {
                "torch2.13-cpu": {"linux-x86_64": {"status": "covered", "wheel": CPU_213}},
                "torch2.13-cu118": {
                    "linux-x86_64": {"status": "covered", "wheel": "x.whl"},
                    "windows-amd64": {"status": "unavailable", "reason": "PyTorch publishes no <cu118> build"},
                },
            }
        )
    )
    site = tmp_path / "site"
    assert cli("build", tmp_path / "wheels", "--out", site, "--coverage", coverage, "--now", NOW).code == 0
    landing = (site / "index.html").read_text()
    assert "PyTorch publishes no &lt;cu118&gt; build" in landing
    assert "in the build matrix, but no wheel is published yet" in landing  # cu118 on Linux: planned only
    assert "<script src" not in landing and "<link" not in landing and "http://" not in landing.split("<script id")[0]
    # kept for the next build without --coverage
    assert cli("build", "--out", site).code == 0
    assert "PyTorch publishes no &lt;cu118&gt; build" in (site / "index.html").read_text()
    coverage.write_text(coverage_doc({"torch2.13-gpu": {"linux-x86_64": {"status": "covered"}}}))
    run = cli("build", "--out", site, "--coverage", coverage)
    assert run.code == 1 and "torch2.13-gpu" in run.err
    coverage.write_text(coverage_doc({"torch2.13-cpu": {"linux-x86_64": {"status": "maybe"}}}))
    run = cli("build", "--out", site, "--coverage", coverage)
    assert run.code == 1 and "'maybe'" in run.err


def test_coverage_from_build_matrix(cli, make_wheel, tmp_path):
    """The real producer: python -m build_matrix coverage --format json."""
    import subprocess
    import sys

    coverage = tmp_path / "coverage.json"
    subprocess.run(
        [sys.executable, "-m", "build_matrix", "coverage", "--format", "json", "--output", str(coverage)],
        check=True,
        cwd=str(Path(__file__).resolve().parents[2]),
        timeout=120,
    )
    make_wheel()
    site = tmp_path / "site"
    run = cli("build", tmp_path / "wheels", "--out", site, "--coverage", coverage, "--now", NOW)
    assert run.code == 0, run
    expected = json.loads(coverage.read_text())
    landing = (site / "index.html").read_text()
    for row in expected["rows"]:
        assert f'data-variant="{row["variant"]}"' in landing
    kept = json.loads((site / "coverage.json").read_text())
    assert {r["variant"] for r in kept["rows"]} == {r["variant"] for r in expected["rows"]}


@pytest.mark.parametrize(
    "accept,kind",
    [
        (None, "html"),
        ("text/html", "html"),
        ("application/vnd.pypi.simple.v1+json", "json"),
        # pip's header: JSON preferred
        ("application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, text/html; q=0.01", "json"),
        # a client that prefers HTML
        ("application/vnd.pypi.simple.v1+json; q=0.5, text/html", "html"),
        ("application/vnd.pypi.simple.latest+json", "json"),
        ("*/*", "html"),
    ],
)
def test_negotiate(accept, kind):
    assert negotiate(accept)[0] == kind


def test_empty_wheels_dir_is_an_error_and_an_empty_site_needs_no_wheels_dir(cli, tmp_path):
    site = tmp_path / "site"
    (tmp_path / "empty").mkdir()
    run = cli("build", tmp_path / "empty", "--out", site)
    assert run.code == 1, run
    assert f"no wheels to publish in {str(tmp_path / 'empty')!r}" in run.err and "the site was not changed" in run.err
    assert f"python -m index_site build --out {site}" in run.err
    assert not site.exists()
    (tmp_path / "empty" / "notes.txt").write_text("x")
    run = cli("build", tmp_path / "empty", "--out", site)
    assert run.code == 1 and "1 file(s) skipped" in run.err and "notes.txt" in run.err, run
    run = cli("build", "--out", site)  # no WHEELS_DIR: an empty site, from the (empty) manifest
    assert run.code == 0, run
    assert json.loads((site / "manifest.json").read_text())["files"] == []
    assert (site / "index.html").is_file() and (site / "whl" / "index.html").is_file()
    assert cli("verify", site).code == 0


def test_missing_wheels_dir(cli, tmp_path):
    run = cli("build", tmp_path / "nope", "--out", tmp_path / "site")
    assert run.code == 1 and "does not exist" in run.err
    assert not (tmp_path / "site").exists()


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two-renames"])
def test_swap_replaces_the_site(cli, make_wheel, tmp_path, monkeypatch, exchange):
    if not exchange:
        monkeypatch.setattr(site_module, "_renameat2_exchange", lambda a, b: False)
    site = tmp_path / "site"
    make_wheel()
    assert cli("build", tmp_path / "wheels", "--out", site, "--now", NOW).code == 0
    make_wheel(variant="torch2.14-cpu")
    assert cli("build", tmp_path / "wheels", "--out", site, "--now", NOW).code == 0
    assert (site / "whl" / "torch2.14-cpu" / "causal-conv1d" / "index.html").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site", "wheels"]  # no temp or old trees left


def test_serve_command(cli, make_wheel, tmp_path):
    """python -m index_site serve: prints its URL, serves pages with the right content types."""
    import subprocess
    import sys
    import urllib.request

    make_wheel()
    site = tmp_path / "site"
    assert cli("build", tmp_path / "wheels", "--out", site, "--now", NOW).code == 0
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-m", "index_site", "serve", str(site), "--port", "0"],
        cwd=str(root),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line).group(0)
        with urllib.request.urlopen(url) as resp:
            assert resp.headers["Content-Type"] == "text/html; charset=utf-8"
            assert b"Install causal-conv1d" in resp.read()
        page = url + "whl/torch2.13-cpu/causal-conv1d/"
        req = urllib.request.Request(page, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
        with urllib.request.urlopen(req) as resp:
            assert resp.headers["Content-Type"] == "application/vnd.pypi.simple.v1+json"
            assert json.loads(resp.read())["files"][0]["filename"] == CPU_213
        with urllib.request.urlopen(url + "files/" + contract.quote_path(CPU_213)) as resp:
            assert resp.headers["Content-Type"] == "application/octet-stream"
            assert resp.read() == (site / "files" / CPU_213).read_bytes()
    finally:
        proc.terminate()
        proc.wait(10)
        proc.stdout.close()


def test_failure_while_swapping_keeps_the_old_site_whole(cli, make_wheel, tmp_path, monkeypatch):
    """A failure while swapping the site in: the old site, manifest included, stays exactly as it was;
    the next build publishes the wheel."""
    site = tmp_path / "site"
    make_wheel()
    assert cli("build", tmp_path / "wheels", "--out", site, "--now", NOW).code == 0
    before = snapshot(site)
    make_wheel(variant="torch2.14-cpu")

    def explode(new, out):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(site_module, "swap_in", explode)
    run = cli("build", tmp_path / "wheels", "--out", site, "--now", NOW)
    assert run.code == 1 and "Input/output error" in run.err
    assert snapshot(site) == before  # manifest, pages and files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site", "wheels"]  # no temp trees left
    monkeypatch.undo()
    assert cli("build", tmp_path / "wheels", "--out", site, "--now", NOW).code == 0
    assert (site / "whl" / "torch2.14-cpu" / "causal-conv1d" / "index.html").is_file()
    assert cli("verify", site).code == 0


def test_incremental_equals_all_at_once(cli, make_wheel, tmp_path):
    """Publishing in two batches gives the same bytes as publishing everything at once."""
    for variant in ("torch2.13-cpu", "torch2.14-cu130"):
        make_wheel(directory=tmp_path / "batch1", variant=variant)
        make_wheel(directory=tmp_path / "batch2", variant=variant, version="1.7.1")
    for batch in ("batch1", "batch2"):
        for wheel in (tmp_path / batch).iterdir():
            (tmp_path / "all").mkdir(exist_ok=True)
            (tmp_path / "all" / wheel.name).write_bytes(wheel.read_bytes())
    assert cli("build", tmp_path / "all", "--out", tmp_path / "at-once", "--now", NOW).code == 0
    assert cli("build", tmp_path / "batch1", "--out", tmp_path / "steps", "--now", NOW).code == 0
    assert cli("build", tmp_path / "batch2", "--out", tmp_path / "steps", "--now", NOW).code == 0
    assert snapshot(tmp_path / "steps") == snapshot(tmp_path / "at-once")


def test_files_url_site_verifies_once_metadata_is_uploaded(cli, wheels, two_variants, tmp_path):
    """The release flow: wheels hosted elsewhere, their .metadata uploaded beside them."""
    assets = tmp_path / "assets"
    assets.mkdir()
    site = tmp_path / "site"
    assert cli("build", wheels, "--out", site, "--now", NOW, "--files-url", assets.as_uri()).code == 0
    for wheel in wheels.iterdir():
        (assets / wheel.name).write_bytes(wheel.read_bytes())
    run = cli("verify", site)
    assert run.code == 1 and ".metadata does not resolve" in run.err  # not uploaded yet
    for meta in (site / "files").glob("*.metadata"):
        (assets / meta.name).write_bytes(meta.read_bytes())
    run = cli("verify", site)
    assert run.code == 0, run
