"""What limits a kernel-mode row: Nsight Compute's reading of each kernel the op launches.

    python benchmarks/ncu_rows.py [--only ROWS] [--peer PATH] [--json OUT.json] [--ncu ncu]

For each selected row of `bench.py --kernel` (`--only`: comma-separated substrings of row names,
as there) and each build (ours, and with `--peer` another causal-conv1d build, as in bench.py),
runs the op once under `ncu` and prints, per kernel: duration, DRAM throughput (% of peak), SM
throughput, achieved and theoretical occupancy, issue slots busy, cycles with no eligible warp,
warp cycles per issued instruction, registers per thread and the L2 hit rate. Inputs are the row's
own (one input set), created and warmed up outside the profiled range; ncu runs with
`--clock-control none` (the clocks the benchmark sees) and flushes the caches before each kernel
(its default), so every input byte comes from DRAM as in the benchmark's rotated sets.

How the kernels are told apart: the worker profiles only between cudaProfilerStart / Stop, and
after each row's op launches a `torch.cuda._sleep` kernel (`spin_kernel`), which neither build
uses; the kernels between two of those are the row's.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

SECTIONS = [
    "SpeedOfLight",
    "Occupancy",
    "SchedulerStats",
    "WarpStateStats",
    "LaunchStats",
    "ComputeWorkloadAnalysis",
    "MemoryWorkloadAnalysis",
]
MARKER = "spin_kernel"

# (column, section, metric name as ncu prints it); the section "" matches any section
COLUMNS = [
    ("µs", "GPU Speed Of Light Throughput", "Duration"),
    ("DRAM %", "GPU Speed Of Light Throughput", "DRAM Throughput"),
    ("SM %", "GPU Speed Of Light Throughput", "Compute (SM) Throughput"),
    ("occ %", "Occupancy", "Achieved Occupancy"),
    ("theo %", "Occupancy", "Theoretical Occupancy"),
    ("issue %", "Compute Workload Analysis", "Issue Slots Busy"),
    ("no elig %", "Scheduler Statistics", "No Eligible"),
    ("cyc/inst", "Warp State Statistics", "Warp Cycles Per Issued Instruction"),
    ("regs", "Launch Statistics", "Registers Per Thread"),
    ("L2 hit %", "Memory Workload Analysis", "L2 Hit Rate"),
]
# ncu writes time units as "nsecond" or "ns" depending on its version
TIME_UNITS = {
    "nsecond": 1e-3,
    "usecond": 1.0,
    "msecond": 1e3,
    "second": 1e6,
    "ns": 1e-3,
    "us": 1.0,
    "ms": 1e3,
    "s": 1e6,
}


def worker(peer: Optional[str], only: list[str], order: Path) -> int:
    """Child process under ncu: each selected row's op once inside the profiled range, a marker
    kernel after it; the row names in order to `order`."""
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from kernel_bench import CaseInputs, _Build, kernel_rows

    build = _Build(peer)
    names = []
    for case in kernel_rows(only):
        try:
            inp = CaseInputs(build, case, nbuf=1)
            inp.call(0)  # warm-up: first-call setup (workspace, caches) stays out of the profile
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - e.g. a width the peer does not support
            print(f"[{build.name}] {case[0]}: skipped ({type(exc).__name__}: {str(exc)[:120]})", file=sys.stderr)
            torch.cuda.empty_cache()
            continue
        torch.cuda.profiler.start()
        inp.call(0)
        torch.cuda._sleep(1000)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        names.append(case[0])
        del inp
        torch.cuda.empty_cache()
    order.write_text(json.dumps({"build": build.name, "where": build.where, "rows": names}))
    return 0


def parse(csv_text: str) -> list[dict[str, Any]]:
    """ncu's `--csv --page details` output -> one dict per kernel launch, in launch order:
    {"id", "name", "metrics": {(section, metric): (value, unit)}}."""
    lines = [ln for ln in csv_text.splitlines() if ln.startswith('"')]
    kernels: dict[int, dict[str, Any]] = {}
    for rec in csv.DictReader(lines):
        try:
            kid = int(rec["ID"])
        except (KeyError, ValueError):
            continue
        k = kernels.setdefault(kid, {"id": kid, "name": rec.get("Kernel Name", "?"), "metrics": {}})
        k["metrics"][(rec.get("Section Name", ""), rec.get("Metric Name", ""))] = (
            rec.get("Metric Value", ""),
            rec.get("Metric Unit", ""),
        )
    return [kernels[i] for i in sorted(kernels)]


def number(value: str) -> Optional[float]:
    try:
        return float(value.replace(",", ""))
    except ValueError:
        return None


def kernel_row(k: dict[str, Any]) -> dict[str, Any]:
    """The table's columns of one kernel (None where ncu gave no such metric)."""
    out: dict[str, Any] = {"kernel": short_name(k["name"])}
    for col, section, metric in COLUMNS:
        hit = k["metrics"].get((section, metric))
        if hit is None:  # section titles differ between ncu versions: match the metric name alone
            hit = next((v for (s, m), v in k["metrics"].items() if m == metric), None)
        v = number(hit[0]) if hit else None
        if v is not None and col == "µs":
            v *= TIME_UNITS.get(hit[1], float("nan"))
        out[col] = v
    return out


def short_name(name: str) -> str:
    """A demangled kernel name without namespaces and parameter lists: `f<T, 4, 8>`."""
    n = name.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    n = (n[5:] if n.startswith("void ") else n).split("(")[0]
    base, _, targs = n.partition("<")
    base = base.split("::")[-1]
    targs = targs.rsplit(">", 1)[0]
    targs = ", ".join(a.strip().split("::")[-1] for a in targs.split(",")) if targs else ""
    return f"{base}<{targs}>" if targs else base


def group(kernels: list[dict[str, Any]], names: list[str]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Split the launch sequence at the marker kernels: the i-th group is names[i]'s."""
    groups: list[list[dict[str, Any]]] = [[]]
    for k in kernels:
        if MARKER in k["name"]:
            groups.append([])
        else:
            groups[-1].append(k)
    done, after = groups[:-1], groups[-1]  # a row ends at its marker; nothing may follow the last
    if len(done) != len(names) or after:
        raise SystemExit(
            f"ncu reported {len(done)} rows' kernels (+{len(after)} after the last marker) for {len(names)} rows run: {names}"
        )
    groups = done
    return list(zip(names, groups))


def profile(ncu: str, peer: Optional[str], only: str, td: Path, who: str) -> dict[str, Any]:
    log, order = td / f"{who}.csv", td / f"{who}.json"
    cmd = [ncu, "--profile-from-start", "off", "--clock-control", "none", "--csv", "--page", "details"]
    cmd += ["--print-units", "base"]
    cmd += ["--log-file", str(log)]
    for s in SECTIONS:
        cmd += ["--section", s]
    cmd += [sys.executable, str(Path(__file__).resolve()), "--worker", "--order", str(order), "--only", only]
    if peer:
        cmd += ["--peer", peer]
    cwd = str(Path(__file__).resolve().parent.parent) if peer is None else None
    proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, text=True)
    # the report goes to the log file; ncu versions that print it to stdout instead are read there
    text = log.read_text() if log.exists() else ""
    if '"ID"' not in text:
        text = proc.stdout
    if proc.returncode != 0 or not order.exists() or '"ID"' not in text:
        raise SystemExit(f"ncu run for {who} failed (exit {proc.returncode}): {' '.join(cmd)}\n{text[-2000:]}")
    meta = json.loads(order.read_text())
    rows = []
    for name, ks in group(parse(text), meta["rows"]):
        rows.append({"name": name, "kernels": [kernel_row(k) for k in ks]})
    return {"build": meta["build"], "where": meta["where"], "rows": rows}


def fmt(v: Optional[float], col: str) -> str:
    if v is None:
        return "—"
    return f"{v:.0f}" if col == "regs" else f"{v:.1f}"


def table(results: list[dict[str, Any]]) -> str:
    head = "| row | build | kernel | " + " | ".join(c for c, _, _ in COLUMNS) + " |"
    lines = [head, "|" + "---|" * (3 + len(COLUMNS))]
    by_build = [{r["name"]: r for r in res["rows"]} for res in results]
    names = [r["name"] for r in results[0]["rows"]]
    for name in names:
        for res, rows in zip(results, by_build):
            for k in rows.get(name, {}).get("kernels", []):
                cells = " | ".join(fmt(k[c], c) for c, _, _ in COLUMNS)
                lines.append(f"| {name} | {res['build']} | `{k['kernel']}` | {cells} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated substrings of kernel-mode row names")
    ap.add_argument("--peer", default=None, help="path of another causal-conv1d build (as bench.py --peer)")
    ap.add_argument("--json", type=Path, default=None, help="write the readings as JSON here")
    ap.add_argument("--ncu", default=os.environ.get("NCU", "ncu"), help="the ncu executable (default: ncu, or $NCU)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--order", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    only = [w for w in args.only.split(",") if w]
    if args.worker:
        return worker(args.peer, only, args.order)
    if shutil.which(args.ncu) is None:
        raise SystemExit(f"{args.ncu!r} not found: install Nsight Compute or pass --ncu PATH")
    with tempfile.TemporaryDirectory() as tmp:
        td = Path(tmp)
        results = [profile(args.ncu, None, args.only, td, "ours")]
        if args.peer:
            results.append(profile(args.ncu, args.peer, args.only, td, "peer"))
    print(table(results))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
