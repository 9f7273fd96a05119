"""In-tree PEP 517 backend: setuptools, with the index-first step in front of the wheel build.

``pyproject.toml``: ``build-backend = "build_support.backend"``, ``backend-path = ["."]``.

- ``prepare_metadata_for_build_wheel``: runs the index-first step (build_support/prebuilt.py).
  A verified prebuilt wheel is re-labelled with the sdist's public version (``1.7.0`` instead of
  ``1.7.0+cpu.torch2.13``; see ``wheel_fetch.restamp``: pip rejects a wheel built from an sdist whose
  version differs from the sdist's as soon as it comes from pip's wheel cache), and its METADATA
  becomes the prepared metadata, so pip resolves exactly the Requires-Dist (torch pin) it installs.
  The wheel is kept next to the metadata for ``build_wheel``.
- ``build_wheel``: hands over that wheel (or runs the index-first step itself when the frontend
  skipped ``prepare_metadata``); otherwise builds locally with setuptools (setup.py diagnoses the
  machine first).
- Under pip's build isolation the user's torch is not importable here: for a local build the
  target torch's site directory (same interpreter, found by build_support/prebuilt.py) is appended
  to ``sys.path`` so setup.py compiles against the torch you install into.
- sdist, editable and the rest: setuptools unchanged (editable installs always compile).

``CAUSAL_CONV1D_PREBUILT_ONLY=TRUE`` stops with a message instead of compiling. Every hook parses
every setting first and reports a bad one as one line, never a traceback (:func:`_one_error_block`).
"""

from __future__ import annotations

import email.parser
import functools
import json
import os
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any, Callable, Optional, TypeVar

from setuptools import build_meta as _st

import causal_conv1d_contract as contract
from build_support import prebuilt, torch_target, wheel_fetch
from causal_conv1d_contract.net import IndexClientError

__all__ = [
    "get_requires_for_build_sdist",
    "build_sdist",
    "get_requires_for_build_wheel",
    "prepare_metadata_for_build_wheel",
    "build_wheel",
    "get_requires_for_build_editable",
    "prepare_metadata_for_build_editable",
    "build_editable",
]

_F = TypeVar("_F", bound=Callable[..., Any])


def _one_error_block(hook: _F) -> _F:
    """Every hook parses every setting first (``contract.check_settings``: a bad value is refused whatever
    path the build takes) and reports a bad setting, or a value the contracts refuse, as one line --
    ``causal-conv1d: Invalid value for CAUSAL_CONV1D_FORCE_BUILD (expected TRUE or FALSE): 'maybe'`` --
    through SystemExit: the frontend shows the backend's output once, with no traceback."""

    @functools.wraps(hook)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            contract.check_settings()
            return hook(*args, **kwargs)
        except (contract.InvalidSetting, contract.InvalidVariant, contract.InvalidWheelName) as exc:
            raise SystemExit(f"causal-conv1d: {exc}") from None

    return run  # type: ignore[return-value]


get_requires_for_build_sdist = _one_error_block(_st.get_requires_for_build_sdist)
build_sdist = _one_error_block(_st.build_sdist)
get_requires_for_build_editable = _one_error_block(_st.get_requires_for_build_editable)
prepare_metadata_for_build_editable = _one_error_block(_st.prepare_metadata_for_build_editable)

_STASH = ".causal_conv1d_prebuilt"  # inside metadata_directory: the verified wheel + decision.json


@_one_error_block
def get_requires_for_build_wheel(config_settings: Optional[dict[str, Any]] = None) -> list[str]:
    """``ninja`` when this build will compile (and none is on PATH), else nothing.

    setuptools would run setup.py here only to learn about setup_requires (there are none). The
    index is asked once more later; if the wheel disappears in between, the local build just runs
    without ninja (slower, same result).
    """
    if shutil.which("ninja") or contract.env_flag(contract.ENV_PREBUILT_ONLY):
        return []
    return ["ninja"] if prebuilt.will_build_locally() else []


def _stop_if_prebuilt_only(outcome: prebuilt.Outcome) -> None:
    if not contract.env_flag(contract.ENV_PREBUILT_ONLY):
        return
    if prebuilt.settings_skip_reason():
        raise SystemExit(
            f"causal-conv1d: {contract.ENV_PREBUILT_ONLY}=TRUE (never compile) contradicts another setting: "
            f"{outcome.message.split(':', 1)[0]}. Unset one of them."
        )
    raise SystemExit(
        f"causal-conv1d: {contract.ENV_PREBUILT_ONLY}=TRUE and no verified prebuilt wheel is available "
        f"({outcome.message}), so nothing is compiled. To compile instead, unset {contract.ENV_PREBUILT_ONLY}; "
        f"or point {contract.ENV_INDEX_URL} at an index that has the wheel (python -m causal_conv1d doctor)."
    )


def _expose_target_torch(outcome: Optional[prebuilt.Outcome]) -> None:
    """Make the target torch importable for setup.py when the build env has none (pip isolation)."""
    try:
        import torch  # noqa: F401,PLC0415

        return
    except ImportError:
        pass
    info = outcome.torch if outcome is not None else None
    if info is None:
        info, _why = torch_target.find_target_torch()
    if info is not None and info.importable and info.location:
        site = str(Path(info.location).resolve().parent.parent)
        if site not in sys.path:
            sys.path.append(site)
            os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), site]))
            print(
                f"causal-conv1d: compiling against torch {info.version} from {site} (the build environment has none)",
                file=sys.stderr,
                flush=True,
            )


def _write_metadata_from_wheel(wheel: Path, metadata_directory: Path) -> str:
    public = contract.PACKAGE_VERSION
    with zipfile.ZipFile(wheel) as zf:
        dist_infos = {n.split("/", 1)[0] for n in zf.namelist() if n.split("/", 1)[0].endswith(".dist-info")}
        if len(dist_infos) != 1:
            raise IndexClientError(f"{wheel.name} has {len(dist_infos)} .dist-info directories")
        src = dist_infos.pop()
        metadata = zf.read(f"{src}/METADATA").decode("utf-8")
    msg = email.parser.Parser().parsestr(metadata)
    if msg.get("Version", "").split("+", 1)[0] != public:
        raise IndexClientError(f"{wheel.name} METADATA says Version {msg.get('Version')}")
    lines = metadata.split("\n")  # wheel_fetch.restamp() already set the public version; make sure
    for i, line in enumerate(lines):
        if not line.strip():
            break  # end of headers
        if line.startswith("Version:"):
            lines[i] = f"Version: {public}"
            break
    name = f"{contract.DIST_NAME}-{public}.dist-info"
    out = metadata_directory / name
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "METADATA.tmp"
    tmp.write_text("\n".join(lines), encoding="utf-8")
    os.replace(tmp, out / "METADATA")
    return name


@_one_error_block
def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: Optional[dict[str, Any]] = None) -> str:
    mdir = Path(metadata_directory)
    stash = mdir / _STASH
    outcome = prebuilt.fetch_prebuilt(stash)
    wheel = outcome.wheel
    if wheel is not None:
        try:
            name = _write_metadata_from_wheel(wheel, mdir)
        except (IndexClientError, OSError, KeyError, zipfile.BadZipFile) as exc:
            prebuilt._fall_back(f"prebuilt wheel unusable ({exc})")
            wheel.unlink(missing_ok=True)
            outcome = prebuilt.Outcome(None, str(exc), outcome.variant, outcome.torch, outcome.torch_source)
        else:
            (stash / "decision.json").write_text(json.dumps({"wheel": wheel.name}))
            return name
    _stop_if_prebuilt_only(outcome)
    stash.mkdir(parents=True, exist_ok=True)
    (stash / "decision.json").write_text(json.dumps({"wheel": None, "message": outcome.message}))
    _expose_target_torch(outcome)
    return _st.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def _stashed(metadata_directory: Optional[str]) -> tuple[bool, Optional[Path]]:
    """(a decision was made in prepare_metadata, the verified wheel if any)."""
    if not metadata_directory:
        return False, None
    stash = Path(metadata_directory).parent / _STASH
    if not stash.is_dir():
        stash = Path(metadata_directory) / _STASH
    try:
        decision = json.loads((stash / "decision.json").read_text())
    except (OSError, ValueError):
        return False, None
    wheel = decision.get("wheel")
    return True, (stash / wheel if wheel and (stash / wheel).is_file() else None)


@_one_error_block
def build_wheel(
    wheel_directory: str, config_settings: Optional[dict[str, Any]] = None, metadata_directory: Optional[str] = None
) -> str:
    decided, wheel = _stashed(metadata_directory)
    outcome: Optional[prebuilt.Outcome] = None
    if not decided:
        tmp = Path(wheel_directory) / _STASH
        outcome = prebuilt.fetch_prebuilt(tmp)
        wheel = outcome.wheel
    if wheel is not None:
        dest = wheel_fetch.copy_into(wheel, Path(wheel_directory))
        shutil.rmtree(wheel.parent, ignore_errors=True)
        print(f"causal-conv1d: installing prebuilt {dest.name} (nothing compiled)", file=sys.stderr, flush=True)
        return dest.name
    if outcome is not None:
        _stop_if_prebuilt_only(outcome)
        shutil.rmtree(Path(wheel_directory) / _STASH, ignore_errors=True)
    _expose_target_torch(outcome)
    # A metadata directory prepared by setuptools is fine for setuptools; none from a prebuilt.
    return _st.build_wheel(wheel_directory, config_settings, metadata_directory if decided else None)


@_one_error_block
def build_editable(
    wheel_directory: str, config_settings: Optional[dict[str, Any]] = None, metadata_directory: Optional[str] = None
) -> str:
    _expose_target_torch(None)
    return _st.build_editable(wheel_directory, config_settings, metadata_directory)
