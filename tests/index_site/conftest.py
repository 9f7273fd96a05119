"""Fixtures for the index_site tests: test wheels and in-process runs of the command line."""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

_HERE = Path(__file__).resolve().parent
REPO_ROOT = _HERE.parents[1]
for _p in (str(REPO_ROOT), str(_HERE)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from index_site import main as index_site_main  # noqa: E402
from tests.helpers.wheels import write_wheel  # noqa: E402


class Run:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def __repr__(self) -> str:
        return f"Run(code={self.code}, out={self.out!r}, err={self.err!r})"


@pytest.fixture
def cli() -> Callable[..., Run]:
    """Run ``python -m index_site ARGS`` in-process; returns exit code, stdout, stderr."""

    def run(*args: Any) -> Run:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = index_site_main([str(a) for a in args])
            except SystemExit as exc:  # argparse: --help, usage errors
                code = int(exc.code or 0)
        return Run(code, out.getvalue(), err.getvalue())

    return run


@pytest.fixture
def wheels(tmp_path: Path) -> Path:
    return tmp_path / "wheels"


@pytest.fixture
def make_wheel(wheels: Path) -> Callable[..., Path]:
    """Write a valid test wheel into the ``wheels`` directory (see tests.helpers.wheels.write_wheel)."""

    def make(**kwargs: Any) -> Path:
        return write_wheel(kwargs.pop("directory", wheels), **kwargs)

    return make
