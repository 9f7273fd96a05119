"""Benchmark index_site (targets): index 2,000 wheels (<= 5 s), then add one wheel (<= 1 s).

    python benchmarks/index_site_bench.py [--wheels 2000] [--keep DIR]

The wheels are small valid synthetic ones (tests.helpers.wheels.write_wheel), spread over variants,
platforms and versions like a real release history. Generating them is not timed.
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from index_site.site import BuildOptions, build_site  # noqa: E402
from tests.helpers.wheels import write_wheel  # noqa: E402

TORCH = [f"2.{m}" for m in range(4, 15)]
ACCELS = ["cpu", "cu118", "cu121", "cu124", "cu126", "cu128", "cu129", "cu130"]
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_28_aarch64", "win_amd64"]


def make_wheels(directory: Path, count: int) -> None:
    combos = itertools.product(
        (f"1.{minor}.{patch}" for minor in range(4, 99) for patch in range(10)), TORCH, ACCELS, PLATFORMS
    )
    for version, torch, accel, platform in itertools.islice(combos, count):
        write_wheel(directory, version=version, variant=f"torch{torch}-{accel}", platform=platform)


def timed(opts: BuildOptions) -> tuple[float, float, int]:
    """Wall-clock and CPU seconds of one build (CPU time shows how much of the wall time is a busy machine)."""
    start, cpu = time.perf_counter(), time.process_time()
    result = build_site(opts)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    if result.problems:
        raise SystemExit(f"unexpected problems: {result.problems[:3]}")
    return elapsed, cpu, len(result.added)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=int, default=2000)
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it (default: a temp dir)")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="index-site-bench-"))
    try:
        many, one, site = work / "wheels", work / "one-more", work / "site"
        make_wheels(many, args.wheels)
        write_wheel(one, version="9.9.9", variant="torch2.14-cu130", platform="manylinux_2_28_x86_64")
        t_all, c_all, n_all = timed(BuildOptions(many, site, now="2026-01-01T00:00:00Z"))
        t_one, c_one, n_one = timed(BuildOptions(one, site, now="2026-01-02T00:00:00Z"))
        print(f"index {n_all} wheels into a new site: {t_all:.2f} s wall, {c_all:.2f} s CPU (target <= 5 s)")
        print(
            f"add {n_one} wheel to that site ({n_all + n_one} wheels): {t_one:.2f} s wall, {c_one:.2f} s CPU "
            "(target <= 1 s)"
        )
        return 0 if t_all <= 5 and t_one <= 1 else 1
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
