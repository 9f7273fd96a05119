"""Fixtures of the release tests (helpers live in release_fakes.py: this folder has no __init__.py,
so its modules have names that other test folders do not use)."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # release_fakes, for the test modules too

from release_fakes import make_plan  # noqa: E402


@pytest.fixture
def plan() -> dict[str, Any]:
    return make_plan()


@pytest.fixture
def out() -> io.StringIO:
    return io.StringIO()
