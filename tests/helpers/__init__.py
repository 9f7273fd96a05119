"""Helpers shared by several test folders (and the benchmarks): ``tests.helpers.wheels.write_wheel``.

Imported as ``tests.helpers...``: pytest puts the repository root on sys.path (pyproject.toml's
``pythonpath``); ``tests`` itself is a namespace package (no __init__.py).
"""
