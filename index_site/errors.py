"""The failures of index_site, each with its own exit code (caught once, in ``cli.main``)."""

from __future__ import annotations

__all__ = [
    "IndexSiteError",
    "BadInputError",
    "ManifestError",
    "PublishConflict",
    "VerifyFailed",
    "Problem",
]

import dataclasses

from causal_conv1d_contract.cli import ToolError


@dataclasses.dataclass(frozen=True)
class Problem:
    """One bad input, reported with the file it concerns and the reason."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class IndexSiteError(ToolError, exit_code=1):
    """Base class: a failure that is reported as one message, without a traceback."""


class _ProblemsError(IndexSiteError):
    """A failure made of problems: the message is a summary line, then one problem a line."""

    def __init__(self, problems: list[Problem], summary: str) -> None:
        self.problems = list(problems)
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"{summary}:\n{lines}")


class BadInputError(_ProblemsError, exit_code=1):
    """Bad inputs were found and ``--strict`` makes them a failure (nothing was written)."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__(problems, f"{len(problems)} bad input(s) and --strict is set; the site was not changed")


class ManifestError(IndexSiteError, exit_code=4):
    """The existing manifest cannot be read, so merging into it would drop published wheels."""


class PublishConflict(IndexSiteError, exit_code=3):
    """A wheel name already published with different contents: publishing is append-only."""


class VerifyFailed(_ProblemsError, exit_code=1):
    """``verify`` found links that do not resolve or files that do not match."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__(problems, f"verify found {len(problems)} problem(s)")
