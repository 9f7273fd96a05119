"""A static PEP 503 / PEP 691 package index with one index per variant (see docs/index_site.md).

``python -m index_site build WHEELS_DIR --out SITE_DIR`` writes (or merges into) the site;
``yank``, ``serve`` and ``verify`` work on a built site. Everything here runs without torch.
"""

from __future__ import annotations

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the command line (``python -m index_site``); returns the exit code."""
    from index_site.cli import main as _main

    return _main(argv)
