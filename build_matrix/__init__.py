"""build_matrix: which causal-conv1d wheels to build, how, and which users each one serves.

One build job is one (variant, platform): the wheel is ``cp39-abi3``, so it serves every CPython
that torch release ships for. See docs/build_matrix.md.

Python API (stable; used by ``build_matrix.native`` and CI)::

    from build_matrix.plan import make_plan
    plan = make_plan(torch="2.6-2.9", accels=["cu128"], platforms=["linux-x86_64"])
    job = plan.job("torch2.7-cu128-linux-x86_64")
    job.environment["CIBW_BUILD"]    # 'cp39-manylinux_x86_64'
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "1.0"
