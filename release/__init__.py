"""The release pipeline's own tooling.

``python -m release local`` rehearses the whole release on this machine (plan, build, check,
publish, serve, install, run); the other subcommands are the small pieces the GitHub Actions
workflows call (``gha-env``, ``summary``, ``test-wheel``). See docs/release.md.
"""

from __future__ import annotations

__all__: list[str] = []
