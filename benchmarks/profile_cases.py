"""Run each headline kernel a few times (for ncu / compute-sanitizer / nsys): fwd and bwd, both
layouts, bf16 B4 D4096 L4096 width 4 silu, the small forward (fwd_small: B16 D1024 L512) and the
B256 D8192 decode update.

    ncu --clock-control none -k regex:'fwd|bwd|update' --launch-skip 2 --launch-count 1 \\
        python benchmarks/profile_cases.py [case ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import load_ops, make_x  # noqa: E402


def main(argv: list[str]) -> int:
    ops, _ = load_ops()
    B, D, L, W = 4, 4096, 4096, 4
    dt = torch.bfloat16
    w = torch.randn(D, W, device="cuda", dtype=dt)
    b = torch.randn(D, device="cuda", dtype=dt)
    cases = argv or ["fwd_cf", "fwd_cl", "bwd_cf", "bwd_cl", "update"]
    for c in cases:
        if c == "update":
            x = torch.randn(256, 8192, 1, device="cuda", dtype=dt)
            st = torch.randn(256, 8192, 3, device="cuda", dtype=dt)
            w8 = torch.randn(8192, W, device="cuda", dtype=dt)
            for _ in range(3):
                ops.update(x, st, w8, None, True, None, None)
            continue
        if c == "fwd_small":  # issue 8's small row: B16 D1024 L512
            xs = make_x(16, 1024, 512, dt, "cf")
            ws, bs = w[:1024], b[:1024]
            for _ in range(3):
                ops.fwd(xs, ws, bs, None, None, False, True)
            continue
        x = make_x(B, D, L, dt, c[-2:])
        dout = make_x(B, D, L, dt, c[-2:])
        for _ in range(3):
            if c.startswith("fwd"):
                ops.fwd(x, w, b, None, None, False, True)
            else:
                ops.bwd(x, w, b, dout, None, None, None, False, True)
    torch.cuda.synchronize()
    print("profile cases done:", " ".join(cases))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
