"""Index first: find this version's prebuilt wheel for the target torch, download and verify it.

1. The target torch (:func:`find_target_torch`): the torch importable in this build process, unless
   this is pip's isolated build environment (then that torch -- if any -- is not the user's): then
   the user's interpreter is asked, run with pip's isolation variables removed.
2. Its variant (DESIGN.md) and this interpreter's compatible tags (``packaging.tags.sys_tags()``).
3. ``<CAUSAL_CONV1D_INDEX_URL>/whl/<variant>/causal-conv1d/`` (http(s) or file://; PEP 691 JSON
   when the server offers it, else PEP 503 HTML). For torch >= 2.10 (:func:`lookups`): first the
   stable-ABI family page ``whl/stable2.10-<cpu|cu12|cu13>/`` (it serves any torch >= 2.10 of the
   family, also torch releases newer than the build matrix, and any C++ ABI), then the torch minor's
   own page, where the stable wheel or a per-minor wheel of exactly this variant both count.
4. The wheel of exactly this version (public version == contract.PACKAGE_VERSION, local label of
   an accepted variant), not yanked, Requires-Python satisfied, with the best compatible tag; a
   stable-ABI wheel before a per-minor one at the same tag.
5. Download (timeouts, an overall deadline, retries, the environment's proxy settings via urllib),
   verify size and sha256 (a wheel without a published sha256 is not used), check it is a readable
   wheel whose build record names the variant, then move it into place atomically.

Any failure -> :class:`Outcome` with ``wheel=None`` and one line saying why, shown at the
frontend's default verbosity (:func:`_tell_user`); the caller builds locally (or stops, when
``CAUSAL_CONV1D_PREBUILT_ONLY=TRUE``). Except a wheel whose sha256 or size differs from the
index's (:class:`VerificationFailed`): the install stops with a message naming the file and both
values. A wrong or partial file is never
left where pip would pick it up. Stdlib + ``packaging`` only.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import html.parser
import http.client
import json
import os
import shutil
import socket
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable, Optional, Union

from packaging import tags as _tags
from packaging.specifiers import InvalidSpecifier, SpecifierSet

import causal_conv1d_contract as contract
from build_support.toolchain import TorchInfo, torch_info

__all__ = [
    "ENV_PREBUILT_ONLY", "Candidate", "Outcome", "IndexError_", "find_target_torch", "target_variant",
    "index_base", "fetch_candidates", "select", "download", "fetch_prebuilt", "settings_skip_reason",
    "lookups", "find_candidate",
    "VerificationFailed",
]

#: TRUE: never compile; stop with a message when no verified prebuilt wheel is available.
#: (Not yet in _contract.py; see docs/installing.md.)
ENV_PREBUILT_ONLY = contract.ENV_PREBUILT_ONLY

def _timeout_from_env() -> float:
    raw = os.environ.get(contract.ENV_INDEX_TIMEOUT, "").strip()
    if not raw:
        return 15.0
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise SystemExit(
            f"causal-conv1d: {contract.ENV_INDEX_TIMEOUT}={raw!r} is not a positive number of seconds; "
            f"unset it or use e.g. {contract.ENV_INDEX_TIMEOUT}=30"
        )
    return value


TIMEOUT_S = _timeout_from_env()  #: per socket operation
PAGE_DEADLINE_S = 30.0
DOWNLOAD_DEADLINE_S = 600.0
RETRIES = 3
_ACCEPT = ("application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, "
           "text/html;q=0.1")
_PIP_ISOLATION_VARS = ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONHOME", "PYTHONSAFEPATH")


def _say(msg: str) -> None:
    print(f"causal-conv1d: {msg}", file=sys.stderr, flush=True)


def _tell_user(msg: str) -> None:
    """A message the user must see at the frontend's DEFAULT verbosity.

    pip and uv hide a build backend's stdout and stderr unless the build fails or ``-v`` is given, and
    pip (26.3) shows a backend's warnings only for a local directory, not for an sdist from an index;
    uv shows none. So: on stderr (``-v`` and failure output), and on the controlling terminal of the
    install (``/dev/tty``, where the user watches pip or uv), when there is one. Without a terminal
    (CI) the stderr line is what there is: run such installs with ``-v`` to see it.
    """
    _say(msg)
    if os.name == "nt":
        return
    try:
        with open("/dev/tty", "w", encoding="utf-8") as tty:
            tty.write(f"\ncausal-conv1d: {msg}\n")
    except OSError:
        pass  # no controlling terminal


class IndexError_(Exception):  # noqa: N801  (not the builtin IndexError)
    """The index could not give a usable answer; the message is one line for the user."""


class VerificationFailed(Exception):
    """The downloaded wheel is not the file the index describes (sha256 or size): a tampered or
    corrupted download, or a broken mirror. The install stops: a security event is no reason to
    compile quietly."""

    def __init__(self, filename: str, url: str, what: str, expected: str, actual: str, actual_sha256: str) -> None:
        self.filename, self.url, self.what = filename, url, what
        self.expected, self.actual, self.actual_sha256 = expected, actual, actual_sha256
        super().__init__(f"{what} mismatch for {filename}: expected {expected}, got {actual}")

    def stop_message(self, expected_sha256: Optional[str]) -> str:
        lines = [
            f"causal-conv1d: STOP: the prebuilt wheel {self.filename} from {self.url} does not match the index "
            f"({self.what} mismatch). Nothing was installed; the download was deleted.",
            f"  expected {self.what}: {self.expected}",
            f"  actual   {self.what}: {self.actual}",
        ]
        if self.what != "sha256":
            lines += [f"  expected sha256: {expected_sha256 or '-'}", f"  actual   sha256: {self.actual_sha256}"]
        lines += [
            "  This is a tampered or corrupted download, or a broken mirror or proxy: check "
            f"{contract.ENV_INDEX_URL} and your proxy, and retry.",
            f"  To compile from source instead (no download): {contract.ENV_FORCE_BUILD}=TRUE pip install ...",
        ]
        return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class Candidate:
    filename: str
    url: str
    sha256: Optional[str]
    size: Optional[int] = None
    requires_python: Optional[str] = None
    yanked: bool = False


@dataclasses.dataclass
class Outcome:
    wheel: Optional[Path]  # the verified wheel, or None: build locally
    message: str
    variant: Optional[str] = None
    torch: Optional[TorchInfo] = None
    torch_source: Optional[str] = None


# --- the target torch ----------------------------------------------------------------------------

def in_pip_isolation() -> bool:
    """Whether this process runs in pip's isolated build environment."""
    pp = os.environ.get("PYTHONPATH", "")
    return "pip-build-env-" in pp or bool(os.environ.get("PIP_BUILD_TRACKER") and os.environ.get("PYTHONNOUSERSITE"))


def _in_isolated_venv() -> bool:
    """pypa/build and uv build in a fresh virtual environment named build-env-* / builds-v*."""
    prefix = sys.prefix.replace("\\", "/")
    return "/build-env-" in prefix or "/builds-v" in prefix


def find_target_torch() -> tuple[TorchInfo, str]:
    """(torch info, which one and why)."""
    isolated = in_pip_isolation()
    if not isolated and not _in_isolated_venv():
        info = torch_info()
        return info, f"the torch importable in this build ({info.location or 'not importable'}; no build isolation)"
    here = torch_info()
    if isolated:
        env = {k: v for k, v in os.environ.items() if k not in _PIP_ISOLATION_VARS}
        user = torch_info(sys.executable, env=env, fast=True)
        if user.importable:
            if here.importable and here.version != user.version:
                why = (f"pip's isolated build environment has torch {here.version}, which is not the torch you "
                       f"install into; ")
            else:
                why = "pip builds in an isolated environment, so "
            return user, f"{why}using the torch of your interpreter {sys.executable} ({user.location})"
        if here.importable:
            return here, (f"your interpreter {sys.executable} has no torch ({user.error}); using the torch of the "
                          f"isolated build environment ({here.location})")
        return user, f"no torch in your interpreter {sys.executable} nor in pip's isolated build environment"
    base = getattr(sys, "_base_executable", None)
    if not here.importable and base and base != sys.executable:
        user = torch_info(base, env={k: v for k, v in os.environ.items() if k not in _PIP_ISOLATION_VARS}, fast=True)
        if user.importable:
            return user, f"isolated build venv has no torch; using the torch of the base interpreter {base}"
    return here, f"the torch importable in the isolated build venv ({here.location or 'not importable'})"


def _forced_abi() -> Optional[bool]:
    return contract.env_flag(contract.ENV_FORCE_CXX11_ABI)


def target_variant(info: TorchInfo) -> contract.Variant:
    """The variant for a torch (``contract.Variant``); raises IndexError_ when there is none."""
    if not info.importable or not info.version:
        raise IndexError_("no torch found to pick a variant for")
    if info.hip:
        raise IndexError_(f"torch {info.version} is a ROCm build; no prebuilt wheels exist for ROCm")
    abi = _forced_abi()
    try:
        return contract.Variant.from_torch(info.version, info.cuda, info.cxx11_abi if abi is None else abi)
    except contract.InvalidVariant as exc:
        raise IndexError_(str(exc)) from None


def index_base() -> str:
    return contract.index_base()


def settings_skip_reason() -> Optional[str]:
    """Why the index must not be used for this build, or None."""
    if contract.env_flag(contract.ENV_FORCE_BUILD):
        return f"{contract.ENV_FORCE_BUILD}=TRUE: not looking for a prebuilt wheel; building locally"
    if os.environ.get(contract.ENV_LOCAL_VERSION, "").strip():
        return f"{contract.ENV_LOCAL_VERSION} is set (a release build): building locally"
    if contract.env_flag(contract.ENV_SKIP_CUDA_BUILD):
        return f"{contract.ENV_SKIP_CUDA_BUILD}=TRUE asks for a CPU-only local build: not using prebuilt wheels"
    return None


# --- the index -----------------------------------------------------------------------------------

def _opener() -> urllib.request.OpenerDirector:
    # ProxyHandler() reads http_proxy / https_proxy / no_proxy from the environment.
    return urllib.request.build_opener(urllib.request.ProxyHandler())


def _read_all(resp: Any, deadline: float, limit: Optional[int] = None, sink: Optional[Callable[[bytes], None]] = None) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        if time.monotonic() > deadline:
            raise IndexError_("timed out (server too slow)")
        chunk = resp.read(1 << 16)
        if not chunk:
            break
        total += len(chunk)
        if limit is not None and total > limit:
            if sink is not None:
                sink(chunk)
            raise _TooLarge(f"response larger than expected ({total} > {limit} bytes)")
        if sink is None:
            chunks.append(chunk)
        else:
            sink(chunk)
    return b"".join(chunks)


class _TooLarge(IndexError_):
    """More bytes than the index or the server announced."""


def _describe(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code}"
    if isinstance(exc, urllib.error.URLError):
        reason = exc.reason
        if isinstance(reason, (socket.timeout, TimeoutError)):
            return f"timed out after {TIMEOUT_S:g} s"
        return f"{reason}"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return f"timed out after {TIMEOUT_S:g} s"
    if isinstance(exc, http.client.IncompleteRead):
        return f"truncated download ({len(exc.partial)} bytes, then the connection closed)"
    return f"{type(exc).__name__}: {exc}"


def _fetch_page(url: str) -> tuple[bytes, str, str]:
    """(body, content type, final url) of an index page; file:// reads index.html / the file."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "file":
        path = Path(urllib.request.url2pathname(parsed.path))
        if path.is_dir():
            path = path / "index.html"
        try:
            return path.read_bytes(), "text/html", path.as_uri()
        except OSError as exc:
            raise IndexError_(f"cannot read {path}: {exc.strerror or exc}") from None
    if parsed.scheme not in ("http", "https"):
        raise IndexError_(f"unsupported index URL scheme {parsed.scheme!r} (use http(s):// or file://)")
    req = urllib.request.Request(url, headers={"Accept": _ACCEPT, "User-Agent": "causal-conv1d-setup"})
    last = "no attempt"
    for attempt in range(RETRIES):
        try:
            with _opener().open(req, timeout=TIMEOUT_S) as resp:
                body = _read_all(resp, time.monotonic() + PAGE_DEADLINE_S, limit=20 << 20)
                return body, resp.headers.get("Content-Type", ""), resp.geturl()
        except urllib.error.HTTPError as exc:
            last = _describe(exc)
            if exc.code < 500 and exc.code != 429:
                break  # 404 and friends: retrying will not help
        except (urllib.error.URLError, OSError, http.client.HTTPException, IndexError_) as exc:
            last = _describe(exc) if not isinstance(exc, IndexError_) else str(exc)
            if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, ConnectionRefusedError):
                break
        if attempt + 1 < RETRIES:
            time.sleep(0.5 * (attempt + 1))
    raise IndexError_(last)


class _Anchors(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[dict[str, Optional[str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, Optional[str]]]) -> None:
        if tag == "a":
            self.links.append(dict(attrs))


def _hash_from_fragment(url: str) -> tuple[str, Optional[str]]:
    base, _, frag = url.partition("#")
    for part in frag.split("&"):
        name, _, value = part.partition("=")
        if name == "sha256" and value:
            return base, value.lower()
    return base, None


def parse_page(body: bytes, content_type: str, page_url: str) -> list[Candidate]:
    """Candidates of a PEP 691 JSON or PEP 503 HTML project page."""
    out: list[Candidate] = []
    if "json" in content_type:
        try:
            data = json.loads(body)
            files = data["files"]
        except (ValueError, KeyError, TypeError) as exc:
            raise IndexError_(f"invalid PEP 691 JSON ({type(exc).__name__})") from None
        for f in files:
            if not isinstance(f, dict) or "filename" not in f or "url" not in f:
                continue
            url, frag_hash = _hash_from_fragment(urllib.parse.urljoin(page_url, f["url"]))
            hashes = f.get("hashes") or {}
            size = f.get("size")
            out.append(Candidate(f["filename"], url, (hashes.get("sha256") or frag_hash or None),
                                 size if isinstance(size, int) else None, f.get("requires-python"),
                                 bool(f.get("yanked"))))
        return out
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise IndexError_("the project page is not UTF-8 HTML") from None
    parser = _Anchors()
    try:
        parser.feed(text)
        parser.close()
    except Exception as exc:  # noqa: BLE001  (html.parser is lenient; be safe)
        raise IndexError_(f"unparsable HTML ({exc})") from None
    for a in parser.links:
        href = a.get("href")
        if not href:
            continue
        url, sha = _hash_from_fragment(urllib.parse.urljoin(page_url, href))
        filename = urllib.parse.unquote(urllib.parse.urlparse(url).path.rsplit("/", 1)[-1])
        out.append(Candidate(filename, url, sha, None, a.get("data-requires-python"), "data-yanked" in a))
    return out


def fetch_candidates(page_url: str) -> list[Candidate]:
    body, ctype, final = _fetch_page(page_url)
    if not final.endswith("/") and not final.endswith(".html"):
        final += "/"
    return parse_page(body, ctype, final)


def select(candidates: list[Candidate], variant: Union[contract.BuildVariant, Sequence[contract.BuildVariant]],
           supported: Optional[list[_tags.Tag]] = None) -> tuple[Optional[Candidate], str]:
    """(the best candidate or None, why none). ``variant``: the accepted wheel variant, or a tuple of
    them (a Variant and its StableVariant); at the same tag rank a stable-ABI wheel wins."""
    accepted = tuple(variant) if isinstance(variant, (tuple, list)) else (variant,)
    supported = list(_tags.sys_tags()) if supported is None else supported
    rank = {t: i for i, t in enumerate(supported)}
    py = ".".join(str(x) for x in sys.version_info[:3])
    best: Optional[tuple[tuple[int, bool], Candidate]] = None
    seen_versions: set[str] = set()
    seen_platforms: set[str] = set()
    for c in candidates:
        if not c.filename.endswith(".whl"):
            continue
        try:
            w = contract.parse_wheel_name(c.filename)
        except contract.InvalidWheelName:
            continue
        if w.variant not in accepted:
            continue
        seen_versions.add(str(w.version))
        if w.public_version != contract.PACKAGE_VERSION or c.yanked:
            continue
        seen_platforms.update(w.platforms)
        if c.requires_python:
            try:
                if not SpecifierSet(c.requires_python).contains(py, prereleases=True):
                    continue
            except InvalidSpecifier:
                continue
        ranks = [rank[t] for t in w.tags if t in rank]
        key = (min(ranks), not isinstance(w.variant, contract.StableVariant)) if ranks else None
        if key is not None and (best is None or key < best[0]):
            best = (key, c)
    if best is not None:
        return best[1], ""
    if seen_platforms:
        return None, (f"no {contract.PACKAGE_VERSION} wheel compatible with this platform "
                      f"(index has: {', '.join(sorted(seen_platforms))})")
    if seen_versions:
        return None, f"no {contract.PACKAGE_VERSION} wheel (index has versions {', '.join(sorted(seen_versions))})"
    return None, "no wheel"


def lookups(variant: contract.Variant, base: str) -> list[tuple[str, tuple[contract.BuildVariant, ...]]]:
    """The project pages to ask, in order, and the wheel variants each may give (see the module docstring)."""
    stable = None
    try:
        stable = contract.stable_variant_for(variant)
    except contract.InvalidVariant:  # an accelerator with no stable family (e.g. cu118): per-minor only
        pass
    if stable is None:
        return [(contract.project_page_url(base, variant), (variant,))] if variant.is_official else []
    pages = [(contract.project_page_url(base, stable), (stable,))]
    if variant.is_official:  # an unofficial ABI has no page of its own; the stable wheel serves it
        pages.append((contract.project_page_url(base, variant), (stable, variant)))
    return pages


def find_candidate(variant: contract.Variant, base: str) -> tuple[Optional[Candidate], str, list[str]]:
    """(the wheel to use or None, the page it is on, why not: one line per page asked)."""
    why: list[str] = []
    for page, accepted in lookups(variant, base):
        try:
            cand, reason = select(fetch_candidates(page), accepted)
        except IndexError_ as exc:
            reason, cand = str(exc), None
        if cand is not None:
            return cand, page, why
        why.append(f"{page}: {reason}")
    return None, "", why


def _check_wheel(path: Path, variant: contract.BuildVariant) -> None:
    """A readable zip whose build record names the variant (the file name already did)."""
    try:
        with zipfile.ZipFile(path) as zf:
            bad = zf.testzip()
            if bad is not None:
                raise IndexError_(f"corrupt member {bad}")
            name = f"{contract.DIST_NAME}/{contract.BUILD_INFO_FILENAME}"
            if name in zf.namelist():
                record = json.loads(zf.read(name))
                if record.get("variant") != variant.name:
                    raise IndexError_(f"its build record says variant {record.get('variant')}, not {variant.name}")
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise IndexError_(f"not a valid wheel ({exc})") from None


def download(c: Candidate, dest_dir: Path, variant: contract.BuildVariant) -> Path:
    """Download, verify and atomically place ``c`` in dest_dir. Raises IndexError_."""
    if not c.sha256:
        raise IndexError_(f"the index publishes no sha256 for {c.filename}; refusing an unverifiable wheel")
    dest_dir.mkdir(parents=True, exist_ok=True)
    final = dest_dir / c.filename
    last = "no attempt"
    for attempt in range(RETRIES):
        fd, tmp_name = tempfile.mkstemp(prefix=".partial-", suffix=".whl", dir=str(dest_dir))
        tmp = Path(tmp_name)
        digest = hashlib.sha256()
        size = 0
        retry = True
        try:
            with os.fdopen(fd, "wb") as fh:
                def sink(chunk: bytes, _digest: Any = digest, _fh: Any = fh) -> None:
                    nonlocal size
                    _digest.update(chunk)
                    size += len(chunk)
                    _fh.write(chunk)

                parsed = urllib.parse.urlparse(c.url)
                expected_len: Optional[int] = c.size
                if parsed.scheme == "file":
                    with open(urllib.request.url2pathname(parsed.path), "rb") as src:
                        _read_all(src, time.monotonic() + DOWNLOAD_DEADLINE_S, sink=sink)
                elif parsed.scheme in ("http", "https"):
                    req = urllib.request.Request(c.url, headers={"User-Agent": "causal-conv1d-setup"})
                    with _opener().open(req, timeout=TIMEOUT_S) as resp:
                        cl = resp.headers.get("Content-Length")
                        if cl and cl.isdigit():
                            if expected_len is None:
                                expected_len = int(cl)
                        try:
                            _read_all(resp, time.monotonic() + DOWNLOAD_DEADLINE_S,
                                      limit=(expected_len + 1) if expected_len else None, sink=sink)
                        except _TooLarge:
                            pass  # the size check below names it
                else:
                    retry = False
                    raise IndexError_(f"unsupported URL scheme in {c.url}")
            got = digest.hexdigest()
            if c.size is not None and size != c.size:
                raise VerificationFailed(c.filename, c.url, "size", f"{c.size} bytes",
                                         f"{size}{'+' if size > c.size else ''} bytes", got)
            if expected_len is not None and size != expected_len:
                raise IndexError_(f"truncated download ({size} of {expected_len} bytes)")
            if got != c.sha256:
                raise VerificationFailed(c.filename, c.url, "sha256", c.sha256, got, got)
            _check_wheel(tmp, variant)
            os.replace(tmp, final)
            return final
        except urllib.error.HTTPError as exc:
            last = _describe(exc)
            retry = exc.code >= 500 or exc.code == 429
        except IndexError_ as exc:
            last = str(exc)
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            last = _describe(exc)
            if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, ConnectionRefusedError):
                retry = False
        finally:
            if tmp.exists():
                tmp.unlink()
        if not retry:
            break
        if attempt + 1 < RETRIES:
            time.sleep(0.5 * (attempt + 1))
    raise IndexError_(last)


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
    return f"{name},sha256={digest},{len(data)}"


def restamp(wheel: Path, dest_dir: Path, source_url: str, sha256: str) -> Path:
    """The verified wheel re-labelled with the sdist's public version (``1.7.0``).

    Why: pip compares a wheel built from an sdist with the sdist's version -- at once for a wheel
    from its cache (``has inconsistent version: expected '1.7.0', but metadata has
    '1.7.0+cpu.torch2.13'``: the second install of the same sdist fails, pip 23 and 26 alike).
    Only the .dist-info changes: its directory name, METADATA's ``Version``, RECORD, and a
    ``PREBUILT.json`` saying where the wheel came from. Every other file -- the compiled extension
    and the build record (whose ``version`` keeps the local label; ``causal_conv1d.__version__``
    reports it) -- is copied byte for byte.
    """
    w = contract.parse_wheel_name(wheel.name)
    public = w.public_version
    old_di = f"{contract.DIST_NAME}-{w.version}.dist-info"
    new_di = f"{contract.DIST_NAME}-{public}.dist-info"
    tag_part = wheel.name[: -len(".whl")].split("-", 2)[2]
    out = dest_dir / f"{contract.DIST_NAME}-{public}-{tag_part}.whl"
    tmp = out.with_name(f".{out.name}.tmp")
    record: list[str] = []
    try:
        with zipfile.ZipFile(wheel) as zin, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zout:
            names = zin.namelist()
            if f"{old_di}/METADATA" not in names:
                raise IndexError_(f"{wheel.name} has no {old_di}/METADATA")
            for info in zin.infolist():
                if info.filename == f"{old_di}/RECORD" or info.is_dir():
                    continue
                data = zin.read(info)
                name = info.filename
                if name.startswith(old_di + "/"):
                    name = new_di + name[len(old_di):]
                    if name == f"{new_di}/METADATA":
                        data = _set_version(data, public)
                new = zipfile.ZipInfo(name, date_time=info.date_time)
                new.external_attr, new.compress_type = info.external_attr, zipfile.ZIP_DEFLATED
                zout.writestr(new, data)
                record.append(_record_line(name, data))
            marker = json.dumps({"filename": wheel.name, "url": source_url, "sha256": sha256}, indent=2).encode()
            zout.writestr(zipfile.ZipInfo(f"{new_di}/PREBUILT.json", date_time=(1980, 1, 1, 0, 0, 0)), marker)
            record.append(_record_line(f"{new_di}/PREBUILT.json", marker))
            record.append(f"{new_di}/RECORD,,")
            zout.writestr(zipfile.ZipInfo(f"{new_di}/RECORD", date_time=(1980, 1, 1, 0, 0, 0)), "\n".join(record) + "\n")
        os.replace(tmp, out)
    except (zipfile.BadZipFile, KeyError, OSError) as exc:
        raise IndexError_(f"cannot re-label {wheel.name}: {exc}") from None
    finally:
        if tmp.exists():
            tmp.unlink()
    return out


def _set_version(metadata: bytes, version: str) -> bytes:
    lines = metadata.decode("utf-8").split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            break  # end of the headers
        if line.startswith("Version:"):
            lines[i] = f"Version: {version}"
            return "\n".join(lines).encode("utf-8")
    raise IndexError_("METADATA has no Version header")


def _fall_back(reason: str) -> None:
    """Say why there is no prebuilt wheel and what happens next: compiling, or (PREBUILT_ONLY) the stop
    that the backend raises with this reason -- not both."""
    if contract.env_flag(ENV_PREBUILT_ONLY):
        _say(reason)
    else:
        _tell_user(f"{reason}; building locally")


def fetch_prebuilt(dest_dir: Path) -> Outcome:
    """The whole index-first step. Never raises for index problems (prints one line and returns an
    Outcome whose message is the reason); raises SystemExit for a wheel that fails verification."""
    skip = settings_skip_reason()
    if skip:
        _say(skip)
        return Outcome(None, skip)
    info, why = find_target_torch()
    _say(f"target torch: {info.version or 'none'} -- {why}")
    base = index_base()
    try:
        variant = target_variant(info)
    except IndexError_ as exc:
        msg = f"no prebuilt wheel: {exc}"
        _fall_back(msg)
        return Outcome(None, msg, None, info, why)
    if not lookups(variant, base):
        msg = f"variant {variant.name} (a C++ ABI PyTorch does not ship for this torch) has no prebuilt wheels"
        _fall_back(msg)
        return Outcome(None, msg, variant.name, info, why)
    cand, page, misses = find_candidate(variant, base)
    try:
        if cand is None:
            raise IndexError_("; ".join(misses))
        downloaded = download(cand, dest_dir / ".download", contract.parse_wheel_name(cand.filename).variant)
        try:
            wheel = restamp(downloaded, dest_dir, cand.url, cand.sha256 or "")
        finally:
            shutil.rmtree(downloaded.parent, ignore_errors=True)
    except VerificationFailed as exc:
        shutil.rmtree(dest_dir / ".download", ignore_errors=True)
        raise SystemExit(exc.stop_message(cand.sha256 if cand else None)) from None
    except IndexError_ as exc:
        where = f" at {page}" if page else ""
        msg = f"no wheel for variant {variant.name}{where} ({exc})"
        _fall_back(msg)
        return Outcome(None, msg, variant.name, info, why)
    msg = f"using prebuilt wheel {cand.filename} from {cand.url} (sha256 verified; installed as {contract.PACKAGE_VERSION})"
    _say(msg)
    return Outcome(wheel, msg, variant.name, info, why)


def will_build_locally() -> bool:
    """Quietly: will this build compile (settings, or no matching wheel on the index page)?

    One page request, no download; for get_requires_for_build_wheel (ninja only when compiling).
    """
    if settings_skip_reason():
        return True
    info, _why = find_target_torch()
    try:
        variant = target_variant(info)
    except IndexError_:
        return True
    cand, _page, _misses = find_candidate(variant, index_base())
    return cand is None


def probe(variant: contract.Variant, base: Optional[str] = None, timeout: float = 5.0) -> tuple[Optional[bool], str]:
    """One request: does the index have this version's wheel for the variant on this platform?

    (True/False, detail), or (None, why unknown) when the index cannot be reached. For doctor.
    """
    global TIMEOUT_S, RETRIES
    saved = TIMEOUT_S, RETRIES
    TIMEOUT_S, RETRIES = timeout, 1
    try:
        cand, page, misses = find_candidate(variant, base or index_base())
        if cand is not None:
            return True, f"{page}: {cand.filename}"
        if not misses:
            return False, f"variant {variant.name} has no prebuilt wheels"
        unreachable = all(": HTTP " not in m and ": no " not in m for m in misses)
        return (None if unreachable else False), "; ".join(misses)
    finally:
        TIMEOUT_S, RETRIES = saved


def copy_into(wheel: Path, wheel_directory: Path) -> Path:
    dest = Path(wheel_directory) / wheel.name
    if wheel.resolve() != dest.resolve():
        tmp = dest.with_name(f".{dest.name}.tmp")
        shutil.copyfile(wheel, tmp)
        os.replace(tmp, dest)
    return dest
