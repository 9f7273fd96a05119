"""Does the forward's L2 prefetch leave lines behind that crowd other data out of L2?

After each forward call, y (24 MB) is read twice; the second read's time shows whether y stayed in
L2 ("after fwd"); the same with a 256 MB memset between the forward and the reads ("after memset").

Usage: python run5-l2probe.py LABEL (printed with the result). As run in session 6 (run5-calls.md),
each call set the forward's prefetch mode through a temporary switch of the experiment build;
main has no such switch, so this measures main's forward.
"""

import statistics
import sys

import torch

import causal_conv1d  # noqa: F401  (registers torch.ops.causal_conv1d)

ops = torch.ops.causal_conv1d
x = torch.randn(4, 4096, 4096, device="cuda", dtype=torch.bfloat16)
w = torch.randn(4096, 4, device="cuda", dtype=torch.bfloat16)
b = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
y = torch.randn(6 << 20, device="cuda")
big = torch.empty(1 << 28, dtype=torch.uint8, device="cuda")


def timed(fn) -> float:
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) * 1000


res: dict[str, list[float]] = {"after fwd": [], "after memset": []}
for _ in range(40):
    ops.fwd.default(x, w, b, None, None, False, True)
    y.sum()
    res["after fwd"].append(timed(lambda: y.sum()))
    big.zero_()
    y.sum()
    res["after memset"].append(timed(lambda: y.sum()))
label = sys.argv[1] if len(sys.argv) > 1 else "main"
print(label, {k: round(statistics.median(v), 2) for k, v in res.items()})
