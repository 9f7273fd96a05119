"""Index first: find this version's prebuilt wheel for the target torch, download and verify it.

The steps, each in its own module (this one runs them and says what happened):

1. The target torch and its variant (docs/ARCHITECTURE.md, "Variant"): :mod:`build_support.torch_target`.
2. ``<CAUSAL_CONV1D_INDEX_URL>/whl/<variant>/causal-conv1d/`` (http(s) or file://; PEP 691 JSON when
   the server offers it, else PEP 503 HTML), fetched and parsed by
   ``causal_conv1d_contract.net``; the pages to ask and the wheel to take:
   :mod:`build_support.wheel_select`.
3. Download, verify size and sha256, check the build record, re-label with the sdist's version:
   :mod:`build_support.wheel_fetch`.

A failed step -> :class:`Outcome` with ``wheel=None`` and one line saying why, shown at the
frontend's default verbosity (:func:`_tell_user`); the caller builds locally (or stops, when
``CAUSAL_CONV1D_PREBUILT_ONLY=TRUE``). Except a wheel whose sha256 or size differs from the
index's (:class:`VerificationFailed`): the install stops with a message naming the file and both
values. Stdlib + ``packaging`` only.

``TIMEOUT_S`` and ``RETRIES`` are read when a lookup runs (tests change them); :func:`probe` passes its
own (one try, the doctor's timeout).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
from pathlib import Path
from typing import Optional

import causal_conv1d_contract as contract
from build_support import wheel_select
from build_support.torch_probe import TorchInfo
from build_support.torch_target import find_target_torch, target_variant
from build_support.wheel_fetch import VerificationFailed, download, restamp
from build_support.wheel_select import Candidate, lookups
from causal_conv1d_contract import net
from causal_conv1d_contract.net import IndexClientError

__all__ = ["Outcome", "fetch_prebuilt", "settings_skip_reason", "probe", "will_build_locally"]


def _timeout_from_env() -> float:
    try:
        return net.timeout_from_env()
    except contract.InvalidSetting as exc:
        raise SystemExit(f"causal-conv1d: {exc}") from None


TIMEOUT_S = _timeout_from_env()  #: per socket operation
RETRIES = 3


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


@dataclasses.dataclass
class Outcome:
    wheel: Optional[Path]  # the verified wheel, or None: build locally
    message: str
    variant: Optional[str] = None
    torch: Optional[TorchInfo] = None
    torch_source: Optional[str] = None


def settings_skip_reason() -> Optional[str]:
    """Why the index must not be used for this build, or None."""
    if contract.env_flag(contract.ENV_FORCE_BUILD):
        return f"{contract.ENV_FORCE_BUILD}=TRUE: not looking for a prebuilt wheel; building locally"
    if os.environ.get(contract.ENV_LOCAL_VERSION, "").strip():
        return f"{contract.ENV_LOCAL_VERSION} is set (a release build): building locally"
    if contract.env_flag(contract.ENV_SKIP_CUDA_BUILD):
        return f"{contract.ENV_SKIP_CUDA_BUILD}=TRUE asks for a CPU-only local build: not using prebuilt wheels"
    return None


def find_candidate(variant: contract.Variant, base: str) -> tuple[Optional[Candidate], str, list[str]]:
    """(the wheel to use or None, the page it is on, why not: one line per page asked), with this
    module's TIMEOUT_S and RETRIES as they are now."""
    return wheel_select.find_candidate(variant, base, timeout=TIMEOUT_S, retries=RETRIES)


def _fall_back(reason: str) -> None:
    """Say why there is no prebuilt wheel and what happens next: compiling, or (PREBUILT_ONLY) the stop
    that the backend raises with this reason -- not both."""
    if not contract.env_flag(contract.ENV_PREBUILT_ONLY):  # else the stop message says the reason, once
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
    base = contract.index_base()
    try:
        variant = target_variant(info)
    except IndexClientError as exc:
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
            raise IndexClientError("; ".join(misses))
        downloaded = download(
            cand,
            dest_dir / ".download",
            contract.parse_wheel_name(cand.filename).variant,
            timeout=TIMEOUT_S,
            retries=RETRIES,
        )
        try:
            wheel = restamp(downloaded, dest_dir, cand.url, cand.sha256 or "")
        finally:
            shutil.rmtree(downloaded.parent, ignore_errors=True)
    except VerificationFailed as exc:
        shutil.rmtree(dest_dir / ".download", ignore_errors=True)
        raise SystemExit(exc.stop_message(cand.sha256 if cand else None)) from None
    except IndexClientError as exc:
        where = f" at {page}" if page else ""
        msg = f"no wheel for variant {variant.name}{where} ({exc})"
        _fall_back(msg)
        return Outcome(None, msg, variant.name, info, why)
    msg = f"using prebuilt wheel {cand.filename} from {cand.url} (sha256 verified; installed as {contract.PACKAGE_VERSION})"
    _tell_user(msg)  # at the default verbosity too: what was installed is as much news as a local build
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
    except IndexClientError:
        return True
    cand, _page, _misses = find_candidate(variant, contract.index_base())
    return cand is None


def probe(variant: contract.Variant, base: Optional[str] = None, timeout: float = 5.0) -> tuple[Optional[bool], str]:
    """One request: does the index have this version's wheel for the variant on this platform?

    (True/False, detail), or (None, why unknown) when the index cannot be reached. For doctor.
    """
    cand, page, misses = wheel_select.find_candidate(variant, base or contract.index_base(), timeout=timeout, retries=1)
    if cand is not None:
        return True, f"{page}: {cand.filename}"
    if not misses:
        return False, f"variant {variant.name} has no prebuilt wheels"
    unreachable = all(": HTTP " not in m and ": no " not in m for m in misses)
    return (None if unreachable else False), "; ".join(misses)
