"""refresh against a local index made of PyTorch wheel file names (HTML and PEP 691 JSON pages)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from build_matrix import compat, refresh
from build_matrix.errors import FetchError

FIXTURES = Path(__file__).parent / "fixtures"
PLAT_TAGS = {
    "linux-x86_64": "manylinux_2_28_x86_64",
    "linux-aarch64": "manylinux_2_28_aarch64",
    "windows-amd64": "win_amd64",
}
PY_27 = ["3.9", "3.10", "3.11", "3.12", "3.13", "3.13t"]
PY_29 = ["3.10", "3.11", "3.12", "3.13", "3.13t", "3.14", "3.14t"]
ALL = list(PLAT_TAGS)


def real_names(name: str) -> list[str]:
    return [ln for ln in (FIXTURES / name).read_text().splitlines() if ln and not ln.startswith("#")]


def wheels(version: str, accel: str, pythons: list[str], platforms: list[str]) -> list[str]:
    """File names in PyTorch's exact layout: torch-2.8.0+cu128-cp313-cp313t-manylinux_2_28_x86_64.whl."""
    out = []
    for py in pythons:
        digits = py.replace(".", "").rstrip("t")
        abi = f"cp{digits}{'t' if py.endswith('t') else ''}"
        for plat in platforms:
            out.append(f"torch-{version}+{accel}-cp{digits}-{abi}-{PLAT_TAGS[plat]}.whl")
    return out


def serve_current(server, *, json: bool = True) -> None:
    """The index as the tests' 'today': 2.7.1 out, 2.8 cu126 gained aarch64, 2.9 is new."""
    other = real_names("other-flavours.txt")
    server.page(
        "cpu",
        other
        + wheels("2.7.0", "cpu", PY_27, ALL)
        + wheels("2.7.1", "cpu", PY_27, ALL)
        + wheels("2.8.0", "cpu", PY_27, ALL)
        + wheels("2.9.0", "cpu", PY_29, ALL),
        json=json,
    )
    server.page(
        "cu126",
        wheels("2.7.1", "cu126", PY_27, ["linux-x86_64", "windows-amd64"])
        + wheels("2.8.0", "cu126", PY_27, ALL)
        + wheels("2.9.0", "cu126", PY_29, ALL),
        json=json,
    )
    server.page(
        "cu128",
        real_names("torch-2.7.0-cu128.txt")
        + wheels("2.7.1", "cu128", PY_27, ALL)
        + wheels("2.8.0", "cu128", PY_27, ALL)
        + wheels("2.9.0", "cu128", PY_29, ["linux-x86_64", "linux-aarch64"])
        + wheels("2.9.0", "cu128", [p for p in PY_29 if p != "3.13t"], ["windows-amd64"]),
        json=json,
    )
    server.page("cu129", wheels("2.8.0", "cu129", PY_27, ALL), json=json)
    server.page("cu130", wheels("2.9.0", "cu130", PY_29, ALL), json=json)


@pytest.fixture
def small(tmp_path: Path) -> Path:
    target = tmp_path / "compat.toml"
    shutil.copy(FIXTURES / "small.toml", target)
    return target


@pytest.mark.parametrize(
    "name,accel,expected",
    [
        ("torch-2.7.0+cu128-cp313-cp313t-manylinux_2_28_aarch64.whl", "cu128", "2.7 cu128 3.13t linux-aarch64 2.7.0"),
        ("torch-2.7.0+cu128-cp39-cp39-win_amd64.whl", "cu128", "2.7 cu128 3.9 windows-amd64 2.7.0"),
        # no local label: the page's accel (torch <= 2.5 aarch64 CPU wheels)
        (
            "torch-2.4.1-cp310-cp310-manylinux_2_17_aarch64.manylinux2014_aarch64.whl",
            "cpu",
            "2.4 cpu 3.10 linux-aarch64 2.4.1",
        ),
        ("torch-2.4.1+cpu-cp310-cp310-linux_x86_64.whl", "cpu", "2.4 cpu 3.10 linux-x86_64 2.4.1"),
        ("torch-2.4.1+cpu.cxx11.abi-cp310-cp310-linux_x86_64.whl", "cpu", None),  # another flavour
        ("torch-2.7.0+cu126-cp312-cp312-win_amd64.whl", "cu128", None),  # another accel's wheel
        ("torch-2.7.0-cp312-none-macosx_11_0_arm64.whl", "cpu", None),  # a platform we do not build
        ("torch-2.8.0+cpu-cp312-cp312-win_arm64.whl", "cpu", None),
        ("torch-2.9.0rc3+cpu-cp312-cp312-win_amd64.whl", "cpu", None),  # a pre-release
        ("torchvision-0.22.0+cpu-cp312-cp312-win_amd64.whl", "cpu", None),  # another project
        ("torch-2.7.0.tar.gz", "cpu", None),  # not a wheel
        ("torch-2.7.0+cpu-cp312.whl", "cpu", None),  # a broken name
    ],
)
def test_classify(name: str, accel: str, expected: str | None) -> None:
    """``expected``: the Observation's fields, space-separated (None: the name is not one to record)."""
    assert refresh.classify(name, accel) == (refresh.Observation(*expected.split()) if expected else None)


def test_html_and_json_pages_parse_alike(renderers) -> None:
    render_html, render_json = renderers
    names = real_names("torch-2.7.0-cu128.txt")
    assert refresh.filenames_from_html(render_html("cu128", names)) == names
    assert refresh.filenames_from_json(render_json("cu128", names)) == names


@pytest.mark.parametrize("use_json", [True, False], ids=["pep691-json", "html"])
def test_refresh_rebuilds_availability(index_server, small: Path, use_json: bool, capsys) -> None:
    serve_current(index_server, json=use_json)
    before = small.read_text()
    result = refresh.refresh(str(small), base=index_server.url, extra_accels=["cu130"], retries=0)
    assert result.written
    new = compat.load(small)
    assert new.torch["2.7"].latest == "2.7.1"
    assert new.torch["2.8"].builds["cu126"] == tuple(ALL)
    assert new.torch["2.8"].note == "kept by refresh" and new.torch["2.8"].confidence == "medium"
    t29 = new.torch["2.9"]
    assert t29.latest == "2.9.0" and t29.cpp_std == "17" and t29.confidence == "low"
    assert set(t29.builds) == {"cpu", "cu126", "cu128", "cu130"}
    assert t29.pythons == tuple(PY_29)
    assert t29.pythons_for("cu128", "windows-amd64") == tuple(p for p in PY_29 if p != "3.13t")
    assert t29.pythons_for("cu130", "windows-amd64") == tuple(PY_29)
    assert index_server.url in t29.availability_source
    lines = "\n".join(result.changes)
    assert "~ torch 2.7: latest 2.7.0 -> 2.7.1" in lines
    assert "+ torch 2.8 cu126 linux-aarch64" in lines
    assert "+ torch 2.9: new release" in lines
    assert result.pages == 5
    # The other flavours on the cpu page were skipped, not counted.
    assert all(o.minor != "2.4" for o in refresh.observe(index_server.url, ["cpu"], since=(2, 7))[0])
    assert small.read_text() != before
    # A second refresh finds nothing new and leaves the file alone.
    again = refresh.refresh(str(small), base=index_server.url, extra_accels=["cu130"], retries=0)
    assert again.changes == [] and not again.written


def test_cli_refresh_prints_changes_and_dry_run_writes_nothing(index_server, small: Path, cli) -> None:
    serve_current(index_server)
    before = small.read_text()
    res = cli("refresh", "--data", str(small), "--index-url", index_server.url, "--dry-run", "--retries", "0")
    assert res.code == 0, res.err
    assert "latest 2.7.0 -> 2.7.1" in res.out and "dry run: nothing written" in res.out
    assert small.read_text() == before
    out = small.parent / "new.toml"
    res = cli("refresh", "--data", str(small), "--index-url", index_server.url, "--output", str(out), "--retries", "0")
    assert res.code == 0 and out.exists() and small.read_text() == before
    assert compat.load(out).torch["2.7"].latest == "2.7.1"


def test_env_var_sets_the_index(index_server, small: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    serve_current(index_server)
    monkeypatch.setenv(compat.INDEX_ENV, index_server.url)
    assert refresh.refresh(str(small), dry_run=True, retries=0).pages == 4


def _assert_untouched(path: Path, before: str) -> None:
    assert path.read_text() == before
    assert not list(path.parent.glob(".*.tmp"))


def test_http_500_writes_nothing(index_server, small: Path, cli) -> None:
    serve_current(index_server)
    route = index_server.page("cu129", [], status=500)
    before = small.read_text()
    res = cli("refresh", "--data", str(small), "--index-url", index_server.url, "--retries", "2")
    assert res.code == 5
    assert "HTTP 500" in res.err and "/cu129/torch/" in res.err
    assert route.hits == 3, "the request is retried"
    _assert_untouched(small, before)


def test_timeout_writes_nothing(index_server, small: Path) -> None:
    serve_current(index_server)
    index_server.routes["/whl/cu128/torch/"].delay = 2.0
    before = small.read_text()
    with pytest.raises(FetchError, match=r"Timed out fetching .*/cu128/torch/"):
        refresh.refresh(str(small), base=index_server.url, timeout=(2.0, 0.3), retries=0)
    _assert_untouched(small, before)


@pytest.mark.parametrize(
    "body,ctype,match",
    [
        (b"<html><body>Service temporarily unavailable</body></html>", "text/html", "lists no torch wheels"),
        (b"{not json", "application/vnd.pypi.simple.v1+json", "Unparseable index page"),
        (b'{"files": "nope"}', "application/vnd.pypi.simple.v1+json", "no 'files' list"),
        (b"\x89PNG\r\n", "image/png", "Unexpected content type 'image/png'"),
    ],
)
def test_garbage_writes_nothing(index_server, small: Path, body: bytes, ctype: str, match: str) -> None:
    serve_current(index_server)
    index_server.page("cpu", [], body=body, content_type=ctype)
    before = small.read_text()
    with pytest.raises(FetchError, match=match):
        refresh.refresh(str(small), base=index_server.url, retries=0)
    _assert_untouched(small, before)


def test_unknown_accel_is_a_404(index_server, small: Path, cli) -> None:
    serve_current(index_server)
    res = cli("refresh", "--data", str(small), "--index-url", index_server.url, "--accel", "cu999", "--retries", "0")
    assert res.code == 5 and "HTTP 404" in res.err and "accelerator name" in res.err


def test_disappearing_builds_are_refused(index_server, small: Path) -> None:
    serve_current(index_server)
    index_server.page("cu129", wheels("2.9.0", "cu129", PY_29, ALL))  # 2.8 cu129 vanished: partial?
    before = small.read_text()
    with pytest.raises(FetchError, match="torch 2.8 cu129 is in the data but not on the fetched cu129 page"):
        refresh.refresh(str(small), base=index_server.url, retries=0)
    _assert_untouched(small, before)
    result = refresh.refresh(str(small), base=index_server.url, retries=0, allow_removals=True)
    assert "cu129" not in compat.load(small).torch["2.8"].builds
    assert any(line.startswith("- torch 2.8 cu129") for line in result.changes)


def test_new_cuda_without_arch_list_is_skipped_with_a_warning(index_server, small: Path) -> None:
    serve_current(index_server)
    index_server.page("cu132", wheels("2.9.0", "cu132", PY_29, ALL))
    result = refresh.refresh(str(small), base=index_server.url, extra_accels=["cu132"], retries=0, dry_run=True)
    assert any('no [cuda."13.2"] arch list' in w for w in result.warnings)
    assert "cu132" not in result.new.torch["2.9"].builds


def test_refresh_needs_http(small: Path) -> None:
    with pytest.raises(FetchError, match="needs an http"):
        refresh.refresh(str(small), base="file:///tmp/whl")


def test_session_retries_and_proxies() -> None:
    session = refresh.make_session(retries=4, backoff=0.1)
    adapter = session.get_adapter("https://download.pytorch.org/whl/cpu/torch/")
    assert adapter.max_retries.total == 4 and 503 in adapter.max_retries.status_forcelist
    assert session.trust_env


@pytest.mark.parametrize(
    "url, match",
    [
        # nothing listens on port 9 (discard) of the loopback: refused at once, not a timeout
        ("http://127.0.0.1:9/whl", r"Cannot fetch http://127\.0\.0\.1:9/whl/.*: the connection was refused"),
        # .invalid never resolves (RFC 2606): a DNS failure, not a timeout
        ("http://no-such-host.invalid/whl", r"the host name 'no-such-host\.invalid' does not resolve \(DNS\)"),
    ],
)
def test_connection_failures_are_not_called_timeouts(small: Path, url: str, match: str) -> None:
    before = small.read_text()
    with pytest.raises(FetchError, match=match) as info:
        refresh.refresh(str(small), base=url, timeout=(2.0, 2.0), retries=1)
    assert "Timed out" not in str(info.value) and "--timeout" not in str(info.value)
    _assert_untouched(small, before)
