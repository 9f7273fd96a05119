"""build_support/prebuilt.py without pip: page parsing, selection, verification, relabelling."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest
from packaging.tags import Tag

import causal_conv1d_contract as contract
from build_support import prebuilt
from build_support.torch_probe import TorchInfo
from build_support.torch_target import target_variant
from build_support.wheel_fetch import restamp
from build_support.wheel_select import Candidate, lookups, parse_page, select
from causal_conv1d_contract.net import IndexClientError

from .conftest import INDEX_FAILURES, index_first_env

V = contract.Variant.parse("torch2.13-cpu")
LINUX = [
    Tag("cp311", "abi3", "manylinux_2_28_x86_64"),
    Tag("cp39", "abi3", "manylinux_2_28_x86_64"),
    Tag("cp39", "abi3", "manylinux2014_x86_64"),
    Tag("cp39", "abi3", "linux_x86_64"),
]


def cand(filename: str, **kw: object) -> Candidate:
    return Candidate(filename, f"https://x/{filename}", kw.pop("sha256", "ab" * 32), **kw)  # type: ignore[arg-type]


def name(version: str = "1.7.0.post1+cpu.torch2.13", plat: str = "linux_x86_64") -> str:
    return f"causal_conv1d-{version}-cp39-abi3-{plat}.whl"


def test_html_page_parsing_resolves_relative_urls_and_hashes() -> None:
    body = (
        b'<html><a href="../../../files/causal_conv1d-1.7.0.post1%2Bcpu.torch2.13-cp39-abi3-linux_x86_64.whl'
        b"#sha256=" + b"c" * 64 + b'" data-requires-python="&gt;=3.9">x</a><a href="other.tar.gz">y</a>'
        b'<a href="y.whl" data-yanked="">z</a></html>'
    )
    got = parse_page(body, "text/html", "http://h/whl/torch2.13-cpu/causal-conv1d/")
    assert got[0].filename == "causal_conv1d-1.7.0.post1+cpu.torch2.13-cp39-abi3-linux_x86_64.whl"
    assert got[0].url == "http://h/files/causal_conv1d-1.7.0.post1%2Bcpu.torch2.13-cp39-abi3-linux_x86_64.whl"
    assert got[0].sha256 == "c" * 64 and got[0].requires_python == ">=3.9" and not got[0].yanked
    assert got[1].sha256 is None
    assert got[2].yanked


def test_json_page_parsing() -> None:
    data = {
        "meta": {"api-version": "1.1"},
        "name": "causal-conv1d",
        "files": [
            {
                "filename": name(),
                "url": "../../../files/a.whl",
                "hashes": {"sha256": "d" * 64},
                "size": 123,
                "requires-python": ">=3.9",
                "yanked": False,
            }
        ],
    }
    got = parse_page(json.dumps(data).encode(), "application/vnd.pypi.simple.v1+json", "http://h/p/q/r/")
    assert got == [Candidate(name(), "http://h/files/a.whl", "d" * 64, 123, ">=3.9", False)]


@pytest.mark.parametrize("body", [b"\xff\xfe\x00garbage", b'{"files": 3'])
def test_garbage_pages_raise_index_error(body: bytes) -> None:
    with pytest.raises(IndexClientError):
        parse_page(body, "application/vnd.pypi.simple.v1+json" if body.startswith(b"{") else "text/html", "http://h/")


def test_select_exact_version_variant_and_best_tag() -> None:
    cands = [
        cand(name("1.6.0+cpu.torch2.13")),  # other version
        cand(name("1.7.0.post1+cu128.torch2.13")),  # other variant
        cand(name("1.7.0.post1+cpu.torch2.12")),  # other torch
        cand(name(plat="linux_x86_64")),
        cand(name(plat="manylinux_2_28_x86_64")),
        cand(name(plat="manylinux_2_28_aarch64")),
        cand(name(plat="win_amd64")),
    ]
    best, why = select(cands, V, LINUX)
    assert best is not None and best.filename == name(plat="manylinux_2_28_x86_64"), why
    arm = [Tag("cp312", "abi3", "manylinux_2_28_aarch64"), Tag("cp39", "abi3", "manylinux_2_28_aarch64")]
    best, _ = select(cands, V, arm)
    assert best is not None and best.filename.endswith("aarch64.whl")
    best, _ = select(cands, V, [Tag("cp39", "abi3", "win_amd64")])
    assert best is not None and best.filename.endswith("win_amd64.whl")


def test_select_skips_yanked_and_requires_python_and_explains() -> None:
    best, why = select([cand(name(), yanked=True)], V, LINUX)
    assert best is None and "no 1.7.0.post1 wheel" in why
    best, _ = select([cand(name(), requires_python=">=4")], V, LINUX)
    assert best is None
    best, why = select([cand(name(plat="win_amd64"))], V, LINUX)
    assert best is None and "win_amd64" in why
    best, why = select([cand(name("1.5.0+cpu.torch2.13"))], V, LINUX)
    assert best is None and "1.5.0+cpu.torch2.13" in why


def test_settings_skip_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (contract.ENV_FORCE_BUILD, contract.ENV_LOCAL_VERSION, contract.ENV_SKIP_CUDA_BUILD):
        monkeypatch.delenv(var, raising=False)
    assert prebuilt.settings_skip_reason() is None
    monkeypatch.setenv(contract.ENV_FORCE_BUILD, "TRUE")
    assert contract.ENV_FORCE_BUILD in (prebuilt.settings_skip_reason() or "")
    monkeypatch.setenv(contract.ENV_FORCE_BUILD, "FALSE")
    assert prebuilt.settings_skip_reason() is None
    monkeypatch.setenv(contract.ENV_LOCAL_VERSION, "cpu.torch2.13")
    assert "release build" in (prebuilt.settings_skip_reason() or "")


def test_target_variant(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(contract.ENV_FORCE_CXX11_ABI, raising=False)
    assert target_variant(TorchInfo(True, "2.7.1+cu128", "12.8", None, True)).name == "torch2.7-cu128"
    assert target_variant(TorchInfo(True, "2.5.1", None, None, True)).name == "torch2.5-cpu-cxx11abi1"
    monkeypatch.setenv(contract.ENV_FORCE_CXX11_ABI, "FALSE")
    assert target_variant(TorchInfo(True, "2.7.1+cu128", "12.8", None, True)).name == "torch2.7-cu128-cxx11abi0"
    with pytest.raises(IndexClientError, match="ROCm"):
        target_variant(TorchInfo(True, "2.7.1+rocm6.3", None, "6.3", True))
    with pytest.raises(IndexClientError, match="no torch"):
        target_variant(TorchInfo(False, error="nope"))


def test_restamp_keeps_every_file_and_relabels_dist_info(real_cpu_wheel: Path, tmp_path: Path) -> None:
    sha = hashlib.sha256(real_cpu_wheel.read_bytes()).hexdigest()
    out = restamp(real_cpu_wheel, tmp_path, "http://x/y.whl", sha)
    assert out.name == f"causal_conv1d-{contract.PACKAGE_VERSION}-cp39-abi3-" + real_cpu_wheel.name.split("-abi3-")[1]
    with zipfile.ZipFile(real_cpu_wheel) as a, zipfile.ZipFile(out) as b:
        # Directory entries (some repair tools write them) carry no data and are not re-written.
        old = {n: a.read(n) for n in a.namelist() if ".dist-info/" not in n and not n.endswith("/")}
        new = {n: b.read(n) for n in b.namelist() if ".dist-info/" not in n}
        assert old == new  # the extension and the build record: byte for byte
        di = f"causal_conv1d-{contract.PACKAGE_VERSION}.dist-info"
        meta = b.read(f"{di}/METADATA").decode()
        assert f"\nVersion: {contract.PACKAGE_VERSION}\n" in meta and "Requires-Dist: torch" in meta
        assert json.loads(b.read(f"{di}/PREBUILT.json"))["sha256"] == sha
        record = b.read(f"{di}/RECORD").decode().splitlines()
        assert {ln.split(",")[0] for ln in record} == set(b.namelist())
        import base64

        for ln in record:
            path, digest, _size = ln.split(",")
            if digest:
                want = base64.urlsafe_b64encode(hashlib.sha256(b.read(path)).digest()).rstrip(b"=").decode()
                assert digest == f"sha256={want}", path
    assert not list(tmp_path.glob(".*tmp"))


# --- against the live 127.0.0.1 index, each failure mode ----------------------------------------


def _fetch(tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> prebuilt.Outcome:
    index_first_env(monkeypatch, url)
    monkeypatch.setattr(prebuilt, "TIMEOUT_S", 1.5)
    return prebuilt.fetch_prebuilt(tmp_path / "dest")


def _nothing_left(tmp_path: Path) -> bool:
    dest = tmp_path / "dest"
    return not dest.exists() or not [p for p in dest.rglob("*") if p.is_file()]


@pytest.mark.parametrize("mode", ["ok", "json"])
def test_fetch_ok(
    index, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    index.mode = mode
    out = _fetch(tmp_path, index.url, monkeypatch)
    assert out.wheel is not None and out.wheel.exists(), out.message
    assert out.variant == "torch2.13-cpu"
    assert out.wheel.name.startswith(f"causal_conv1d-{contract.PACKAGE_VERSION}-cp39-abi3-")
    assert "using prebuilt wheel causal_conv1d-1.7.0.post1+cpu.torch2.13" in capsys.readouterr().err
    assert [p.name for p in out.wheel.parent.iterdir()] == [out.wheel.name]  # no partial/download leftovers


def test_fetch_file_url(site_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = _fetch(tmp_path, site_dir.as_uri() + "/", monkeypatch)
    assert out.wheel is not None, out.message


@pytest.mark.parametrize("mode,expect", INDEX_FAILURES)
def test_fetch_failures_fall_back_and_leave_nothing(
    index, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], mode: str, expect: str
) -> None:
    index.mode = mode
    index.stall_s = 5
    monkeypatch.setattr(prebuilt, "RETRIES", 2)
    out = _fetch(tmp_path, index.url, monkeypatch)
    assert out.wheel is None
    assert expect in out.message, out.message
    assert f"{expect}" in capsys.readouterr().err and _nothing_left(tmp_path)


@pytest.mark.parametrize("mode,what", [("badhash", "sha256"), ("badsize", "size"), ("bigger", "sha256")])
def test_a_wheel_that_fails_verification_stops_the_install(
    index, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, site_dir: Path, mode: str, what: str
) -> None:
    """A wrong sha256 or size is a tampered or corrupted download: stop, never compile quietly."""
    index.mode = mode
    wheel = next((site_dir / "files").glob("*.whl"))
    real = hashlib.sha256(wheel.read_bytes()).hexdigest()
    with pytest.raises(SystemExit) as info:
        _fetch(tmp_path, index.url, monkeypatch)
    msg = str(info.value.code)
    assert msg.startswith(f"causal-conv1d: STOP: the prebuilt wheel {wheel.name} from {index.url}"), msg
    assert f"({what} mismatch)" in msg and "Nothing was installed" in msg
    if mode == "badhash":
        assert f"expected sha256: {'0' * 64}" in msg and f"actual   sha256: {real}" in msg
    elif mode == "badsize":
        size = wheel.stat().st_size
        assert f"expected size: {size + 1} bytes" in msg and f"actual   size: {size} bytes" in msg
        assert f"actual   sha256: {real}" in msg  # both hashes too: the same file, but not the size it should have
    else:  # HTML page, no size: 100 extra bytes change the hash
        assert f"expected sha256: {real}" in msg and "actual   sha256: " in msg
    assert f"{contract.ENV_FORCE_BUILD}=TRUE pip install" in msg
    assert _nothing_left(tmp_path)


def test_fetch_connection_refused(refused_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = _fetch(tmp_path, refused_url, monkeypatch)
    assert out.wheel is None and "refused" in out.message.lower(), out.message


def test_fetch_skipped_by_force_build_makes_no_request(index, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(contract.ENV_INDEX_URL, index.url)
    monkeypatch.setenv(contract.ENV_FORCE_BUILD, "TRUE")
    out = prebuilt.fetch_prebuilt(tmp_path / "dest")
    assert out.wheel is None and contract.ENV_FORCE_BUILD in out.message
    assert index.requests == []


def test_probe_for_doctor(index, refused_url: str) -> None:
    assert prebuilt.probe(V, index.url)[0] is True
    assert prebuilt.probe(contract.Variant.parse("torch2.7-cu128"), index.url)[0] is False
    known, detail = prebuilt.probe(V, refused_url, timeout=1)
    assert known is None and "refused" in detail.lower()


# --- stable-ABI wheels (torch >= 2.10) -----------------------------------------------------------

STABLE_CPU = contract.StableVariant("cpu")


def test_lookups_ask_the_family_page_first_for_torch_2_10_plus() -> None:
    base = "http://h/"
    assert lookups(V, base) == [
        ("http://h/whl/stable2.10-cpu/causal-conv1d/", (STABLE_CPU,)),
        ("http://h/whl/torch2.13-cpu/causal-conv1d/", (STABLE_CPU, V)),
    ]
    old = contract.Variant.parse("torch2.9-cu128")
    assert lookups(old, base) == [("http://h/whl/torch2.9-cu128/causal-conv1d/", (old,))]
    # torch 2.15 with the other C++ ABI: no per-minor page exists, the stable wheel serves it
    odd = contract.Variant.parse("torch2.15-cu130-cxx11abi0")
    assert lookups(odd, base) == [("http://h/whl/stable2.10-cu13/causal-conv1d/", (contract.StableVariant("cu13"),))]
    assert lookups(contract.Variant.parse("torch2.5-cpu-cxx11abi1"), base) == []


def test_select_prefers_the_stable_wheel_and_keeps_families_apart() -> None:
    legacy = cand(name())
    stable = cand(name("1.7.0.post1+cpu.stable2.10"))
    cu12 = cand(name("1.7.0.post1+cu12.stable2.10"))
    best, _ = select([legacy, stable, cu12], (STABLE_CPU, V), LINUX)
    assert best == stable
    best, _ = select([legacy, cu12], (STABLE_CPU, V), LINUX)
    assert best == legacy  # a per-minor wheel of exactly this variant still counts
    best, why = select([cu12], (STABLE_CPU, V), LINUX)
    assert best is None and why == "no wheel"  # a CUDA 12 wheel never serves a CPU torch
    # a better platform tag wins over the stable preference
    better = cand(name(plat="manylinux_2_28_x86_64"))
    best, _ = select([better, stable], (STABLE_CPU, V), LINUX)
    assert best == better


def _stable_index(tmp_path: Path, family: str = "cpu") -> Path:
    from index_site.site import BuildOptions, build_site
    from tests.helpers.wheels import write_wheel

    wheels = tmp_path / "stable-wheels"
    write_wheel(wheels, variant=f"stable2.10-{family}", platform="linux_x86_64", requires_dist=("torch>=2.10",))
    site = tmp_path / "stable-site"
    build_site(BuildOptions(wheels_dir=wheels, out=site, now="2026-01-01T00:00:00Z"))
    return site


def test_fetch_uses_the_stable_wheel_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    site = _stable_index(tmp_path)
    out = _fetch(tmp_path, site.as_uri() + "/", monkeypatch)  # the torch here: 2.13 CPU
    assert out.wheel is not None, out.message
    assert out.variant == "torch2.13-cpu"
    assert (
        "using prebuilt wheel causal_conv1d-1.7.0.post1+cpu.stable2.10-cp39-abi3-linux_x86_64.whl"
        in capsys.readouterr().err
    )
    # a file that is not what the index says (sha256, size) stops the install: no local build
    [wheel] = (site / "files").glob("*.whl")
    wheel.write_bytes(wheel.read_bytes() + b"\0")
    with pytest.raises(SystemExit) as stop:
        _fetch(tmp_path / "again", site.as_uri() + "/", monkeypatch)
    assert "does not match the index (sha256 mismatch)" in str(stop.value.code)
    assert _nothing_left(tmp_path / "again")


@pytest.mark.parametrize("version", ["2.15.0+cpu", "2.16.0"])
def test_fetch_for_a_torch_newer_than_the_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    site = _stable_index(tmp_path)
    monkeypatch.setattr(prebuilt, "find_target_torch", lambda: (TorchInfo(True, version, None, None, True), "test"))
    out = _fetch(tmp_path, site.as_uri() + "/", monkeypatch)
    assert out.wheel is not None, out.message
    assert "+cpu.stable2.10" in out.message and out.variant == f"torch{version[:4]}-cpu"
    assert prebuilt.probe(contract.Variant.from_torch(version, None, True), site.as_uri() + "/")[0] is True
    # a CUDA 13 torch finds no CPU wheel: not a wrong wheel, a local build
    monkeypatch.setattr(
        prebuilt, "find_target_torch", lambda: (TorchInfo(True, "2.15.0+cu130", "13.0", None, True), "t")
    )
    out = _fetch(tmp_path / "cu13", site.as_uri() + "/", monkeypatch)
    assert out.wheel is None and "whl/stable2.10-cu13/" in out.message
