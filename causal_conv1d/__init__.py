"""causal-conv1d: causal depthwise conv1d kernels (CUDA and CPU) behind upstream's API."""

from causal_conv1d._guard import check_build_record as _check_build_record

__version__ = _check_build_record()  # raises ImportError naming the right index before _C loads

from causal_conv1d import _C  # noqa: E402,F401  (registers the torch ops)
from causal_conv1d import _ops  # noqa: E402,F401  (fake kernels + autograd)
from causal_conv1d.causal_conv1d_interface import causal_conv1d_fn, causal_conv1d_update  # noqa: E402

__all__ = ["causal_conv1d_fn", "causal_conv1d_update", "__version__"]
