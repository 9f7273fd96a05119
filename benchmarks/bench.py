"""Benchmarks of the causal-conv1d kernels, one command for the three of them:

    python benchmarks/bench.py [--json OUT.json] [--quick] [--only ROWS]   # eager table, any CUDA machine
    python benchmarks/bench.py --kernel [--peer PATH] [--fla PATH] [--json OUT.json]  # kernel against kernel
    python benchmarks/bench.py --cpu [--json OUT.json]                      # CPU forward against F.conv1d

Each tool is its own module beside this one: eager_bench.py (the eager table: copy ceiling, target
rows, practical shapes, decode updates, F.conv1d baseline), kernel_bench.py (ours against another
build, each op in a CUDA graph, one child process per build) and cpu_bench.py; bench_common.py holds
what they share (float64 references, timers, input sets, rows). Their docstrings say what each
measures and how.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--json", type=Path, default=None, help="write all rows as JSON here")
    ap.add_argument("--quick", action="store_true", help="fewer iterations")
    ap.add_argument("--cpu", action="store_true", help="the CPU forward row only")
    ap.add_argument("--only", default="", help="comma-separated substrings: time only the rows whose name has one")
    ap.add_argument("--kernel", action="store_true", help="kernel mode: CUDA-graph times, ours vs --peer")
    ap.add_argument("--peer", default=None, help="kernel mode: path of another causal-conv1d build to compare")
    ap.add_argument("--fla", default=None, help="kernel mode: path holding flash-linear-attention's `fla` package")
    ap.add_argument("--kernel-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(argv)
    # Each tool imports torch (and the build it times) only when chosen.
    if args.kernel_worker:
        import kernel_bench

        only = [w for w in args.only.split(",") if w]
        return kernel_bench.kernel_worker(args.peer, args.out, only, args.quick, args.fla)
    if args.kernel:
        import kernel_bench

        return kernel_bench.main(args)
    if args.cpu:
        import cpu_bench

        return cpu_bench.main(args)
    import eager_bench

    return eager_bench.main(args)


if __name__ == "__main__":
    raise SystemExit(main())
