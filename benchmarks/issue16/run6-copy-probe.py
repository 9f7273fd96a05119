"""The practical ceiling of one read and one write of the forward's size, beside the forward.

A device copy of x (B4 D4096 L4096 bf16, 134 MB) into y and the op's forward on the same buffers,
each timed in a CUDA graph over 4 rotated buffer pairs (536 MB together, past L2) with bench.py's
time_graph. Run on the device in session 7 as `.carry18/copy_probe.py` (run6-calls.md), which had its
own copy of the same graph timing (25 replays of 4 calls instead of time_graph's 20 replays of 20).
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import time_graph  # noqa: E402

import causal_conv1d  # noqa: E402, F401  (registers torch.ops.causal_conv1d)

ops = torch.ops.causal_conv1d
N = 4
xs = [torch.randn(4, 4096, 4096, device="cuda", dtype=torch.bfloat16) for _ in range(N)]
ys = [torch.empty_like(x) for x in xs]
w = torch.randn(4096, 4, device="cuda", dtype=torch.bfloat16)
b = torch.randn(4096, device="cuda", dtype=torch.bfloat16)

copy = time_graph(lambda i: ys[i].copy_(xs[i]), N)
fwd = time_graph(lambda i: ops.fwd.default(xs[i], w, b, None, None, False, True), N)
gbps = 2 * xs[0].numel() * xs[0].element_size() / copy / 1e3
print(f"copy134MB graph {copy:.1f} us ({gbps:.0f} GB/s); fwd {fwd:.1f} us; fwd/copy {fwd / copy:.3f}")
