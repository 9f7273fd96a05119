"""Small network helpers shared by the build driver and the release rehearsal."""

from __future__ import annotations

import urllib.error
import urllib.request

__all__ = ["index_reachable"]


def index_reachable(url: str, timeout: float = 8.0) -> bool:
    """Whether an index answers at all: any HTTP status counts; DNS/connect failures do not.

    ``file:`` URLs always count (a folder is checked when it is read).
    """
    if url.startswith("file:"):
        return True
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False
