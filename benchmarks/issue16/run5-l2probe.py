# Does the forward's L2 prefetch leave lines behind that crowd other data out of L2? After each fwd
# call, y (24 MB) is read twice; the second read's time shows whether y stayed in L2.
import os, statistics, torch, causal_conv1d  # noqa: F401
ops = torch.ops.causal_conv1d
x = torch.randn(4, 4096, 4096, device="cuda", dtype=torch.bfloat16)
w = torch.randn(4096, 4, device="cuda", dtype=torch.bfloat16)
b = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
y = torch.randn(6 << 20, device="cuda")
big = torch.empty(1 << 28, dtype=torch.uint8, device="cuda")
def timed(fn):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); fn(); e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) * 1000
res = {"after fwd": [], "after memset": []}
for i in range(40):
    ops.fwd.default(x, w, b, None, None, False, True)
    y.sum()
    res["after fwd"].append(timed(lambda: y.sum()))
    big.zero_()
    y.sum()
    res["after memset"].append(timed(lambda: y.sum()))
    cold = timed(lambda: (big.zero_(), y.sum()))
print(os.environ.get("CAUSAL_CONV1D_EXP_PF_MODE", "3"), {k: round(statistics.median(v), 2) for k, v in res.items()})
