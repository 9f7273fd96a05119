"""Small shapes through the bulk-copy channel-first kernels (fwd_cf_bulk_kernel, bwd_cf_bulk_kernel:
16-bit rows of >= 2048 tokens on sm_90+), for compute-sanitizer (memcheck, racecheck):

    CAUSAL_CONV1D_FWD_BULK_BLOCKS=1 CAUSAL_CONV1D_FWD_BULK_STAGES=2 \
    CAUSAL_CONV1D_BWD_BULK_BLOCKS=1 CAUSAL_CONV1D_BWD_BULK_STAGES=2 \
        compute-sanitizer --tool memcheck --error-exitcode 1 python tests/gpu/sanitize_bulk.py

(one block per SM and two stages: each warp walks several segments, so every ring wraps around).
Exits non-zero when a result is off against the float64 reference; the sanitizer reports bad
accesses and races itself. sanitize_driver.py covers the other kernels (its rows are shorter).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import load_ops  # noqa: E402
from ref import conv_ref, rel_err, tol_for  # noqa: E402


def main() -> int:
    ops = load_ops()
    bad = n = 0
    for dtype in (torch.bfloat16, torch.float16):
        for W in (2, 3, 4):
            for B, D, L in ((1, 3, 2048), (2, 5, 4104), (4, 160, 4104)):
                g = torch.Generator(device="cuda").manual_seed(n)
                x = torch.randn(B, D, L, device="cuda", dtype=dtype, generator=g)
                w = (torch.randn(D, W, device="cuda", generator=g) / W**0.5).to(dtype)
                b = torch.randn(D, device="cuda", generator=g).to(dtype)
                init = torch.randn(B, D, W - 1, device="cuda", dtype=dtype, generator=g)
                dout = torch.randn(B, D, L, device="cuda", dtype=dtype, generator=g)
                out, fin = ops.fwd(x, w, b, None, init, True, True)
                ref, ref_fin = conv_ref(x, w, b, initial_states=init, silu=True)
                errs = [rel_err(out, ref)]
                ok = errs[0] < tol_for(dtype) and torch.equal(fin, ref_fin.to(dtype))
                dx, dw, db, _ = ops.bwd(x, w, b, dout, None, None, None, False, True)
                x64 = x.double().requires_grad_(True)
                w64 = w.double().requires_grad_(True)
                b64 = b.double().requires_grad_(True)
                r64, _ = conv_ref(x64, w64, b64, silu=True)
                r64.backward(dout.double())
                errs += [rel_err(dx, x64.grad), rel_err(dw, w64.grad), rel_err(db, b64.grad)]
                ok = ok and max(errs[1:]) < tol_for(dtype)
                n += 1
                if not ok:
                    bad += 1
                    print(f"FAIL {dtype} W={W} B={B} D={D} L={L}: rel errs {errs}")
    torch.cuda.synchronize()
    print(f"sanitize_bulk: {n - bad}/{n} cases right")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
