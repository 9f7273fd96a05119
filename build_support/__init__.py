"""In-tree build helpers used by setup.py, build_matrix and index_site (not shipped in wheels)."""
