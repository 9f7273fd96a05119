"""``refresh``: rebuild the availability part of the data from PyTorch's live wheel index.

For every accelerator (those in the data plus ``--accel``), fetch ``<base>/<accel>/torch/``
(PEP 691 JSON when the server offers it, else the PEP 503 HTML page), parse each file name with
``packaging.utils.parse_wheel_filename`` and derive (torch minor, accel, CPython, platform).
From those facts it rewrites, per torch minor >= ``since``: ``latest``, ``pythons``, ``builds``,
``python_overrides`` and ``availability_source``; everything else (C++ standard, arch lists,
sources, notes) is kept. A new minor inherits the previous minor's C++ standard with
``confidence = "low"``.

Safety: nothing is written unless every page was fetched and parsed and the result validates;
a torch minor or (minor, accel) build that disappears is refused as a likely partial fetch unless
``allow_removals``; the file is replaced atomically. The network: ``requests`` with
(connect, read) timeouts, urllib3 ``Retry`` with backoff on connection errors and 429/5xx, and
proxies from the environment (``HTTPS_PROXY``, ``NO_PROXY``, ...).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import urllib.parse
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Optional

import requests
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version
from requests.adapters import HTTPAdapter
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError, ReadTimeoutError
from urllib3.util.retry import Retry

import causal_conv1d_contract as contract
from build_matrix import compat, compat_write
from build_matrix.errors import FetchError
from causal_conv1d_contract.net import IndexClientError, parse_anchors

__all__ = [
    "PEP691_JSON",
    "ACCEPT",
    "Observation",
    "RefreshResult",
    "make_session",
    "page_url",
    "filenames_from_html",
    "filenames_from_json",
    "classify",
    "fetch_filenames",
    "observe",
    "rebuild",
    "describe_changes",
    "refresh",
]

PEP691_JSON = "application/vnd.pypi.simple.v1+json"
ACCEPT = f"{PEP691_JSON}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"


@dataclasses.dataclass(frozen=True, order=True)
class Observation:
    """One torch wheel on PyTorch's index, reduced to what the plan needs."""

    minor: str  # "2.7"
    accel: str  # the index page it is on: "cu128", "cpu"
    python: str  # "3.12", "3.13t"
    platform: str  # "linux-x86_64" | "linux-aarch64" | "windows-amd64"
    version: str  # "2.7.1" (public version, local label dropped)


@dataclasses.dataclass(frozen=True)
class RefreshResult:
    old: compat.CompatData
    new: compat.CompatData
    changes: list[str]
    warnings: list[str]
    written: bool
    pages: int
    wheels: int


def make_session(*, retries: int = 3, backoff: float = 0.5) -> requests.Session:
    """A requests session with retries (connection errors, read errors, 429/5xx) and env proxies."""
    session = requests.Session()
    session.trust_env = True  # HTTP(S)_PROXY / NO_PROXY / REQUESTS_CA_BUNDLE from the environment
    retry = Retry(
        total=retries,
        connect=retries,
        read=retries,
        status=retries,
        backoff_factor=backoff,
        status_forcelist=(429, 500, 502, 503, 504),
        allowed_methods=frozenset({"GET"}),
        raise_on_status=False,
        respect_retry_after_header=True,
    )
    adapter = HTTPAdapter(max_retries=retry)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.headers["User-Agent"] = "causal-conv1d-build-matrix-refresh"
    return session


def page_url(base: str, accel: str) -> str:
    """``https://download.pytorch.org/whl`` + ``cu128`` -> ``.../whl/cu128/torch/``."""
    return f"{base.rstrip('/')}/{accel}/torch/"


def filenames_from_html(text: str) -> list[str]:
    """File names of a PEP 503 page: the last path segment of each ``<a href>`` (URL-unquoted)."""
    anchors, _meta = parse_anchors(text)  # the project's one anchor parser
    names = []
    for a in anchors:
        href, label = a.href, a.text
        path = urllib.parse.urlsplit(href).path
        name = urllib.parse.unquote(path.rsplit("/", 1)[-1]) if path else ""
        names.append(name or label)
    return names


def filenames_from_json(text: str) -> list[str]:
    """File names of a PEP 691 JSON page (``files[].filename``)."""
    doc = json.loads(text)
    if not isinstance(doc, dict) or not isinstance(doc.get("files"), list):
        raise ValueError("no 'files' list")
    names = []
    for i, f in enumerate(doc["files"]):
        if not isinstance(f, dict) or not isinstance(f.get("filename"), str):
            raise ValueError(f"files[{i}] has no 'filename'")
        names.append(f["filename"])
    return names


def _platform(tag_platform: str) -> Optional[str]:
    if tag_platform == "win_amd64":
        return "windows-amd64"
    if tag_platform.startswith(("manylinux", "linux")):
        if tag_platform.endswith("_x86_64"):
            return "linux-x86_64"
        if tag_platform.endswith("_aarch64"):
            return "linux-aarch64"
    return None


def classify(filename: str, accel: str) -> Optional[Observation]:
    """The observation a torch wheel on the ``accel`` page gives, or None for anything else.

    Skipped: non-wheels, other projects, pre-releases, builds of another flavour on the same page
    (local label other than the page's accel, e.g. ``+cpu.cxx11.abi``), and platforms we do not
    build for (macOS, Windows on Arm). A wheel without a local label (e.g. the aarch64 CPU wheels
    of torch <= 2.5) belongs to the page it is on.
    """
    if not filename.endswith(".whl"):
        return None
    try:
        name, version, _build, tags = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return None
    if name != "torch" or version.is_prerelease or version.is_devrelease:
        return None
    if version.local is not None and version.local != accel:
        return None
    found: Optional[Observation] = None
    for tag in sorted(tags, key=str):
        platform = _platform(tag.platform)
        if platform is None or not tag.interpreter.startswith("cp") or not tag.abi.startswith("cp"):
            continue
        digits = tag.abi[2:]
        threaded = digits.endswith("t")
        digits = digits.rstrip("t")
        if not digits.isdigit() or len(digits) < 2 or digits[0] != "3":
            continue
        python = f"3.{digits[1:]}{'t' if threaded else ''}"
        found = Observation(f"{version.major}.{version.minor}", accel, python, platform, version.public)
        break
    return found


def _reason(exc: BaseException) -> object:
    """The urllib3 error behind a requests exception (after retries: MaxRetryError.reason)."""
    inner = exc.args[0] if exc.args else None
    return getattr(inner, "reason", inner)


def _is_timeout(exc: BaseException) -> bool:
    """Timeouts arrive as Timeout, or (after retries) as a ConnectionError wrapping MaxRetryError.
    urllib3's NewConnectionError (refused, unresolvable host) subclasses ConnectTimeoutError: not a timeout."""
    if isinstance(exc, requests.exceptions.Timeout):
        return True
    reason = _reason(exc)
    if isinstance(reason, NewConnectionError):
        return False
    return isinstance(reason, (ReadTimeoutError, ConnectTimeoutError))


def _connection_failure(url: str, exc: BaseException) -> str:
    """One line for a request that got no response: what happened, in words, and what to check."""
    reason = _reason(exc)
    host = urllib.parse.urlsplit(url).netloc or url
    if isinstance(reason, NameResolutionError):
        return (
            f"Cannot fetch {url}: the host name {host!r} does not resolve (DNS); "
            "check the URL (--index-url), your network and proxy settings"
        )
    if isinstance(reason, NewConnectionError):
        refused = "refused" in str(reason).lower()
        what = "the connection was refused" if refused else "no connection could be made"
        return (
            f"Cannot fetch {url}: {what} ({host}); is the server running and the URL (--index-url) right? "
            "Check your network and proxy settings"
        )
    return f"Cannot fetch {url}: {exc.__class__.__name__}: {exc}; check the URL, your network and proxy settings"


def fetch_filenames(session: requests.Session, url: str, *, timeout: tuple[float, float]) -> list[str]:
    """The file names listed at ``url`` (JSON or HTML); FetchError on any failure."""
    try:
        resp = session.get(url, headers={"Accept": ACCEPT}, timeout=timeout)
    except requests.exceptions.RequestException as exc:
        if not _is_timeout(exc):
            raise FetchError(_connection_failure(url, exc)) from None
        raise FetchError(
            f"Timed out fetching {url} (timeout {timeout[0]}s connect / {timeout[1]}s read): {exc.__class__.__name__}; "
            "retry later or raise --timeout"
        ) from None
    if resp.status_code != 200:
        raise FetchError(
            f"Cannot fetch {url}: HTTP {resp.status_code} {resp.reason or ''}".rstrip()
            + ("; is the accelerator name right?" if resp.status_code == 404 else "; retry later")
        )
    ctype = resp.headers.get("Content-Type", "").split(";")[0].strip().lower()
    try:
        if ctype == PEP691_JSON:
            return filenames_from_json(resp.text)
        if ctype in ("text/html", "application/vnd.pypi.simple.v1+html", ""):
            return filenames_from_html(resp.text)
    except (ValueError, json.JSONDecodeError, IndexClientError) as exc:
        raise FetchError(f"Unparseable index page {url} ({ctype}): {exc}") from None
    raise FetchError(f"Unexpected content type {ctype!r} from {url} (expected {PEP691_JSON} or text/html)")


def observe(
    base: str,
    accels: Iterable[str],
    *,
    session: Optional[requests.Session] = None,
    timeout: tuple[float, float] = (10.0, 60.0),
    since: tuple[int, int] = (0, 0),
) -> tuple[list[Observation], int]:
    """Fetch every accel's torch page; returns (observations of minors >= since, pages fetched)."""
    session = session or make_session()
    out: list[Observation] = []
    pages = 0
    for accel in accels:
        url = page_url(base, accel)
        names = fetch_filenames(session, url, timeout=timeout)
        pages += 1
        found = [o for o in (classify(n, accel) for n in names) if o is not None]
        if not found:
            raise FetchError(
                f"Index page {url} lists no torch wheels ({len(names)} links): truncated or not an index page"
            )
        out.extend(o for o in found if compat.minor_key(o.minor) >= since)
    return out, pages


def _pyset(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(values), key=compat.python_key))


def rebuild(
    data: compat.CompatData,
    observations: Sequence[Observation],
    *,
    source: str,
    since: tuple[int, int],
    allow_removals: bool = False,
) -> tuple[compat.CompatData, list[str]]:
    """New data with the availability of minors >= since taken from ``observations``; (data, warnings)."""
    warnings: list[str] = []
    cells: dict[str, dict[str, dict[str, set[str]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(set)))
    latest: dict[str, Version] = {}
    for o in observations:
        cuda = contract.cuda_from_accel(o.accel)
        if cuda is not None and cuda not in data.cuda:
            msg = f'{o.accel} (CUDA {cuda}) has no [cuda."{cuda}"] arch list in the data: skipped; add one and refresh again'
            if msg not in warnings:
                warnings.append(msg)
            continue
        cells[o.minor][o.accel][o.platform].add(o.python)
        v = Version(o.version)
        if o.minor not in latest or v > latest[o.minor]:
            latest[o.minor] = v

    releases = dict(data.torch)
    for minor, rel in data.torch.items():
        if rel.key < since:
            continue
        if minor not in cells:
            if not allow_removals:
                raise FetchError(
                    f"torch {minor} is in the data but on none of the fetched pages: refusing to drop it "
                    "(partial fetch?); rerun, or pass --allow-removals if PyTorch really removed it"
                )
            del releases[minor]
            continue
        if not allow_removals:
            for accel in rel.builds:
                if accel not in cells[minor] and contract.cuda_from_accel(accel) in (None, *data.cuda):
                    raise FetchError(
                        f"torch {minor} {accel} is in the data but not on the fetched {accel} page: refusing to "
                        "drop it (partial fetch?); pass --allow-removals if PyTorch really removed it"
                    )

    previous: Optional[compat.TorchRelease] = None
    for minor in sorted(cells, key=compat.minor_key):
        by_accel = cells[minor]
        builds = {
            a: tuple(p for p in compat.PLATFORMS if p in by_accel[a])
            for a in sorted(by_accel, key=lambda a: (a != "cpu", a))
        }
        sets = Counter(_pyset(pys) for plats in by_accel.values() for pys in plats.values())
        default = max(sets.items(), key=lambda kv: (kv[1], len(kv[0])))[0]
        overrides: dict[str, tuple[str, ...]] = {}
        for plat in compat.PLATFORMS:
            per_accel = {a: _pyset(by_accel[a][plat]) for a in builds if plat in by_accel[a]}
            differing = {a: s for a, s in per_accel.items() if s != default}
            if not differing:
                continue
            distinct = set(per_accel.values())
            if len(distinct) == 1:
                overrides[f"*/{plat}"] = next(iter(distinct))
            else:
                for a, s in differing.items():
                    overrides[f"{a}/{plat}"] = s
        old = data.torch.get(minor)
        if old is None:
            base_rel = previous or next(iter(data.torch.values()))
            rel = compat.TorchRelease(
                minor=minor,
                latest=str(latest[minor]),
                cpp_std=base_rel.cpp_std,
                pythons=default,
                builds=builds,
                python_overrides=overrides,
                source=f"added by refresh; C++ standard assumed from torch {base_rel.minor}",
                availability_source=source,
                confidence="low",
                note=f"new release found by refresh: check its C++ standard (assumed C++{base_rel.cpp_std}) in RELEASE.md",
            )
        else:
            rel = dataclasses.replace(
                old,
                latest=str(latest[minor]),
                pythons=default,
                builds=builds,
                python_overrides=overrides,
                availability_source=source,
            )
        releases[minor] = rel
        previous = rel
    ordered = {m: releases[m] for m in sorted(releases, key=compat.minor_key)}
    meta = dict(data.meta)
    meta["updated"] = datetime.date.today().isoformat()
    new = dataclasses.replace(data, torch=ordered, meta=meta)
    # Validate the result exactly as a loaded file would be.
    compat.parse(compat_write.to_raw(new), data.path)
    return new, warnings


def describe_changes(old: compat.CompatData, new: compat.CompatData) -> list[str]:
    """Human-readable lines: releases added/removed, latest patches, builds and CPythons changed."""
    lines: list[str] = []
    for minor in sorted(set(old.torch) | set(new.torch), key=compat.minor_key):
        o, n = old.torch.get(minor), new.torch.get(minor)
        if o is None and n is not None:
            lines.append(f"+ torch {minor}: new release (latest {n.latest}; builds {', '.join(n.builds)})")
            continue
        if n is None and o is not None:
            lines.append(f"- torch {minor}: removed")
            continue
        assert o is not None and n is not None
        if o.latest != n.latest:
            lines.append(f"~ torch {minor}: latest {o.latest} -> {n.latest}")
        for accel in sorted(set(o.builds) | set(n.builds)):
            for plat in compat.PLATFORMS:
                had, has = o.has_build(accel, plat), n.has_build(accel, plat)
                if had != has:
                    lines.append(f"{'+' if has else '-'} torch {minor} {accel} {plat}")
                elif had:
                    before, after = set(o.pythons_for(accel, plat)), set(n.pythons_for(accel, plat))
                    if before != after:
                        added = _pyset(after - before)
                        removed = _pyset(before - after)
                        parts = [f"+{p}" for p in added] + [f"-{p}" for p in removed]
                        lines.append(f"~ torch {minor} {accel} {plat}: CPython {' '.join(parts)}")
    return lines


def _header(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return ""
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line[1:].lstrip(" ") if line.startswith("# ") or line == "#" else line[1:])
    return "\n".join(lines)


def refresh(
    data_path: Optional[str] = None,
    *,
    base: Optional[str] = None,
    extra_accels: Sequence[str] = (),
    since: Optional[str] = None,
    output: Optional[str] = None,
    dry_run: bool = False,
    allow_removals: bool = False,
    timeout: tuple[float, float] = (10.0, 60.0),
    retries: int = 3,
    backoff: float = 0.5,
    session: Optional[requests.Session] = None,
) -> RefreshResult:
    """Fetch, rebuild, validate and (unless ``dry_run`` or unchanged) write atomically."""
    path = Path(data_path) if data_path else compat.default_path()
    data = compat.load(path)
    base_url = (base or os.environ.get(compat.INDEX_ENV) or data.torch_index_base).rstrip("/")
    if not base_url.startswith(("http://", "https://")):
        raise FetchError(f"refresh needs an http(s) index URL, got {base_url!r}")
    for accel in extra_accels:
        try:
            contract.cuda_from_accel(accel)
        except contract.InvalidVariant as exc:
            raise FetchError(f"{exc}") from None
    accels = list(dict.fromkeys([*data.accels(), *extra_accels]))
    since_key = compat.minor_key(since) if since else min(r.key for r in data.torch.values())
    observations, pages = observe(
        base_url,
        accels,
        session=session or make_session(retries=retries, backoff=backoff),
        timeout=timeout,
        since=since_key,
    )
    source = f"refresh of {base_url}/<accel>/torch/ ({', '.join(accels)}) on {datetime.date.today().isoformat()}"
    new, warnings = rebuild(data, observations, source=source, since=since_key, allow_removals=allow_removals)
    changes = describe_changes(data, new)
    target = Path(output) if output else path
    written = False
    if not dry_run and (changes or target != path or not target.exists()):
        compat_write.write_atomic(target, compat_write.dumps(new, header=_header(path)))
        written = True
    return RefreshResult(
        old=data, new=new, changes=changes, warnings=warnings, written=written, pages=pages, wheels=len(observations)
    )
