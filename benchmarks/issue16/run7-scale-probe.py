"""Fixed cost per launch: ours fwd/bwd bf16 cf at D4096 L4096 for B = 1, 2, 4, 8 beside a device copy
(x -> y) and a torch.add (2 reads + 1 write, the backward's traffic) of the same bytes, and same-size
copies for the small rows (B16 D1024 L512, and the update row's 16.8 MB); each in a CUDA graph over
rotated buffers past L2 (bench.py's time_graph / n_buffers).

Run on the device from the repository root in session 8 as `.carry19/scale_probe.py LABEL` (calls A
and B, benchmarks/issue16/run7-calls.md).
"""
import math
import sys

sys.path.insert(0, "benchmarks")
import torch  # noqa: E402
from bench import n_buffers, time_graph  # noqa: E402

import causal_conv1d  # noqa: E402, F401

ops = torch.ops.causal_conv1d
tag = sys.argv[1] if len(sys.argv) > 1 else ""
w = torch.randn(4096, 4, device="cuda", dtype=torch.bfloat16)
b = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
for B in (1, 2, 4, 8):
    nb = n_buffers(2 * B * 4096 * 4096 * 2)
    xs = [torch.randn(B, 4096, 4096, device="cuda", dtype=torch.bfloat16) for _ in range(nb)]
    ys = [torch.empty_like(x) for x in xs]
    copy = time_graph(lambda i, xs=xs, ys=ys: ys[i].copy_(xs[i]), nb)
    fwd = time_graph(lambda i, xs=xs: ops.fwd.default(xs[i], w, b, None, None, False, True), nb)
    add = time_graph(lambda i, xs=xs, ys=ys, nb=nb: torch.add(xs[i], ys[i], out=ys[(i + 1) % nb]), nb)
    bwd = (
        time_graph(lambda i, xs=xs, ys=ys: ops.bwd.default(xs[i], w, b, ys[i], None, None, None, False, True), nb)
        if B <= 4
        else float("nan")
    )
    mb = 2 * xs[0].numel() * 2 / 1e6
    print(
        f"scale {tag} B{B} {mb:.0f}MB: copy {copy:.1f} fwd {fwd:.1f} fwd/copy {fwd / copy:.3f} | "
        f"add(2r1w) {add:.1f} bwd {bwd:.1f} bwd/add {bwd / add:.3f}"
    )
    del xs, ys
    torch.cuda.empty_cache()
# small rows: B16 D1024 L512 fwd (x + out), bwd (x + dout + dx), update B256 D8192 (x + out + state rw ~ 2 x 16.8 MB)
for name, shape in (("B16 D1024 L512", (16, 1024, 512)), ("update-size 16.8MB", (256 * 8192 * 4,))):
    nb = n_buffers(2 * math.prod(shape) * 2)
    xs = [torch.randn(*shape, device="cuda", dtype=torch.bfloat16) for _ in range(nb)]
    ys = [torch.empty_like(x) for x in xs]
    copy = time_graph(lambda i, xs=xs, ys=ys: ys[i].copy_(xs[i]), nb)
    add = time_graph(lambda i, xs=xs, ys=ys, nb=nb: torch.add(xs[i], ys[i], out=ys[(i + 1) % nb]), nb)
    mb = xs[0].numel() * 2 / 1e6
    print(
        f"small {name} ({mb:.1f} MB per tensor): copy {copy:.2f} us ({2 * mb / copy * 1e3:.0f} GB/s) "
        f"add(2r1w) {add:.2f} us ({3 * mb / add * 1e3:.0f} GB/s)"
    )
