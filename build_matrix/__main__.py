"""``python -m build_matrix``: see ``build_matrix.cli``."""

from __future__ import annotations

import sys

from build_matrix.cli import main

if __name__ == "__main__":
    sys.exit(main())
