"""Download a prebuilt wheel, verify it against the index and re-label it for pip.

Download (timeouts, an overall deadline, retries, the environment's proxy settings: through
``causal_conv1d_contract.net``), verify size and sha256 (a wheel without a published sha256
is not used), check it is a readable wheel whose build record names the variant, then move it into
place atomically; :func:`restamp` gives it the sdist's public version. A wrong or partial file is
never left where pip would pick it up. A wheel whose sha256 or size differs from the index's raises
:class:`VerificationFailed`: the install stops.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.parse
import zipfile
from pathlib import Path
from typing import IO, Optional

import causal_conv1d_contract as contract
from build_support.wheel_select import Candidate
from causal_conv1d_contract import net
from causal_conv1d_contract.net import IndexClientError

__all__ = ["VerificationFailed", "download", "restamp", "copy_into", "DOWNLOAD_DEADLINE_S"]

DOWNLOAD_DEADLINE_S = 600.0


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


def _check_wheel(path: Path, variant: contract.BuildVariant) -> None:
    """A readable zip whose build record names the variant (the file name already did)."""
    try:
        with zipfile.ZipFile(path) as zf:
            bad = zf.testzip()
            if bad is not None:
                raise IndexClientError(f"corrupt member {bad}")
            name = f"{contract.DIST_NAME}/{contract.BUILD_INFO_FILENAME}"
            if name in zf.namelist():
                record = json.loads(zf.read(name))
                if record.get("variant") != variant.name:
                    raise IndexClientError(f"its build record says variant {record.get('variant')}, not {variant.name}")
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise IndexClientError(f"not a valid wheel ({exc})") from None


def download(
    c: Candidate,
    dest_dir: Path,
    variant: contract.BuildVariant,
    *,
    timeout: float = net.DEFAULT_TIMEOUT_S,
    retries: int = 3,
) -> Path:
    """Download, verify and atomically place ``c`` in dest_dir. Raises IndexClientError."""
    if not c.sha256:
        raise IndexClientError(f"the index publishes no sha256 for {c.filename}; refusing an unverifiable wheel")
    scheme = urllib.parse.urlsplit(c.url).scheme
    if scheme not in ("file", "http", "https"):
        raise IndexClientError(f"unsupported URL scheme in {c.url}")
    dest_dir.mkdir(parents=True, exist_ok=True)
    final = dest_dir / c.filename
    last = "no attempt"
    for attempt in range(retries):
        fd, tmp_name = tempfile.mkstemp(prefix=".partial-", suffix=".whl", dir=str(dest_dir))
        tmp = Path(tmp_name)
        digest = hashlib.sha256()
        size = 0
        retry = True
        try:
            with os.fdopen(fd, "wb") as fh:

                def sink(chunk: bytes, _digest: hashlib._Hash = digest, _fh: IO[bytes] = fh) -> None:
                    nonlocal size
                    _digest.update(chunk)
                    size += len(chunk)
                    _fh.write(chunk)

                expected_len: Optional[int] = c.size
                with net.open_url(c.url, timeout=timeout, user_agent="causal-conv1d-setup") as resp:
                    limit = None
                    if scheme != "file":  # a local file is read whole: the size check names its size
                        cl = resp.headers.get("Content-Length")
                        if cl and cl.isdigit() and expected_len is None:
                            expected_len = int(cl)
                        limit = (expected_len + 1) if expected_len else None
                    try:
                        net.read_all(resp, time.monotonic() + DOWNLOAD_DEADLINE_S, limit=limit, sink=sink)
                    except net.TooLarge:
                        pass  # the size check below names it
            got = digest.hexdigest()
            if c.size is not None and size != c.size:
                raise VerificationFailed(
                    c.filename, c.url, "size", f"{c.size} bytes", f"{size}{'+' if size > c.size else ''} bytes", got
                )
            if expected_len is not None and size != expected_len:
                raise IndexClientError(f"truncated download ({size} of {expected_len} bytes)")
            if got != c.sha256:
                raise VerificationFailed(c.filename, c.url, "sha256", c.sha256, got, got)
            _check_wheel(tmp, variant)
            os.replace(tmp, final)
            return final
        except IndexClientError as exc:
            last = str(exc)
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            last = net.describe(exc, timeout)
            retry = net.retryable(exc)
        finally:
            if tmp.exists():
                tmp.unlink()
        if not retry:
            break
        if attempt + 1 < retries:
            time.sleep(0.5 * (attempt + 1))
    raise IndexClientError(last)


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
                raise IndexClientError(f"{wheel.name} has no {old_di}/METADATA")
            for info in zin.infolist():
                if info.filename == f"{old_di}/RECORD" or info.is_dir():
                    continue
                data = zin.read(info)
                name = info.filename
                if name.startswith(old_di + "/"):
                    name = new_di + name[len(old_di) :]
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
            zout.writestr(
                zipfile.ZipInfo(f"{new_di}/RECORD", date_time=(1980, 1, 1, 0, 0, 0)), "\n".join(record) + "\n"
            )
        os.replace(tmp, out)
    except (zipfile.BadZipFile, KeyError, OSError) as exc:
        raise IndexClientError(f"cannot re-label {wheel.name}: {exc}") from None
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
    raise IndexClientError("METADATA has no Version header")


def copy_into(wheel: Path, wheel_directory: Path) -> Path:
    dest = Path(wheel_directory) / wheel.name
    if wheel.resolve() != dest.resolve():
        tmp = dest.with_name(f".{dest.name}.tmp")
        shutil.copyfile(wheel, tmp)
        os.replace(tmp, dest)
    return dest
