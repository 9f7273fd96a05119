"""The errors of ``python -m build_matrix``, each family with its own exit code.

``cli.main`` catches :class:`BuildMatrixError` once, prints ``error: <message>`` (no traceback
unless ``--traceback`` or ``BUILD_MATRIX_TRACEBACK=1``) and exits with the error's ``exit_code``.

Exit codes
----------
====  ==================================================================================
0     success
1     unexpected internal error (a bug: rerun with ``--traceback`` and report it)
2     usage error: unknown subcommand or option, bad option value (argparse)
3     :class:`UnknownValue`: a torch / accel / platform / python / job value that the
      compatibility data does not know (the message lists the close valid ones)
4     :class:`DataError`: the compatibility data file is missing or malformed
5     :class:`FetchError`: ``refresh`` could not fetch or parse PyTorch's index
      (the data file is left untouched)
6     :class:`PlanFileError`: a plan JSON given to ``diff`` is missing or malformed
7     ``diff --exit-code`` found differences (not an error class: a result)
10    :class:`BuildError`: ``build`` failed (used by ``build_matrix.native``)
11    :class:`CheckError`: ``check`` found a wheel that is not what its name says
      (used by ``build_matrix.wheelcheck``)
130   interrupted (Ctrl-C)
====  ==================================================================================
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Optional

from causal_conv1d_contract.cli import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, ToolError

__all__ = [
    "EXIT_OK",
    "EXIT_INTERNAL",
    "EXIT_USAGE",
    "EXIT_DIFFERENT",
    "EXIT_INTERRUPTED",
    "BuildMatrixError",
    "UnknownValue",
    "UnknownJob",
    "DataError",
    "FetchError",
    "PlanFileError",
    "BuildError",
    "CheckError",
    "suggest",
    "perhaps",
]

EXIT_INTERNAL = EXIT_FAILURE
EXIT_DIFFERENT = 7


def suggest(value: str, choices: Iterable[str], *, n: int = 3, cutoff: float = 0.6) -> list[str]:
    """The valid ``choices`` closest to ``value`` (difflib), best first."""
    pool = [str(c) for c in choices]
    lowered: dict[str, str] = {}
    for c in pool:
        lowered.setdefault(c.lower(), c)
    key = str(value).lower()
    # Prefix relations first ("2.44" -> "2.4", "windows" -> "windows-amd64"), closest length first,
    # then difflib's ratio ("cu1288" -> "cu128", "linux-x86-64" -> "linux-x86_64").
    prefixed = sorted(
        (c for c in lowered if c.startswith(key) or key.startswith(c)), key=lambda c: abs(len(c) - len(key))
    )
    close = difflib.get_close_matches(key, list(lowered), n=n, cutoff=cutoff)
    return [lowered[c] for c in dict.fromkeys([*prefixed, *close])][:n]


def perhaps(value: str, choices: Iterable[str]) -> str:
    """`` Perhaps you meant 'x'?`` (with the leading space) or ``""`` when nothing is close."""
    found = suggest(value, choices)
    if not found:
        return ""
    return " Perhaps you meant " + " or ".join(repr(f) for f in found) + "?"


class BuildMatrixError(ToolError, exit_code=EXIT_INTERNAL):
    """Base class: a user-facing failure with a message that says what failed and what to do."""


class UnknownValue(BuildMatrixError, ValueError, exit_code=3):
    """A filter or lookup value that the compatibility data does not know.

    ``kind`` names the field ("torch", "accel", "platform", "python", "job"), ``value`` the bad
    value, ``suggestions`` the close valid ones (difflib), ``valid`` all valid values.
    """

    def __init__(
        self,
        kind: str,
        value: str,
        valid: Sequence[str],
        *,
        hint: str = "",
        suggestions: Optional[Sequence[str]] = None,
    ) -> None:
        self.kind = kind
        self.value = value
        self.valid = list(valid)
        # suggestions: what the caller knows is meant (a torch >= 2.10 job id: its stable job), else difflib's
        self.suggestions = list(suggestions) if suggestions is not None else suggest(value, self.valid)
        msg = f"Unknown {kind}: {value!r}."
        if self.suggestions:
            msg += " Perhaps you meant " + " or ".join(repr(s) for s in self.suggestions) + "?"
        if len(self.valid) <= 16:
            msg += f" Valid: {', '.join(self.valid)}."
        else:
            msg += f" {len(self.valid)} valid values; list them with `python -m build_matrix plan --format jobs`."
        if hint:
            msg += " " + hint
        super().__init__(msg)


class UnknownJob(UnknownValue):
    """``Plan.job(job_id)`` got an id that is not in the plan (message suggests close ids)."""

    def __init__(
        self, value: str, valid: Sequence[str], *, hint: str = "", suggestions: Optional[Sequence[str]] = None
    ) -> None:
        super().__init__("job", value, valid, hint=hint, suggestions=suggestions)


class DataError(BuildMatrixError, exit_code=4):
    """The compatibility data file is missing or malformed; the message names file, key and value."""

    def __init__(self, path: object, key: str, value: object, reason: str) -> None:
        self.path = str(path)
        self.key = key
        self.value = value
        self.reason = reason
        where = f"{self.path}: {key}" if key else self.path
        super().__init__(f"Invalid compatibility data ({reason}) at {where} = {value!r}")


class FetchError(BuildMatrixError, exit_code=5):
    """``refresh`` could not fetch or parse a page of PyTorch's index; nothing was written."""


class PlanFileError(BuildMatrixError, exit_code=6):
    """A plan JSON file (input of ``diff``) is missing or malformed."""


class BuildError(BuildMatrixError, exit_code=10):
    """A wheel build failed (``build``); raised by ``build_matrix.native``."""


class CheckError(BuildMatrixError, exit_code=11):
    """A built wheel failed a check (``check``); raised by ``build_matrix.wheelcheck``."""
