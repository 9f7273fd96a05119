from __future__ import annotations

import sys

from index_site.cli import main

if __name__ == "__main__":
    sys.exit(main())
