"""Errors of the release tooling; each family has its own exit code, caught once in ``cli.main``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from causal_conv1d_contract.cli import EXIT_FAILURE, EXIT_USAGE, ToolError

__all__ = ["ReleaseError", "UsageError", "CommandFailed", "StepFailed", "EXIT_USAGE", "EXIT_STEP"]

EXIT_STEP = EXIT_FAILURE  #: a pipeline step failed


class ReleaseError(ToolError, exit_code=EXIT_STEP):
    """Base class: a failure with a message meant for a person."""


class UsageError(ReleaseError, exit_code=EXIT_USAGE):
    """A bad option value or input file; the message names the value and what to do."""


class CommandFailed(ReleaseError):
    """A command a step ran exited non-zero."""

    def __init__(self, argv: Sequence[str], returncode: int, log: Optional[Path] = None) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.log = log
        where = f" (full output: {log})" if log is not None else ""
        super().__init__(f"command exited with status {returncode}: {_shell_join(argv)}{where}")


class StepFailed(ReleaseError):
    """A pipeline step failed; names the step."""

    def __init__(self, step: str, reason: str) -> None:
        self.step = step
        self.reason = reason
        super().__init__(f"step '{step}' failed: {reason}")


def _shell_join(argv: Sequence[str]) -> str:
    import shlex

    return " ".join(shlex.quote(str(a)) for a in argv)
