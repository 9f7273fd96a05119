"""In-tree build helpers used by setup.py, build_matrix and index_site (not shipped in wheels)."""

from pathlib import Path

#: The source tree's root (the sdist's root inside pip's build environment).
REPO_ROOT = Path(__file__).resolve().parent.parent
