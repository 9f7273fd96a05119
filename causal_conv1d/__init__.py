"""causal-conv1d: causal depthwise conv1d kernels (CUDA and CPU) behind upstream's API.

The serving ops (``causal_conv1d_varlen_fn``, ``causal_conv1d_update_spec``) follow vLLM's
convention, and ``causal_conv1d.vllm`` is a drop-in for vLLM's ``causal_conv1d`` module
(docs/serving.md).
"""

import sys as _sys

from causal_conv1d._guard import check_build_record as _check_build_record

try:
    __version__ = _check_build_record()  # raises ImportError naming the right index before _C loads
    from causal_conv1d import _C  # noqa: F401  (registers the torch ops)
except ImportError as _exc:
    # `python -m causal_conv1d doctor` exists for exactly the installs that fail here. While `-m`
    # locates __main__, sys.argv[0] is "-m" (Python docs, "-m"): only then the error is kept for
    # doctor to report and the rest of the package is not loaded.
    if _sys.argv[:1] != ["-m"]:
        raise
    _IMPORT_ERROR: "ImportError | None" = _exc
    __version__ = "unknown"
else:
    _IMPORT_ERROR = None
if _IMPORT_ERROR is None:
    from causal_conv1d import _ops  # noqa: E402,F401  (fake kernels and the autograd of fwd)
    from causal_conv1d.causal_conv1d_interface import causal_conv1d_fn, causal_conv1d_update  # noqa: E402
    from causal_conv1d.varlen import causal_conv1d_update_spec, causal_conv1d_varlen_fn  # noqa: E402

__all__ = [
    "causal_conv1d_fn",
    "causal_conv1d_update",
    "causal_conv1d_varlen_fn",
    "causal_conv1d_update_spec",
    "__version__",
]
